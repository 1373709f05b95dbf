"""The `specops` console script and its click commands: parsing, printing and exit codes over
the domain packages, nothing decided here. `specops hook …` runs on every agent tool call, so it
is dispatched before click is imported; the Dagster adapter is imported only by the commands that
need an instance."""

from __future__ import annotations

import sys


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["hook"]:
        from specops_dag.hooks import main as hook_main

        sys.exit(hook_main(argv[1:]))
    from specops_dag.cli.commands import main as cli_main

    cli_main()
