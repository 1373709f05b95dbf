"""How the pre-tool-use hook reads a command (`hooks/walk.py`): scripts it runs are checked, size and
nesting limits deny rather than crash, and no unhooked channel (issue #17, item 2) gets through:
an interactive shell or REPL, or a program computed at run time, is denied with a reason that says
what to do instead, while the benign forms of the same programs stay allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from specops_dag.hooks import walk

from ..support.hooks import check


def test_a_script_on_disk_that_the_command_runs_is_checked(repo: Path) -> None:
    (repo / "scripts").mkdir()
    (repo / "scripts/reset.sh").write_text("#!/bin/bash\ngit reset --hard origin/main\n")
    assert check(repo, "bash scripts/reset.sh") == (
        "`git reset --hard origin/main` discards uncommitted changes; to keep a file's changes, "
        "copy it aside (`cp <file> /tmp/`); to undo a file's changes, run "
        "`git show HEAD:<file> > <file>`")
    assert check(repo, "./scripts/reset.sh") is not None


def test_a_command_over_the_size_limit_is_denied(repo: Path) -> None:
    assert check(repo, "#" * (walk.MAX_COMMAND + 1)) == (
        "the command is 200,001 characters long, more than the 200,000 the hook checks; "
        "split it, or write file contents with apply_patch")


def test_a_huge_command_is_checked_within_the_limit(repo: Path) -> None:
    assert check(repo, "echo hi; " * 22_000) is None
    assert check(repo, "echo hi; " * 22_000 + "git push -f") is not None


def test_deep_nesting_is_denied_not_crashed(repo: Path) -> None:
    assert check(repo, "eval " * 20 + "echo ok") == (
        "the command nests shells, eval or substitutions more than 12 levels deep and cannot be "
        "checked; run the commands directly")
    assert check(repo, "$(" * 5000 + "rm -rf /") is not None
    assert check(repo, "sudo " * 100 + "rm -rf /") is not None
    assert check(repo, "cat | " * 5000 + "sh") == (
        "`sh` runs shell commands the hook cannot see (piped from another command); write the "
        "commands literally")


INTERACTIVE = ("starts an interactive {what}; what is typed into it later never reaches this "
               "hook, so it is denied: run each command directly (e.g. `bash -c '…'`, "
               "`python3 script.py`, `psql -c '…'`)")


COMPUTED = ("`{cmd}`: the program is computed at run time, so the hook cannot check what runs; "
            "write the command literally")


DENIED = {
    "bash": ("bash", INTERACTIVE.format(what="shell")),
    "bash -i": ("bash -i", INTERACTIVE.format(what="shell")),
    "bash -l": ("bash -l", INTERACTIVE.format(what="shell")),
    "sh": ("sh", INTERACTIVE.format(what="shell")),
    "zsh": ("zsh", INTERACTIVE.format(what="shell")),
    "dash": ("dash", INTERACTIVE.format(what="shell")),
    "fish": ("fish", INTERACTIVE.format(what="shell")),
    "pwsh": ("pwsh", INTERACTIVE.format(what="shell")),
    "python": ("python", INTERACTIVE.format(what="interpreter")),
    "python3": ("python3", INTERACTIVE.format(what="interpreter")),
    "python3 -i script": ("python3 -i tools/x.py", INTERACTIVE.format(what="interpreter")),
    "node": ("node", INTERACTIVE.format(what="interpreter")),
    "psql": ("psql", INTERACTIVE.format(what="database shell")),
    "psql to a database": ("psql -h db -U app orders", INTERACTIVE.format(what="database shell")),
    "mysql": ("mysql -u root orders", INTERACTIVE.format(what="database shell")),
    "sqlite3 on a file": ("sqlite3 app.db", INTERACTIVE.format(what="database shell")),
    "dotnet fsi": ("dotnet fsi", INTERACTIVE.format(what="F# interpreter")),
    "xargs on the terminal": ("xargs git", "builds commands from what is typed into it later, "
                              "which never reaches this hook; pipe it a known input or run the "
                              "commands directly"),
}


COMPUTED_CASES = {
    "substituted program": "$(echo git) push --force origin HEAD:refs/heads/x",
    "backticked program": "`echo git` push --force origin HEAD:refs/heads/x",
    "unknown variable": "$GIT push --force origin HEAD:refs/heads/x",
    "eval of a variable": 'eval "$CMD"',
    "sh -c of a variable": 'sh -c "$CMD"',
    "xargs building the verb from unseen input": "cat cmds.txt | xargs -I R R --force",
}


ALLOWED = {
    "a script": "bash scripts/build.sh",
    "bash -c": "bash -c 'dotnet test'",
    "a heredoc into a shell": "bash <<'EOF'\ndotnet build\nEOF",
    "SQL on stdin": "echo 'SELECT 1' | psql orders",
    "psql -c": "psql -h db orders -c 'SELECT 1'",
    "mysql -e": "mysql -u root orders -e 'SELECT 1'",
    "sqlite3 with SQL": "sqlite3 app.db 'SELECT 1'",
    "a python script": "python3 tools/report.py",
    "a python module": "python3 -m pytest -q",
    "python version": "python3 --version",
    "node script": "node build.js",
    "an F# script": "dotnet fsi build.fsx",
    "a program under HOME": "$HOME/bin/tool --help",
    "a variable set in the command": "X=git; $X status",
    "xargs with a literal program": "find . -name '*.cs' | xargs grep -n TODO",
    "xargs with a literal program and a replace string": "ls | xargs -I{} echo {}",
    "a substitution as an argument": 'echo "$(git rev-parse HEAD)"',
}


@pytest.mark.parametrize(("command", "reason"), DENIED.values(), ids=DENIED.keys())
def test_an_interactive_shell_or_repl_is_denied_with_what_to_do_instead(
        repo: Path, command: str, reason: str) -> None:
    assert check(repo, command) == f"`{command}` {reason}"


@pytest.mark.parametrize("command", COMPUTED_CASES.values(), ids=COMPUTED_CASES.keys())
def test_a_program_computed_at_run_time_is_denied_and_told_to_write_it_literally(
        repo: Path, command: str) -> None:
    reason = check(repo, command)
    assert reason is not None and reason.endswith(
        ": the program is computed at run time, so the hook cannot check what runs; write the "
        "command literally"), reason


def test_the_computed_program_reason_names_the_command(repo: Path) -> None:
    command = "$(echo git) push --force origin HEAD:refs/heads/x"
    assert check(repo, command) == COMPUTED.format(cmd=command)


def test_wrappers_and_xargs_do_not_hide_a_shell_or_the_verb_they_build(
        repo: Path) -> None:
    assert check(repo, "env bash") == f"`bash` {INTERACTIVE.format(what='shell')}"
    assert check(repo, "echo git | xargs -I{} {} push --force origin HEAD:refs/heads/x") == (
        "`git push --force origin HEAD:refs/heads/x` force-pushes (`--force`), which rewrites "
        "remote history; the product commits and pushes after validation: push nothing")


@pytest.mark.parametrize("command", ALLOWED.values(), ids=ALLOWED.keys())
def test_the_benign_forms_of_the_same_programs_stay_allowed(repo: Path,
                                                            command: str) -> None:
    assert check(repo, command) is None
