"""The `specops` console script. `specops hook …` runs on every agent tool call, so it is
dispatched here without importing click, pydantic or dagster; everything else goes to the CLI."""

from __future__ import annotations

import sys


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "hook":
        from .hook import main as hook_main

        sys.exit(hook_main(sys.argv[2:]))
    from .cli import main as cli_main

    cli_main()
