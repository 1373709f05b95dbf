"""What codex runs for the product's own hooks: `<python> -I <this file> EVENT`.

Isolated mode (`-I`) keeps the session's working directory, the user site and `PYTHON*`
variables off the import path, so nothing an agent writes (a `json.py`, a `specops_dag/`) can
shadow the hook's imports. Only `sys` is imported before the hook itself: if that import, or
anything after it, fails, `pre-tool-use` still denies (exit 2 with the reason on stderr, which
codex hands to the model) and the state hooks stay silent (they fail open). Codex treats any
other exit as "hook failed" and would run the tool.
"""

import sys

DENY = 2


def run(argv: list[str]) -> int:
    event = argv[0] if argv else ""
    try:
        from specops_dag.hooks import main

        code = main(argv)
        sys.stdout.flush()
        return code
    except BaseException as err:  # noqa: BLE001 — whatever went wrong, the call is decided
        if event != "pre-tool-use":
            return 0
        try:
            sys.stderr.write(f"specops hook pre-tool-use failed ({type(err).__name__}: "
                             f"{str(err)[:300]}); the call is denied, since specops denies "
                             "what it cannot check\n")
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001, S110 — the exit code alone still denies
            pass
        return DENY


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
