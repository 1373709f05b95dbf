"""`specops hook pre-tool-use`: dangerous commands are denied, benign ones pass, nothing crashes."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specops_dag import hooks as hook
from specops_dag.hooks import pre_tool_use, walk

from ..support.harness import REPO, VENV_BIN
from ..support.hooks import SPECOPS_VARS, call, check, denial, payload

PATCH_SCRIPT = ("apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: {path}\n+#!/bin/sh\n+{body}\n"
                "*** End Patch\nEOF\n{run}")

DANGEROUS = {
    "rm -rf /": "rm -rf /",
    "root wildcard": "rm -rf /*",
    "home by tilde": "rm -rf ~",
    "home by $HOME": "rm -rf $HOME",
    "home quoted braces": 'rm -rf "${HOME}/"',
    "home wildcard": "rm -rf ~/*",
    "the repo as .": "rm -rf .",
    "the repo parent": "rm -rf ..",
    "wildcard at repo root": "rm -rf *",
    "non-recursive wildcard at root": "rm -f ./*",
    "dot wildcard at root": "rm -rf .*",
    ".git": "rm -rf .git",
    "inside .git": "rm -r .git/objects",
    ".git wildcard": "rm -rf .git/*",
    "nested .git": "rm -rf */.git",
    "repo by $PWD": 'rm -rf "$PWD"',
    "repo by $(pwd)": 'rm -rf "$(pwd)"',
    "repo by toplevel": 'rm -rf "$(git rev-parse --show-toplevel)"',
    "long options": "rm --recursive --force /",
    "split flags": "rm -r -f -- /",
    "no-preserve-root": "rm -rf --no-preserve-root /",
    "system folder": "rm -rf /etc",
    "unset variable then wildcard": 'rm -rf "$BUILD_DIR"/*',
    "variable assigned before": "D=/; rm -rf $D",
    "cd to / first": "cd / && rm -rf *",
    "cd to the parent first": "cd .. && rm -rf -- *",
    "delivery state": "rm -rf phases",
    "one delivery's state": "rm -rf phases/d1",
    "sudo": "sudo rm -rf /",
    "sudo -u and an absolute binary": "sudo -u root /bin/rm -rf /",
    "env prefixes": "FOO=1 env BAR=2 rm -rf .",
    "timeout and nice": "timeout 5 nice -n 10 rm -rf ~",
    "command builtin": "command rm -rf /",
    "exec": "exec git push --force",
    "nohup in the background": "nohup rm -rf ~ &",
    "backslash-escaped name": "\\rm -rf /",
    "quoted name": '"rm" -rf /',
    "split quoted name": "r''m -rf /",
    "ANSI-C quoted name": "$'\\x72\\x6d' -rf /",
    "bash -c": "bash -c 'rm -rf /'",
    "sh -c inside sh -c": "sh -c \"bash -c 'git push --force'\"",
    "bash -lc": 'bash -lc "git reset --hard"',
    "zsh -c": "zsh -c 'git clean -fdx'",
    "su -c": "su -c 'rm -rf /'",
    "pwsh -c": 'pwsh -c "git push --force"',
    "eval": 'eval "git push -f origin main"',
    "env -S": "env -S 'rm -rf /'",
    "trap": "trap 'rm -rf ~' EXIT",
    "printed into sh": "echo 'rm -rf ~' | sh",
    "here-string into bash": "bash <<< 'rm -rf /'",
    "heredoc into bash": "bash <<'EOF'\nrm -rf /\nEOF",
    "substitution in double quotes": 'echo "$(rm -rf ~)"',
    "backticks": "echo `git push --force`",
    "process substitution": "cat <(rm -rf /)",
    "after ;": "ls; rm -rf /",
    "after &&": "dotnet build && git push --force",
    "after ||": "false || git reset --hard",
    "after a pipe": "ls | rm -rf ~",
    "subshell": "(cd / && rm -rf *)",
    "brace group": "{ git push --force; }",
    "if/then": "if true; then rm -rf /; fi",
    "for loop over / and ~": 'for d in / ~; do rm -rf "$d"; done',
    "for loop over *": 'for f in *; do rm -rf "$f"; done',
    "line continuation": "rm -rf \\\n /",
    "after a comment line": "# clean up\nrm -rf /",
    "CRLF lines": "ls\r\nrm -rf /",
    "xargs": "echo / | xargs rm -rf",
    "find -delete": "find . -delete",
    "find -exec rm": "find / -exec rm -rf {} +",
    "push --force": "git push --force origin main",
    "push -f": "git push -f",
    "push -uf": "git push -uf origin feat-x",
    "force-with-lease": "git push --force-with-lease origin feat-x",
    "force-with-lease=": "git push --force-with-lease=main:abc origin main",
    "+HEAD": "git push origin +HEAD",
    "+refspec": "git push origin +feat-x:main",
    "mirror": "git push --mirror",
    "delete a remote branch": "git push origin --delete main",
    "delete by :ref": "git push origin :main",
    "git -C": "git -C /tmp/other push -f",
    "git -c": "git -c core.quotepath=off push --force",
    "absolute git": "/usr/bin/git push --force",
    "reset --hard": "git reset --hard",
    "reset --hard HEAD~3": "git reset --hard HEAD~3",
    "clean -fdx": "git clean -fdx",
    "clean -fd": "git clean -fd",
    "clean --force": "git clean --force -d",
    "checkout -- .": "git checkout -- .",
    "checkout .": "git checkout .",
    "checkout HEAD -- .": "git checkout HEAD -- .",
    "checkout -f": "git checkout -f main",
    "restore .": "git restore .",
    "restore :/": "git restore --worktree :/",
    "restore staged and worktree": "git restore --source=HEAD~2 --staged --worktree .",
    "switch --discard-changes": "git switch --discard-changes main",
    "git rm -r .": "git rm -r .",
    "DROP TABLE": 'psql -c "DROP TABLE users"',
    "drop database": "mysql -e 'drop database shop'",
    "DROP SCHEMA": 'psql -d app -c "DROP SCHEMA public CASCADE"',
    "TRUNCATE TABLE": "psql -c 'TRUNCATE TABLE orders'",
    "TRUNCATE": 'mysql -e "truncate orders"',
    "DELETE without WHERE": 'sqlite3 app.db "DELETE FROM orders"',
    "DELETE without WHERE, then a WHERE": 'sqlite3 app.db "DELETE FROM orders; SELECT 1 WHERE 1"',
    "sqlcmd": 'sqlcmd -S . -Q "DROP TABLE dbo.Orders"',
    "SQL heredoc": "psql app <<'SQL'\nDROP TABLE users;\nSQL",
    "SQL piped": "echo 'DROP TABLE users;' | psql app",
    "SQL file written then run": "echo 'DROP TABLE users;' > x.sql && psql -f x.sql",
    "SQL file on stdin": "cat > wipe.sql <<'EOF'\nTRUNCATE orders;\nEOF\nsqlite3 app.db < wipe.sql",
    "SQL behind bash -c": "bash -c \"psql -c 'DROP TABLE users'\"",
    "SQL in a container": 'docker exec db psql -U app -c "DROP TABLE users"',
    "node execSync": "node -e \"require('child_process').execSync('git push -f')\"",
    "dotnet ef database drop": "dotnet ef database drop --force",
    "patched script run by bash": PATCH_SCRIPT.format(path="run.sh", body="rm -rf /",
                                                      run="bash run.sh"),
    "patched script run directly": PATCH_SCRIPT.format(path="wipe.sh", body="git reset --hard",
                                                       run="chmod +x wipe.sh && ./wipe.sh"),
    "patched script sourced": PATCH_SCRIPT.format(path="x.sh", body="git push -f", run=". x.sh"),
    "script written by echo then run": "echo 'git clean -fdx' > c.sh; sh c.sh",
    "python rmtree": "python3 -c 'import shutil; shutil.rmtree(\".\")'",
    "python os.system": "python -c \"import os; os.system('git push --force')\"",
    "python subprocess list": "python3 -c \"import subprocess; subprocess.run(['git', 'push', '-f'])\"",
    "python sqlite": "python3 -c \"import sqlite3; sqlite3.connect('a.db').execute('DROP TABLE t')\"",
    "python heredoc": "python3 - <<'EOF'\nimport shutil\nshutil.rmtree('/')\nEOF",
    "dd onto a disk": "dd if=/dev/zero of=/dev/sda bs=1M",
    "mkfs": "mkfs.ext4 /dev/sdb1",
}

BENIGN = {
    "rm -rf bin obj": "rm -rf bin obj",
    "rm -rf ./bin ./obj": "rm -rf ./bin ./obj",
    "project bin and obj": "rm -rf src/Orders/bin src/Orders/obj",
    "bin under every folder": "rm -rf */bin */obj",
    "bin at any depth": "rm -rf **/bin",
    "a stale git lock": "rm -f .git/index.lock",
    "a temp folder": "rm -rf /tmp/specops-build",
    "a defaulted temp folder": 'rm -rf "${TMPDIR:-/tmp}/build"',
    "log files": "rm *.log",
    "node_modules": "rm -rf node_modules",
    "a sibling folder": "rm -rf ../build-output",
    "one NuGet cache entry": "rm -rf ~/.nuget/packages/orders.client",
    "one product file": "rm src/Orders/Old.cs",
    "find with a name test": "find . -name bin -type d -prune -exec rm -rf {} +",
    "find -delete with a name test": "find . -name '*.orig' -delete",
    "grep -rf": "grep -rf patterns.txt src",
    "printing a force push": 'echo "git push --force"',
    "printing rm -rf into a file": "echo 'rm -rf /' > notes.txt",
    "printing SQL": "printf '%s\\n' \"DROP TABLE users\"",
    "a doc written by heredoc": "cat <<'EOF' > docs/runbook.md\nNever run git push --force or rm -rf /.\nEOF",
    "searching for SQL": 'grep -rn "DROP TABLE" src/',
    "searching for SQL with a client's name": 'grep -rn "DROP TABLE" psql',
    "node print": "node -e \"console.log('rm -rf /')\"",
    "a commit message": 'git commit -m "Drop table support; never git push --force"',
    "a comment": "ls # rm -rf /",
    "sh -c that only prints": 'sh -c "echo git push --force"',
    "push a branch": "git push origin feat-x",
    "push -u": "git push -u origin feat-x",
    "push HEAD to a ref": "git push origin HEAD:refs/heads/feat-x",
    "push --follow-tags": "git push --follow-tags origin feat-x",
    "reset --soft": "git reset --soft HEAD~1",
    "unstage one file": "git reset HEAD src/Orders/OrderService.cs",
    "plain reset": "git reset",
    "clean -n": "git clean -n",
    "clean -ndx": "git clean -ndx",
    "clean ignored files only": "git clean -fdX",
    "new branch": "git checkout -b feat-x",
    "switch branch": "git checkout feat-x",
    "checkout one file": "git checkout -- src/Orders/OrderService.cs",
    "restore one file": "git restore src/Orders/OrderService.cs",
    "unstage everything": "git restore --staged .",
    "untrack everything": "git rm --cached -r .",
    "stash": "git stash",
    "status and diff": "git status && git diff --stat",
    "log piped": "git log --oneline -5 | cat",
    "dotnet test": "dotnet test",
    "dotnet build": "dotnet build -warnaserror",
    "bash -c dotnet test": "bash -c 'dotnet test'",
    "a migration": "dotnet ef migrations add AddOrders",
    "database update": "dotnet ef database update",
    "DELETE with WHERE": 'sqlite3 app.db "DELETE FROM t WHERE id=1"',
    "DELETE with WHERE on a later line": "psql app <<'SQL'\nDELETE FROM orders\nWHERE id = 1;\nSQL",
    "SELECT": "psql -c 'SELECT count(*) FROM users'",
    "truncate a log file": "truncate -s 0 app.log",
    "dd into an image": "dd if=/dev/zero of=disk.img bs=1M count=1",
    "dd to /dev/null": "dd if=big.bin of=/dev/null",
    "command -v": "command -v git",
    "python print": "python3 -c 'print(1)'",
    "a missing script": "bash scripts/build.sh",
    "apt-get": "sudo apt-get install -y jq",
    "timeout": "timeout 600 dotnet test --no-build",
    "env prefix": "env DOTNET_CLI_TELEMETRY_OPTOUT=1 dotnet build",
    "cd then ls": "cd src && ls",
    "for loop over build folders": 'for d in bin obj; do rm -rf "$d"; done',
    "a substitution": 'echo "$(git rev-parse HEAD)"',
    "single-quoted substitution": "echo '$(rm -rf ~)'",
}


@pytest.mark.parametrize("command", DANGEROUS.values(), ids=DANGEROUS.keys())
def test_every_dangerous_command_is_denied(repo: Path, command: str) -> None:
    assert check(repo, command)


@pytest.mark.parametrize("command", BENIGN.values(), ids=BENIGN.keys())
def test_no_benign_command_is_denied(repo: Path, command: str) -> None:
    assert check(repo, command) is None


def test_the_tables_are_big() -> None:
    assert len(DANGEROUS) >= 40 and len(BENIGN) >= 40


def test_an_allowed_call_exits_0_with_no_output(repo: Path) -> None:
    assert call("pre-tool-use", payload("dotnet test", repo)) == (0, "")


def test_a_denied_call_answers_with_the_codex_deny_json(repo: Path) -> None:
    code, out = call("pre-tool-use", payload("git push --force", repo))
    assert code == 0
    assert json.loads(out) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": "`git push --force` force-pushes (`--force`), which rewrites "
                                    "remote history; push new commits without force, e.g. "
                                    "`git push origin feat-x`"}}


@pytest.mark.parametrize(("command", "reason"), [
    ("sudo rm -rf /", "`rm -rf /` deletes the filesystem root /; delete only specific paths inside "
                      "the repository, e.g. `rm -rf bin obj`"),
    ("rm -rf *", "`rm -rf *` deletes everything in the repository; delete only specific paths "
                 "inside the repository, e.g. `rm -rf bin obj`"),
    ("bash -c 'git reset --hard'", "`git reset --hard` discards uncommitted changes; keep them "
                                   "(`git stash`, or `git reset --soft` / `--mixed`)"),
    ("git clean -fdx", "`git clean -fdx` deletes untracked files, which may be new work; delete "
                       "specific build outputs instead (e.g. `rm -rf bin obj`) or preview with "
                       "`git clean -n`"),
    ("git checkout -- .", "`git checkout -- .` discards every uncommitted change under `.`; "
                          "restore specific files by path instead"),
    ("git push origin +HEAD", "`git push origin +HEAD` force-pushes (`+HEAD`), which rewrites "
                              "remote history; push new commits without force, e.g. "
                              "`git push origin feat-x`"),
    ('psql -c "DROP TABLE users"', "`DROP TABLE users` destroys database objects or all their "
                                   "rows; change the schema or data through a reviewed migration "
                                   "instead"),
    ('sqlite3 app.db "DELETE FROM orders"', "`DELETE FROM orders` deletes every row (DELETE "
                                            "without WHERE); add a WHERE clause naming the rows "
                                            "to delete"),
    ("find . -delete", "`find . -delete` deletes everything in the repository; add a -name or "
                       "-path test that names what to delete"),
    ("rm -rf .git", "`rm -rf .git` deletes the git metadata (.git); delete only specific paths "
                    "inside the repository, e.g. `rm -rf bin obj`"),
], ids=["rm root", "repo wildcard", "hard reset", "clean", "checkout", "refspec", "drop",
        "delete", "find", "git dir"])
def test_deny_reasons_name_the_command_the_harm_and_the_alternative(repo: Path, command: str,
                                                                      reason: str) -> None:
    assert check(repo, command) == reason


def test_a_script_on_disk_that_the_command_runs_is_checked(repo: Path) -> None:
    (repo / "scripts").mkdir()
    (repo / "scripts/reset.sh").write_text("#!/bin/bash\ngit reset --hard origin/main\n")
    assert check(repo, "bash scripts/reset.sh") == (
        "`git reset --hard origin/main` discards uncommitted changes; keep them (`git stash`, or "
        "`git reset --soft` / `--mixed`)")
    assert check(repo, "./scripts/reset.sh") is not None


def test_paths_resolve_against_the_session_cwd_and_the_harness_root(repo: Path,
                                                                    monkeypatch) -> None:
    harness = repo.parent / "harness"
    monkeypatch.setenv("SPECOPS_ROOT", str(harness))
    assert check(repo, f"rm -rf {harness}") == (
        f"`rm -rf {harness}` deletes the harness root; delete only specific paths inside the "
        "repository, e.g. `rm -rf bin obj`")
    assert check(repo, f"rm -rf {repo}/src/Orders/bin") is None


def test_the_apply_patch_tool_itself_runs_nothing(repo: Path) -> None:
    patch = ("*** Begin Patch\n*** Add File: docs/notes.md\n+never run rm -rf / or "
             "git push --force\n*** End Patch\n")
    assert call("pre-tool-use", payload(patch, repo, tool="apply_patch")) == (0, "")


@pytest.mark.parametrize(("data", "reason"), [
    (b"not json", "the PreToolUse payload on stdin is not JSON (Expecting value: line 1 column 1 "
                  "(char 0)); specops denies calls it cannot check"),
    (b"[1, 2]", "the PreToolUse payload on stdin is not a JSON object; specops denies calls it "
                "cannot check"),
    (b'{"tool_input": "rm -rf /"}', "tool_input is not a JSON object; specops denies calls it "
                                    "cannot check"),
    (b'{"tool_input": {"command": 7}}', "tool_input.command is int, not a string; specops "
                                        "denies calls it cannot check"),
], ids=["not json", "not an object", "tool_input", "command type"])
def test_a_payload_that_cannot_be_read_is_denied(repo: Path, data: bytes, reason: str) -> None:
    assert denial(call("pre-tool-use", data)[1]) == reason


def test_a_tool_without_a_command_is_allowed(repo: Path) -> None:
    data = json.dumps({"tool_name": "mcp__docs__search", "tool_input": {"query": "rm -rf /"}})
    assert call("pre-tool-use", data.encode()) == (0, "")


def test_a_command_given_as_argv_is_checked_word_by_word(repo: Path) -> None:
    assert check(repo, ["bash", "-lc", "git push --force"]) is not None
    assert check(repo, ["bash", "-lc", "echo 'git push --force'"]) is None


def test_an_internal_error_denies_the_call(repo: Path, monkeypatch) -> None:
    def broken(*args):
        raise RuntimeError("boom")

    monkeypatch.setattr(walk, "inspect", broken)
    assert check(repo, "ls") == ("specops hook pre-tool-use could not check this call "
                                 "(RuntimeError: boom), so it is denied; retry with a simpler "
                                 "command")


def test_the_hook_works_where_its_bytecode_cannot_be_written(repo: Path, monkeypatch) -> None:
    for module in (hook, pre_tool_use):
        spec = copy.copy(module.__spec__)
        spec.cached = "/proc/specops/__pycache__/hook.cpython-311.pyc"
        monkeypatch.setattr(module, "__spec__", spec)
    assert check(repo, "git push --force") is not None
    assert check(repo, "dotnet test") is None


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


def test_a_wrong_event_is_a_usage_error(capsys) -> None:
    assert hook.main(["pre-tool"]) == 2
    assert capsys.readouterr().err == ("usage: specops hook {pre-tool-use|session-start|"
                                       "user-prompt-submit} < payload.json\n")


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
SHELLISH = st.lists(st.sampled_from([
    "rm", "-rf", "/", "~", "*", ".", ".git", "git", "push", "--force", "+HEAD", "reset", "--hard",
    "bash", "-c", "sh", "eval", "sudo", "env", "X=1", "$(", ")", "`", "'", '"', "\\", ";", "&&",
    "||", "|", "&", "(", "{", "}", "<<", "<<<", "<", ">", ">>", "EOF", "\n", " ", "$HOME",
    "${", "$'", "#", "cd", "..", "apply_patch", "*** Begin Patch", "*** Add File: a.sh",
    "+rm -rf /", "psql", "DROP TABLE t", "DELETE FROM t", "xargs", "find", "-delete"]),
    max_size=40).map("".join)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_well_formed(data: bytes) -> None:
    code, out = call("pre-tool-use", data)
    assert code == 0
    denial(out)


@FUZZ
@given(JSON)
def test_arbitrary_json_never_crashes_the_hook(value: object) -> None:
    assert_well_formed(json.dumps(value).encode())


@FUZZ
@given(JSON)
def test_arbitrary_tool_input_never_crashes_the_hook(value: object) -> None:
    assert_well_formed(json.dumps({"tool_name": "Bash", "tool_input": {"command": value}}).encode())


@FUZZ
@given(st.binary(max_size=3000))
def test_arbitrary_bytes_never_crash_the_hook(data: bytes) -> None:
    assert_well_formed(data)


@FUZZ
@given(st.one_of(SHELLISH, st.text(max_size=300)))
def test_arbitrary_commands_never_crash_the_hook(command: str) -> None:
    assert_well_formed(payload(command, tool="Bash"))
    assert_well_formed(payload(command, tool="apply_patch"))


@settings(max_examples=10, deadline=None)
@given(st.text(alphabet="$()`'\"\\;|&<> \nab", min_size=1, max_size=300),
       st.integers(min_value=10_000, max_value=walk.MAX_COMMAND))
def test_huge_random_commands_never_crash_the_hook(chunk: str, size: int) -> None:
    command = (chunk * (size // len(chunk) + 1))[:size]
    assert_well_formed(payload(command, tool="Bash"))


@pytest.mark.parametrize("argv", [[str(VENV_BIN / "specops"), "hook", "pre-tool-use"],
                                  [sys.executable, "-m", "specops_dag.hooks", "pre-tool-use"]],
                         ids=["console script", "python -m"])
def test_the_installed_hook_commands_deny_and_allow(tmp_path: Path, argv: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k not in SPECOPS_VARS}
    runs = [subprocess.run(argv, input=payload(command), cwd=tmp_path, env=env,
                           capture_output=True, timeout=60, check=False)
            for command in ("bash -c 'rm -rf ~'", "dotnet test")]
    assert [r.returncode for r in runs] == [0, 0]
    assert denial(runs[0].stdout.decode()) == (
        "`rm -rf ~` deletes the home folder; delete only specific paths inside the repository, "
        "e.g. `rm -rf bin obj`")
    assert runs[1].stdout == b"" and runs[1].stderr == b""


def test_the_pre_tool_use_hook_imports_only_the_standard_library(tmp_path: Path) -> None:
    code = ("import sys; from specops_dag import hooks; hooks.main(['pre-tool-use']); "
            "heavy = {'dagster', 'pydantic', 'yaml', 'click', 'git', 'psutil', 'shlex'}; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))")
    out = subprocess.run([sys.executable, "-c", code], input=payload("rm -rf bin obj", tmp_path),
                         cwd=REPO, capture_output=True, timeout=60, check=True)
    assert out.stdout.decode().splitlines()[-1] == "[]"
