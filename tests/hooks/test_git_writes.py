"""The git commands the pre-tool-use hook denies because they write the repository's `.git`
(`hooks/rules.py`), which the agent's sandbox keeps read-only: each is denied with one reason
that says why and what to do instead, its read-only forms stay allowed, and a repository outside
the session's folders may still be written. The e2e tests run every command of the tables for
real, once with a writable `.git` and once in the sandbox a writing session gets (`codex
sandbox` with `sandbox_args`), so the tables hold what git does: each denied command works until
`.git` is read-only and then fails, each allowed one works in the sandbox — and a move of the
source folder out of the repository works there too, so only the hook stops it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import git
import pytest

from specops_dag.agent.codex import AgentSettings, find_codex, sandbox_args

from ..support.git import WHO
from ..support.harness import write_tree
from ..support.hooks import check

GIT_WRITE = ("writes the git metadata (.git), read-only in this session: the product commits "
             "after validation; leave your changes in the working tree (see them with "
             "`git status` and `git diff`); to undo a file's changes, run "
             "`git show HEAD:<file> > <file>`")
PUSH = "pushes to a remote; the product commits and pushes after validation: push nothing"

# Each works in the `orders` repository below while its `.git` is writable.
WRITES = {
    "add": "git add new.txt",
    "commit": "git commit -am wip",
    "stash": "git stash",
    "stash push": "git stash push -m wip",
    "stash pop": "git stash pop",
    "stash drop": "git stash drop",
    "soft reset": "git reset --soft HEAD~1",
    "plain reset": "git reset",
    "unstage a file": "git reset HEAD src/a.cs",
    "new branch by checkout": "git checkout -b feat-x",
    "switch branch by checkout": "git checkout feature",
    "checkout a file": "git checkout -- src/a.cs",
    "switch": "git switch feature",
    "switch -c": "git switch -c feat-x",
    "restore a file": "git restore src/a.cs",
    "unstage everything": "git restore --staged .",
    "branch": "git branch feat-x",
    "branch -D": "git branch -D feature",
    "branch -m": "git branch -m feature topic",
    "tag": "git tag v2",
    "annotated tag": "git tag -a v2 -m release",
    "tag -d": "git tag -d v1",
    "merge": "git merge feature",
    "rebase": "git rebase --autostash feature",
    "cherry-pick": "git cherry-pick feature",
    "revert": "git revert --no-edit HEAD",
    "rm": "git rm d.txt",
    "rm --cached": "git rm --cached b.txt",
    "untrack a folder": "git rm -r --cached src",
    "mv": "git mv b.txt e.txt",
    "config": "git config user.name agent",
    "remote add": "git remote add upstream ../upstream",
    "notes add": "git notes add -m note",
    "update-ref": "git update-ref refs/heads/q HEAD",
    "apply --index": "git apply --index p.diff",
    "fetch": "git fetch . feature:refs/heads/f2",
    "pull": "git pull --no-rebase . feature",
    "gc": "git gc -q",
    "symbolic-ref": "git symbolic-ref HEAD refs/heads/feature",
    "hash-object -w": "git hash-object -w b.txt",
    "bisect": "git bisect start",
    "from a subfolder by -C": "git -C src commit -am wip",
    "from a subfolder by cd": "cd src && git add a.cs",
}

# Each works in the `orders` repository below with its `.git` read-only.
READS = {
    "status": "git status",
    "diff": "git diff",
    "diff --stat": "git diff --stat",
    "diff --cached": "git diff --cached",
    "log": "git log --all --graph --oneline",
    "show": "git show --stat HEAD",
    "a file undone from HEAD": "git show HEAD:b.txt > b.txt",
    "ls-files": "git ls-files",
    "rev-parse": "git rev-parse --abbrev-ref HEAD",
    "blame": "git blame src/a.cs",
    "grep": "git grep -n a",
    "cat-file": "git cat-file -p HEAD",
    "describe": "git describe --tags --always",
    "branch": "git branch",
    "branch -a": "git branch -a",
    "branch -vv": "git branch -vv",
    "branch --list with a pattern": "git branch --list 'f*'",
    "branch --show-current": "git branch --show-current",
    "tag": "git tag",
    "tag -l with a pattern": "git tag -l 'v*'",
    "stash list": "git stash list",
    "stash show": "git stash show -p",
    "config --get": "git config --get core.bare",
    "config --list": "git config --list --local",
    "remote -v": "git remote -v",
    "reflog": "git reflog -5",
    "worktree list": "git worktree list",
    "notes list": "git notes list",
    "merge-base": "git merge-base main feature",
    "apply to the working tree": "git apply p.diff",
    "clean -n": "git clean -n",
    "clean ignored files": "git clean -fdX",
}

PUSHES = {
    "a branch": "git push origin feat-x",
    "with -u": "git push -u origin feat-x",
    "HEAD to a ref": "git push origin HEAD:refs/heads/feat-x",
    "with tags": "git push --follow-tags origin feat-x",
    "from another repository": "git -C /tmp/elsewhere push origin main",
}


@pytest.mark.parametrize("command", WRITES.values(), ids=WRITES.keys())
def test_a_git_command_that_writes_the_repository_is_denied_with_what_to_do_instead(
        repo: Path, command: str) -> None:
    git_words = command.rpartition("&& ")[2]
    assert check(repo, command) == f"`{git_words}` {GIT_WRITE}"


@pytest.mark.parametrize("command", READS.values(), ids=READS.keys())
def test_a_git_command_that_only_reads_the_repository_is_allowed(repo: Path,
                                                                command: str) -> None:
    assert check(repo, command) is None


@pytest.mark.parametrize("command", PUSHES.values(), ids=PUSHES.keys())
def test_every_push_is_denied_since_the_product_pushes_after_validation(repo: Path,
                                                                       command: str) -> None:
    assert check(repo, command) == f"`{command}` {PUSH}"


def test_the_destructive_git_commands_keep_the_reason_that_names_their_harm(repo: Path) -> None:
    assert check(repo, "git reset --hard") == (
        "`git reset --hard` discards uncommitted changes; to keep a file's changes, copy it aside "
        "(`cp <file> /tmp/`); to undo a file's changes, run `git show HEAD:<file> > <file>`")
    assert check(repo, "git push --force") == (
        "`git push --force` force-pushes (`--force`), which rewrites remote history; the product "
        "commits and pushes after validation: push nothing")


def test_help_and_a_repository_outside_the_sessions_folders_may_be_written(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scratch = tmp_path / "scratch"
    assert check(repo, "git stash --help") is None
    assert check(repo, f"cd {scratch} && git commit -am wip") is None
    assert check(repo, f"git -C {scratch} tag v1") is None
    assert check(repo, f"git --git-dir={scratch}/.git add x") is None
    assert check(repo, 'cd "$(mktemp -d)" && git init -q && git commit --allow-empty -m x') is None
    assert check(repo, "git config --global user.name agent") is None
    assert check(repo, "git config -f .gitmodules submodule.x.url ../x") is None
    assert check(repo, "git config -f .git/config user.name agent") == (
        f"`git config -f .git/config user.name agent` {GIT_WRITE}")
    harness = tmp_path / "harness"
    monkeypatch.setenv("SPECOPS_ROOT", str(harness))
    assert check(repo, f"git -C {harness} commit -m x") == (
        f"`git -C {harness} commit -m x` {GIT_WRITE}")


# -- e2e: each command for real, with `.git` writable and in the agent's sandbox ------------------

IDENTITY = {"GIT_AUTHOR_NAME": WHO.name, "GIT_AUTHOR_EMAIL": WHO.email,
            "GIT_COMMITTER_NAME": WHO.name, "GIT_COMMITTER_EMAIL": WHO.email}
PATCH = ("diff --git a/z.txt b/z.txt\nnew file mode 100644\n--- /dev/null\n+++ b/z.txt\n"
         "@@ -0,0 +1 @@\n+z\n")


@pytest.fixture(scope="module")
def orders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository with history for every command of the tables: `main` (A, B) with tag v1 on
    A, `feature` (A, C), one stash entry, a changed tracked file, an untracked file and a patch."""
    root = write_tree(tmp_path_factory.mktemp("orders") / "repo",
                      {"src/a.cs": "a\n", "b.txt": "b\n"})
    repo = git.Repo.init(root, initial_branch="main")

    def commit(message: str, *paths: str) -> None:
        repo.index.add(list(paths))
        repo.index.commit(message, author=WHO, committer=WHO)

    commit("A", "src/a.cs", "b.txt")
    repo.create_tag("v1")
    repo.git.checkout("-q", "-b", "feature")
    write_tree(root, {"c.txt": "c\n"})
    commit("C", "c.txt")
    repo.git.checkout("-q", "main")
    write_tree(root, {"d.txt": "d\n"})
    commit("B", "d.txt")
    write_tree(root, {"b.txt": "b2\n"})
    with repo.git.custom_environment(**IDENTITY):
        repo.git.stash("-q")
    write_tree(root, {"src/a.cs": "a2\n", "new.txt": "n\n", "p.diff": PATCH})
    return root


def run(orders: Path, tmp_path: Path, command: str, sandboxed: bool) -> tuple[int, str]:
    """(exit code, output) of `command` in a fresh copy of `orders`, in the sandbox of a writing
    session (worktree and /tmp writable, the worktree's `.git` read-only) or outside it. The
    command prints its own exit code, so a sandbox that fails to start fails the test."""
    copy = tmp_path / ("sandboxed" if sandboxed else "open") / "repo"
    shutil.copytree(orders, copy, symlinks=True)
    argv = ["bash", "-c", f"{command}\nprintf '\\nexit=%s\\n' \"$?\""]
    if sandboxed:
        codex = find_codex(AgentSettings(), copy)
        argv = [codex, "sandbox", *sandbox_args("workspace-write", copy, (), False), "--", *argv]
    (tmp_path / "codex-home").mkdir(exist_ok=True)
    env = {**os.environ, "CODEX_HOME": str(tmp_path / "codex-home"), **IDENTITY}
    done = subprocess.run(argv, cwd=copy, env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    out = done.stdout + done.stderr
    codes = [line[5:] for line in done.stdout.splitlines() if line.startswith("exit=")]
    assert codes, out
    return int(codes[-1]), out


@pytest.mark.e2e
@pytest.mark.parametrize("command", WRITES.values(), ids=WRITES.keys())
def test_each_denied_git_command_works_until_git_is_read_only_and_fails_in_the_sandbox(
        orders: Path, tmp_path: Path, command: str) -> None:
    code, out = run(orders, tmp_path, command, sandboxed=False)
    assert code == 0, out
    code, out = run(orders, tmp_path, command, sandboxed=True)
    assert code != 0, out


@pytest.mark.e2e
@pytest.mark.parametrize("command", READS.values(), ids=READS.keys())
def test_each_allowed_git_command_works_in_the_sandbox(orders: Path, tmp_path: Path,
                                                       command: str) -> None:
    code, out = run(orders, tmp_path, command, sandboxed=True)
    assert code == 0, out


@pytest.mark.e2e
def test_the_sandbox_lets_the_source_folder_move_out_so_the_hook_is_what_stops_it(
        orders: Path, repo: Path, tmp_path: Path) -> None:
    command = f"mv src {tmp_path}/moved"
    code, out = run(orders, tmp_path, command, sandboxed=True)
    assert code == 0, out
    assert (tmp_path / "moved/a.cs").is_file()
    assert not (tmp_path / "sandboxed/repo/src").exists()
    assert check(repo, command) == (
        f"`{command}` moves `src` out of the repository, which deletes it there; copy it out "
        "instead (`cp -r <path> /tmp/`), and move files only within the repository")
