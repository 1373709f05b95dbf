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
    "files by wildcard in the repository": "rm *.log",
    "find -delete with a name test in the repository": "find . -name '*.orig' -delete",
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
    "rsync --delete into the repository": "rsync -a --delete empty/ src/",
    "shred -u of a repository file": "shred -u src/Orders/OrderService.cs",
    "shred onto a disk": "shred -n 1 /dev/sda",
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
    "test results by wildcard": "rm TestResults/*.trx",
    "node_modules": "rm -rf node_modules",
    "a sibling folder": "rm -rf ../build-output",
    "one NuGet cache entry": "rm -rf ~/.nuget/packages/orders.client",
    "one product file": "rm src/Orders/Old.cs",
    "find with a name test": "find . -name bin -type d -prune -exec rm -rf {} +",
    "find -delete of files in build output": "find src -path '*/bin/*' -delete",
    "grep -rf": "grep -rf patterns.txt src",
    "printing a force push": 'echo "git push --force"',
    "printing rm -rf into a file": "echo 'rm -rf /' > notes.txt",
    "printing SQL": "printf '%s\\n' \"DROP TABLE users\"",
    "a doc written by heredoc": "cat <<'EOF' > docs/runbook.md\nNever run git push --force or rm -rf /.\nEOF",
    "searching for SQL": 'grep -rn "DROP TABLE" src/',
    "searching for SQL with a client's name": 'grep -rn "DROP TABLE" psql',
    "node print": "node -e \"console.log('rm -rf /')\"",
    "a commit message searched": 'git log --grep "Drop table support; never git push --force"',
    "a comment": "ls # rm -rf /",
    "sh -c that only prints": 'sh -c "echo git push --force"',
    "clean -n": "git clean -n",
    "clean -ndx": "git clean -ndx",
    "clean ignored files only": "git clean -fdX",
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


INSTEAD = ("delete single files by name (`rm <file>`, or apply_patch `*** Delete File: <file>`) "
           "and build output by folder (`rm -r bin`)")


@pytest.mark.parametrize(("command", "reason"), [
    ("sudo rm -rf /", f"`rm -rf /` deletes the filesystem root /; {INSTEAD}"),
    ("rm -rf *", f"`rm -rf *` deletes everything in the repository; {INSTEAD}"),
    ("bash -c 'git reset --hard'", "`git reset --hard` discards uncommitted changes; to keep a "
                                   "file's changes, copy it aside (`cp <file> /tmp/`); to undo a "
                                   "file's changes, run `git show HEAD:<file> > <file>`"),
    ("git clean -fdx", "`git clean -fdx` deletes untracked files, which may be new work; delete "
                       "build output by folder instead (`rm -r bin`)"),
    ("git checkout -- .", "`git checkout -- .` discards every uncommitted change under `.`; to "
                          "undo a file's changes, run `git show HEAD:<file> > <file>`"),
    ("git checkout -f main", "`git checkout -f main` discards uncommitted changes (a forced "
                             "checkout); stay on this branch, which the product commits after "
                             "validation"),
    ("git push origin +HEAD", "`git push origin +HEAD` force-pushes (`+HEAD`), which rewrites "
                              "remote history; the product commits and pushes after validation: "
                              "push nothing"),
    ("git push origin :main", "`git push origin :main` deletes remote branches (`:main`); the "
                              "product commits and pushes after validation: push nothing"),
    ('psql -c "DROP TABLE users"', "`DROP TABLE users` destroys database objects or all their "
                                   "rows; change the schema or data through a reviewed migration "
                                   "instead"),
    ('sqlite3 app.db "DELETE FROM orders"', "`DELETE FROM orders` deletes every row (DELETE "
                                            "without WHERE); add a WHERE clause naming the rows "
                                            "to delete"),
    ("find . -delete", f"`find . -delete` deletes everything in the repository; {INSTEAD}"),
    ("rm -rf .git", f"`rm -rf .git` deletes the git metadata (.git); {INSTEAD}"),
    ("dotnet ef database drop -f", "`dotnet ef database drop -f` drops the database; change the "
                                   "schema with a new migration instead, written by hand as the "
                                   "ef-core-migrations skill says (apply_patch `*** Add File: "
                                   "<project>/Migrations/<timestamp>_<Name>.cs`, with the test "
                                   "that proves it): the EF Core tools cannot be restored "
                                   "offline"),
], ids=["rm root", "repo wildcard", "hard reset", "clean", "checkout", "forced checkout",
        "refspec", "remote delete", "drop", "delete", "find", "git dir", "ef drop"])
def test_deny_reasons_name_the_command_the_harm_and_the_alternative(repo: Path, command: str,
                                                                      reason: str) -> None:
    assert check(repo, command) == reason


def test_paths_resolve_against_the_session_cwd_and_the_harness_root(repo: Path,
                                                                    monkeypatch) -> None:
    harness = repo.parent / "harness"
    monkeypatch.setenv("SPECOPS_ROOT", str(harness))
    assert check(repo, f"rm -rf {harness}") == (
        f"`rm -rf {harness}` deletes the harness root; {INSTEAD}")
    assert check(repo, f"rm -rf {repo}/src/Orders/bin") is None


BULK_DENIED = {
    "a tracked source folder": ("rm -rf src", "deletes the folder `src` of the repository with "
                                              "every file in it"),
    "the same without force": ("rm -r src/Orders", "deletes the folder `src/Orders` of the "
                                                   "repository with every file in it"),
    "a folder by wildcard": ("rm -r src/*", "deletes every file of the repository that `src/*` "
                                            "matches"),
    "files by wildcard": ("rm src/Orders/*.cs", "deletes every file of the repository that "
                                                "`src/Orders/*.cs` matches"),
    "a folder reached through bin": ("rm -r src/Orders/bin/..", "deletes the folder `src/Orders` "
                                                                "of the repository with every "
                                                                "file in it"),
    "git rm of a folder": ("git rm -r src", "deletes the folder `src` of the repository with "
                                            "every file in it"),
    "python rmtree": ("python3 -c 'import shutil; shutil.rmtree(\"src\")'",
                      "deletes the folder `src` of the repository with every file in it"),
    "find -delete by name": ("find . -name '*.cs' -delete", "deletes files of the repository in "
                                                            "bulk"),
    "find under a folder": ("find src -name '*.cs' -delete", "deletes files of the repository "
                                                             "under `src` in bulk"),
    "find -exec rm": ("find . -name '*.cs' -exec rm {} +", "deletes files of the repository in "
                                                           "bulk"),
    "find -execdir rm": ("find src -type f -execdir rm {} ;", "deletes files of the repository "
                                                              "under `src` in bulk"),
    "find -o around a build name": ("find . -name bin -o -delete", "deletes files of the "
                                                                   "repository in bulk"),
    "find with a negated build name": ("find . ! -name obj -delete", "deletes files of the "
                                                                     "repository in bulk"),
    "find deleting before its name test": ("find . -delete -name bin", "deletes files of the "
                                                                       "repository in bulk"),
    "xargs rm of unseen input": ("git ls-files '*.cs' | xargs rm",
                                 "deletes a path computed at run time, which the hook cannot "
                                 "check"),
    "rm of a substitution": ("rm $(git ls-files)", "deletes a path computed at run time, which "
                                                   "the hook cannot check"),
    "a loop over a substitution": ('for f in $(git ls-files); do rm "$f"; done',
                                   "deletes a path computed at run time, which the hook cannot "
                                   "check"),
    "a shell given each found file": ("find . -name '*.cs' -exec sh -c 'rm \"$1\"' _ {} ;",
                                      "deletes a path computed at run time, which the hook "
                                      "cannot check"),
    "a variable set to a substitution": ("F=$(git ls-files); rm $F", "deletes a path computed "
                                                                     "at run time, which the "
                                                                     "hook cannot check"),
}


@pytest.mark.parametrize(("command", "harm"), BULK_DENIED.values(), ids=BULK_DENIED.keys())
def test_a_bulk_delete_of_the_repositorys_files_is_denied_with_how_to_delete_instead(
        repo: Path, command: str, harm: str) -> None:
    reason = check(repo, command)
    assert reason is not None and reason.endswith(f" {harm}; {INSTEAD}"), reason


SHRED_AND_RSYNC = {
    "rsync -a --delete empty/ src/": "deletes every file of the repository under `src` that its "
                                     "source lacks",
    "rsync -a --delete empty/ .": "deletes every file in the repository that its source lacks",
    "rsync -r --delete-after --exclude '*.md' empty/ src/Orders": (
        "deletes every file of the repository under `src/Orders` that its source lacks"),
    "rsync -a --del -e ssh empty/ ~/": "deletes every file in the home folder that its source "
                                       "lacks",
    'rsync -a --delete empty/ "$DEST"': "deletes a path computed at run time, which the hook "
                                        "cannot check",
    "shred -u src/Orders/OrderService.cs": "overwrites and deletes `src/Orders/OrderService.cs` "
                                           "of the repository beyond recovery",
    "shred -vzn 3 --remove=wipesync src/Orders/OrderService.cs": (
        "overwrites and deletes `src/Orders/OrderService.cs` of the repository beyond recovery"),
    "shred src/Orders/*.cs": "overwrites `src/Orders/*.cs` of the repository beyond recovery",
    "git ls-files | xargs shred -u": "overwrites and deletes a path computed at run time, which "
                                     "the hook cannot check",
}


@pytest.mark.parametrize(("command", "harm"), SHRED_AND_RSYNC.items(), ids=SHRED_AND_RSYNC.keys())
def test_rsync_delete_and_shred_of_the_repositorys_files_are_denied_as_the_bulk_deletes_they_are(
        repo: Path, command: str, harm: str) -> None:
    shown = {"git ls-files | xargs shred -u": "shred -u $(xargs input)",
             'rsync -a --delete empty/ "$DEST"': "rsync -a --delete empty/ $DEST",
             "rsync -r --delete-after --exclude '*.md' empty/ src/Orders": (
                 "rsync -r --delete-after --exclude *.md empty/ src/Orders")}  # as the guard reads
    assert check(repo, command) == f"`{shown.get(command, command)}` {harm}; {INSTEAD}"


def test_rsync_that_removes_its_sources_is_denied_as_the_move_out_of_the_repository_it_is(
        repo: Path) -> None:
    assert check(repo, "rsync -a --remove-source-files src/ /tmp/src/") == (
        "`rsync -a --remove-source-files src/ /tmp/src/` moves `src` out of the repository, which "
        "deletes it there; copy it out instead (`cp -r <path> /tmp/`), and move files only within "
        "the repository")
    assert check(repo, "rsync -a --remove-source-files src/Orders/ src/Legacy/") is None


def test_shred_onto_a_disk_is_denied_as_dd_onto_it_is(repo: Path) -> None:
    assert check(repo, "shred -n 1 /dev/sda") == (
        "`shred -n 1 /dev/sda` overwrites the disk device /dev/sda; never run it here")
    assert check(repo, "shred -n 1 /dev/null") is None


def test_the_reason_names_the_command_as_the_guard_read_it(repo: Path) -> None:
    assert check(repo, "rm -rf src") == (
        f"`rm -rf src` deletes the folder `src` of the repository with every file in it; {INSTEAD}")
    assert check(repo, "git ls-files | xargs rm") == (
        "`rm $(xargs input)` deletes a path computed at run time, which the hook cannot check; "
        f"{INSTEAD}")


BULK_ALLOWED = {
    "bin of a project": "rm -r src/Orders/bin",
    "build output at the root": "rm -r bin obj TestResults",
    "bin of every project": "rm -r */bin",
    "test results by wildcard": "rm TestResults/*.trx",
    "find pruning build folders": r"find . \( -name bin -o -name obj \) -type d -prune "
                                  "-exec rm -r {} +",
    "find -path into build output": "find . -path '*/obj/*' -delete",
    "find inside build output": "find src/Orders/bin -delete",
    "find that deletes nothing": "find . -name '*.cs' -exec grep -l TODO {} +",
    "one file, recursive flag or not": "rm -r src/Orders/OrderService.cs",
    "xargs rm of a known file": "echo src/Orders/OrderService.cs | xargs rm",
    "a mktemp folder": 'd=$(mktemp -d); rm -r "$d"',
    "a loop over build folders": 'for d in src/Orders/bin src/Orders/obj; do rm -r "$d"; done',
    "a folder outside the repository": "rm -r /tmp/specops-scratch",
    "rsync --delete into build output": "rsync -a --delete src/Orders/ src/Orders/bin/copy/",
    "rsync --delete out of the repository": "rsync -a --delete src/ /tmp/src-copy/",
    "rsync --delete as a dry run": "rsync -avn --delete empty/ src/",
    "rsync without --delete": "rsync -a empty/ src/",
    "shred of a file outside the repository": "shred -u /tmp/secret.txt",
    "shred of build output": "shred -u src/Orders/bin/Orders.dll",
}


@pytest.mark.parametrize("command", BULK_ALLOWED.values(), ids=BULK_ALLOWED.keys())
def test_build_output_single_files_and_folders_outside_the_repository_may_still_be_deleted(
        repo: Path, command: str) -> None:
    assert check(repo, command) is None


def test_only_scratch_inside_the_node_folder_goes_in_bulk_in_the_harness_root(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    harness = tmp_path / "harness"
    node = harness / "phases/d1/develop"
    monkeypatch.setenv("SPECOPS_ROOT", str(harness))
    monkeypatch.setenv("SPECOPS_NODE_DIR", str(node))
    assert check(repo, f"rm -r {node}/scratch {node}/tasks/t1/tmp") is None
    assert check(repo, 'rm -r "$SPECOPS_NODE_DIR"/scratch/*') is None
    assert check(repo, f"rm -r {node}") == (
        f"`rm -r {node}` deletes the folder `phases/d1/develop` of the harness root with every "
        f"file in it; {INSTEAD}")
    assert check(repo, f"rm -r {harness}/phases/d1/spec") == (
        f"`rm -r {harness}/phases/d1/spec` deletes the folder `phases/d1/spec` of the harness root "
        f"with every file in it; {INSTEAD}")
    assert check(repo, f"rm -r {harness}/workflow_defs") is not None


def test_a_worktrees_git_file_is_git_metadata_not_a_single_file(repo: Path) -> None:
    (repo / ".git").write_text("gitdir: /elsewhere/.git/worktrees/d1\n")
    assert check(repo, "rm -r .git") == (
        f"`rm -r .git` deletes the git metadata (.git); {INSTEAD}")
    assert check(repo, "rm -r src/Orders/OrderService.cs") is None


MOVE_INSTEAD = ("copy it out instead (`cp -r <path> /tmp/`), and move files only within the "
                "repository")
MOVED_OUT = {
    "the source folder to /tmp": ("mv src /tmp/", "moves `src` out of the repository, which "
                                                  "deletes it there"),
    "one tracked file": ("mv src/Orders/OrderService.cs /tmp/OrderService.cs",
                         "moves `src/Orders/OrderService.cs` out of the repository, which "
                         "deletes it there"),
    "by -t": ("mv -t /tmp src tests", "moves `src` out of the repository, which deletes it there"),
    "by --target-directory=": ("mv --target-directory=/tmp -- tests",
                               "moves `tests` out of the repository, which deletes it there"),
    "to the parent folder": ("mv -v src ..", "moves `src` out of the repository, which deletes it "
                                             "there"),
    "the whole repository": ("mv . /tmp/backup", "moves `.` out of the repository, which deletes "
                                                 "it there"),
    "files by wildcard": ("mv src/Orders/*.cs /tmp/", "moves `src/Orders/*.cs` out of the "
                                                      "repository, which deletes it there"),
    "in a loop": ('for f in src tests; do mv "$f" /tmp/; done',
                  "moves `src` out of the repository, which deletes it there"),
    "to a computed folder": ('mv src "$DEST"', "moves `src` of the repository to a path computed "
                                               "at run time, which the hook cannot check"),
    "computed files out": ("git ls-files | xargs -I{} mv {} /tmp/", "moves a path computed at run "
                                                                    "time, which the hook cannot "
                                                                    "check"),
}


@pytest.mark.parametrize(("command", "harm"), MOVED_OUT.values(), ids=MOVED_OUT.keys())
def test_moving_tracked_work_out_of_the_repository_is_denied_like_the_delete_it_is(
        repo: Path, command: str, harm: str) -> None:
    reason = check(repo, command)
    assert reason is not None and reason.endswith(f" {harm}; {MOVE_INSTEAD}"), reason


def test_the_move_reason_names_the_command_and_the_folder_tree_it_leaves(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert check(repo, "mv src /tmp/") == (
        f"`mv src /tmp/` moves `src` out of the repository, which deletes it there; {MOVE_INSTEAD}")
    harness = tmp_path / "harness"
    monkeypatch.setenv("SPECOPS_ROOT", str(harness))
    assert check(repo, f"mv {harness}/phases/d1/spec /tmp/") == (
        f"`mv {harness}/phases/d1/spec /tmp/` moves `phases/d1/spec` out of the harness root, "
        "which deletes it there; copy it out instead (`cp -r <path> /tmp/`), and move files only "
        "within the harness root")


MOVES_ALLOWED = {
    "a rename": "mv docs/notes.md docs/design.md",
    "a folder renamed": "mv src source",
    "into a folder of the repository": "mv -v src/Orders/OrderService.cs src/Legacy/",
    "with -t inside": "mv -t tests src/Orders",
    "build output out": "mv src/Orders/bin /tmp/bin-old",
    "into the repository": "mv /tmp/notes.md docs/",
    "outside the repository": "mv /tmp/a /tmp/b",
    "a computed file within": 'mv "$(ls docs/*.md | head -1)" docs/old.md',
}


@pytest.mark.parametrize("command", MOVES_ALLOWED.values(), ids=MOVES_ALLOWED.keys())
def test_moves_within_the_repository_and_of_build_output_stay_allowed(repo: Path,
                                                                       command: str) -> None:
    assert check(repo, command) is None


def test_what_the_node_folder_holds_may_move_anywhere_but_not_the_folder_itself(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = tmp_path / "harness/phases/d1/develop"
    monkeypatch.setenv("SPECOPS_ROOT", str(tmp_path / "harness"))
    monkeypatch.setenv("SPECOPS_NODE_DIR", str(node))
    assert check(repo, f"mv {node}/scratch/report.txt /tmp/") is None
    assert check(repo, f"mv {node} /tmp/") == (
        f"`mv {node} /tmp/` moves `phases/d1/develop` out of the harness root, which deletes it "
        "there; copy it out instead (`cp -r <path> /tmp/`), and move files only within the "
        "harness root")
