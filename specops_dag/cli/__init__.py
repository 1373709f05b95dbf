"""The `specops` console script and its click commands: parsing, printing and exit codes over
the domain packages, nothing decided here.

A command stays quick by lazy imports (the one speed strategy, see `pyproject.toml`): `specops
hook …` runs on every agent tool call, so it is dispatched before click is imported; pydantic and
YAML come with the commands that read state or definitions, the Dagster adapter only with the
commands that need an instance. Beside that, this entry point tunes CPython's cyclic garbage
collector (`specops_dag.collector`): importing pydantic makes hundreds of thousands of long-lived
objects, and the default thresholds walk them again and again, then once more at interpreter
exit — a third of a short command's time. A higher first threshold keeps collection on (a long
`specops run` still collects) and `gc.freeze()` before exit skips the final walk; no behaviour
changes."""

from __future__ import annotations

import gc
import sys

from specops_dag import collector


def main() -> None:
    collector.tune()
    try:
        argv = sys.argv[1:]
        if argv[:1] == ["hook"]:
            from specops_dag.hooks import main as hook_main

            sys.exit(hook_main(argv[1:]))
        from specops_dag.cli.commands import main as cli_main

        cli_main()
    finally:
        gc.freeze()  # the process is ending: nothing left to collect is worth walking every object
