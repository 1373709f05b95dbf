"""The `specops` console script. `specops hook …` runs on every agent tool call, and `specops
status` / `dry-run` are what people type to look around, so they are answered here without
importing click, pydantic or dagster when they can be (see `quick`); everything else goes to the
click CLI."""

from __future__ import annotations

import sys


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["hook"]:
        from .hook import main as hook_main

        sys.exit(hook_main(argv[1:]))
    if {"status", "dry-run"} & set(argv[:3]):
        from .quick import answer

        code = answer(argv)
        if code is not None:
            sys.exit(code)
    from .cli import main as cli_main

    cli_main()
