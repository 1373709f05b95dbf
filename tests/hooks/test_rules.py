"""What `specops hook pre-tool-use` denies (`hooks/rules.py`): dangerous commands are denied with a
reason that names the command, the harm and the alternative; benign ones pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..support.hooks import check

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


def test_paths_resolve_against_the_session_cwd_and_the_harness_root(repo: Path,
                                                                    monkeypatch) -> None:
    harness = repo.parent / "harness"
    monkeypatch.setenv("SPECOPS_ROOT", str(harness))
    assert check(repo, f"rm -rf {harness}") == (
        f"`rm -rf {harness}` deletes the harness root; delete only specific paths inside the "
        "repository, e.g. `rm -rf bin obj`")
    assert check(repo, f"rm -rf {repo}/src/Orders/bin") is None
