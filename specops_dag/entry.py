"""The `specops` console script. `specops hook …` runs on every agent tool call, so it is
dispatched here before click is imported; everything else goes to the click CLI."""

from __future__ import annotations

import sys


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["hook"]:
        from .hook import main as hook_main

        sys.exit(hook_main(argv[1:]))
    from .cli import main as cli_main

    cli_main()
