"""The delivery's git workflow (DESIGN §10, seed 001 §9): a dedicated worktree on branch
`feat-<delivery>`, two commits per successful step (product, then metadata), and a push that
never forces. The user's checkout and other branches are never touched; a dirty worktree is a
write conflict to resolve by hand, never a silent reset.

Every git command runs through the runner (`run_git`: a deadline, its tree ended with its run);
GitPython finds a repository's folders and reads its refs from files, which starts no process.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from specops_dag.errors import SpecopsError, UsageError, WriteConflict
from specops_dag.files import WORKTREES
from specops_dag.process import run_process

METADATA = ("phases", "docs/phase")
# Build outputs: never committed, never a product change (every worktree of the target repo).
BUILD_OUTPUTS = ("bin/", "obj/", "TestResults/", ".vs/")
# What specops writes in a harness root that is a git repository: kept out of `git status`.
HARNESS_FILES = ("/.specops/", "/phases/", "/.dagster_home/")
EXCLUDE_MARK = "# specops-dag: kept out of commits and `git status`"
GIT_DEADLINE_S = 300
# Files of phases/<d>/ that are scratch, not metadata worth a commit; the session transcripts
# (`stepN-output.json`: every command's output) are kept there for debugging, never committed.
SCRATCH = {".lock", ".run.lock", ".owners", "runs", "validation", "last-message.txt", "sessions"}
TRANSCRIPT = re.compile(r"step\d+-output\.json")
# Who specops's own commits (product, metadata, merges, QA snapshots) are by.
IDENTITY = {"GIT_AUTHOR_NAME": "specops", "GIT_AUTHOR_EMAIL": "specops@localhost",
            "GIT_COMMITTER_NAME": "specops", "GIT_COMMITTER_EMAIL": "specops@localhost"}


def _git():
    """GitPython, imported on first use: loading the code location or a fast command skips it."""
    import git

    return git


class GitError(SpecopsError):
    """A git operation failed (push rejected, repository broken)."""


def run_git(where: Path, *args: str, env: dict[str, str] | None = None,
            stdin: bytes | None = None):
    """`git -C <where> <args>` through the runner, with `GIT_DEADLINE_S`: its tree is killed at
    the deadline and ends with its run. Returns the `ProcessResult`; its output is decoded with
    `surrogateescape`, so a path that is not UTF-8 goes back to git as it came. A folder that
    does not exist is a GitError saying so."""
    if not os.path.isdir(where):
        raise GitError(f"cannot run `git {args[0] if args else ''}` in {where}: that folder "
                       "does not exist")
    return run_process(["git", "-C", str(where), *args], cwd=where, env=env,
                       deadline_s=GIT_DEADLINE_S, stdin_data=stdin, errors="surrogateescape")


def git_out(where: Path, *args: str, env: dict[str, str] | None = None,
            stdin: bytes | None = None) -> str:
    """The output of `git -C <where> <args>` (`run_git`), or a GitError naming the command, the
    folder and git's own reason."""
    result = run_git(where, *args, env=env, stdin=stdin)
    if not result.ok and (lock := stale_lock(result)) is not None:
        lock.unlink(missing_ok=True)  # a git killed mid-command left it: no process holds it
        result = run_git(where, *args, env=env, stdin=stdin)
    if not result.ok:
        reason = gits_reason(result)
        why = (f"did not finish within {GIT_DEADLINE_S} s and was stopped" if result.timed_out
               else f"exited {result.exit_code}" + (f": {reason}" if reason else ""))
        raise GitError(f"`git {' '.join(args)}` in {where} {why}")
    return result.stdout


LOCK_EXISTS = re.compile(r"Unable to create '([^']+\.lock)': File exists")


def stale_lock(result) -> Path | None:
    """The lock file (`index.lock`, a ref's `.lock`) git refused to run on, when no process of
    this host holds it open: a git killed in the middle of a command (a killed run) left it,
    and the same command would fail on it for ever. None when git failed for another reason or
    a process holds the lock (a git still running: its command goes on, ours fails)."""
    found = LOCK_EXISTS.search(result.stderr or "")
    if found is None:
        return None
    lock = Path(found.group(1))
    return None if held_open(lock) else lock


def held_open(path: Path) -> bool:
    """Whether a process this user can see has `path` open (Linux's /proc/<pid>/fd)."""
    target = os.path.realpath(path)
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return True
            except OSError:
                continue
    return False


def gits_reason(result) -> str:
    """Git's own line of why a command failed: its first `fatal:` or `error:` line, else the last
    line it printed (progress before it is noise), else ""."""
    said = (result.stderr or result.stdout).strip().splitlines()
    return next((line for line in said if line.startswith(("fatal:", "error:"))),
                said[-1] if said else "")


def branch_name(delivery: str) -> str:
    return f"feat-{delivery}"


def exclude_rules(repo_root: Path, rules: tuple[str, ...]) -> None:
    """Add `rules` missing from the repository's `info/exclude` (shared by all its worktrees;
    git reads no per-worktree exclude file). Tracked files are unaffected."""
    repo = _git().Repo(repo_root)
    exclude = Path(repo.common_dir) / "info" / "exclude"
    present = set(_read(exclude).splitlines())
    missing = [r for r in rules if r not in present]
    if not missing:
        return
    exclude.parent.mkdir(parents=True, exist_ok=True)
    with open(exclude, "a", encoding="utf-8") as fh:
        fh.write("\n".join(["", EXCLUDE_MARK, *missing, ""]))


def is_repository(folder: Path) -> bool:
    """Whether `folder` is the top of a git work tree of its own: a `.git` folder with a HEAD (a
    repository) or a `.git` file (a worktree). Any other folder is a plain folder, also one
    with an empty `.git` folder: codex's sandbox leaves one behind (with `.codex`, `.agents`,
    `.aws`) in a plain folder when a command of it is killed. The one check of "is this a git
    repository" for a target, a harness root and the files git may hold."""
    git = folder / ".git"
    return git.is_file() or (git / "HEAD").is_file()


def keep_harness_clean(harness_root: Path) -> None:
    """The user's checkout shows nothing specops created: its state, worktrees and default
    Dagster home stay out of `git status` of a harness root that is a git repository."""
    if is_repository(harness_root):
        exclude_rules(harness_root, HARNESS_FILES)


def ensure_worktree(target: Path, harness_root: Path, delivery: str) -> Path:
    """The delivery's worktree (created on first use from the target's HEAD, reused after)."""
    keep_harness_clean(harness_root)
    exclude_rules(target, BUILD_OUTPUTS)
    return branch_worktree(target, (harness_root / WORKTREES / delivery).resolve(),
                           branch_name(delivery), "HEAD", f"`{delivery}`")


def node_branch(delivery: str, node: str) -> str:
    """The branch of a node that may run beside others (`+` is in no delivery or node id)."""
    return f"feat-{delivery}+{node}"


def node_worktree_path(harness_root: Path, delivery: str, node: str) -> Path:
    return (harness_root / WORKTREES / f"{delivery}+{node}").resolve()


def ensure_node_worktree(target: Path, harness_root: Path, delivery: str, node: str,
                         start: str) -> Path:
    """The node's own worktree on `feat-<d>+<node>`: reused when it exists, else added on that
    branch (a re-run after reopen goes on from the node's earlier work) or, the first time, on a
    new branch at `start` (its upstream nodes' result)."""
    return branch_worktree(target, node_worktree_path(harness_root, delivery, node),
                           node_branch(delivery, node), start,
                           f"node `{node}` of `{delivery}`")


def branch_worktree(target: Path, path: Path, branch: str, start: str, what: str) -> Path:
    """A worktree of `target` at `path` on `branch`: reused when it exists, else added on the
    branch if it exists, else on a new branch at `start`."""
    if (path / ".git").is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    run_git(target, "worktree", "prune")  # a checkout of a large product has a deadline too
    exists = run_git(target, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}").ok
    added = run_git(target, "worktree", "add", str(path), branch) if exists else run_git(
        target, "worktree", "add", "-b", branch, str(path), start)
    if not added.ok:
        why = (f"did not finish within {GIT_DEADLINE_S} s" if added.timed_out
               else gits_reason(added) or f"exit {added.exit_code}")
        raise WriteConflict(f"write conflict: cannot create the worktree of {what} at {path} on "
                            f"branch {branch}: {why}")
    return path


def contains(worktree: Path, rev: str) -> bool:
    """Is `rev` already part of the worktree's HEAD?"""
    return run_git(worktree, "merge-base", "--is-ancestor", rev, "HEAD").exit_code == 0


@dataclass(frozen=True)
class MergeConflict:
    """A merge git could not make: what was merged into which worktree, and the paths."""

    rev: str
    label: str
    paths: list[str]


# Git's automatic maintenance, which `git merge` and `git commit` start after their work: off for
# specops's own commands, so none packs the user's repository during a step or, detached
# (git's default), after it.
NO_MAINTENANCE = ("-c", "maintenance.auto=false", "-c", "gc.auto=0")


def _merge_git(worktree: Path):
    env = {**os.environ, **IDENTITY}

    def git(*args: str):
        return run_git(worktree, "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false",
                       *NO_MAINTENANCE, *args, env=env)

    return git


def merge(worktree: Path, rev: str, label: str, message: str,
          commit: bool = True) -> str | MergeConflict | None:
    """Merge `rev` (called `label` in messages) into the worktree's branch with a merge commit
    (never a silent resolution: a conflict is aborted, the tree left as it was, and returned);
    None when `rev` is already contained. `commit=False` leaves a clean merge staged (returns
    "") for the caller to check, then `conclude_merge` or `abort_merge`."""
    if contains(worktree, rev):
        return None
    git = _merge_git(worktree)

    def attempt():
        return git("merge", "--no-ff", "--no-edit", "-m", message, rev) if commit else git(
            "merge", "--no-ff", "--no-commit", rev)

    done = attempt()
    if not done.ok and not git("diff", "--name-only", "--diff-filter=U").stdout.split() \
            and undo_merge_leftovers(worktree, rev):
        done = attempt()  # a kill had cut this same merge short: made again from the start
    if done.ok:
        return git("rev-parse", "HEAD").stdout.strip() if commit else ""
    paths = git("diff", "--name-only", "--diff-filter=U").stdout.split()
    git("merge", "--abort")
    if not paths:
        raise GitError(f"cannot merge {label} into {worktree} (`git merge` exited "
                       f"{done.exit_code}: {(done.stderr or done.stdout).strip()})")
    return MergeConflict(rev, label, sorted(paths))


def undo_merge_leftovers(worktree: Path, rev: str) -> list[str]:
    """A `git merge` of `rev` killed half-way leaves the files it had written (and perhaps the
    index it had built) without its commit, so the merge made again refuses to overwrite them.
    Put back to HEAD exactly the paths `rev` changes whose content in the worktree is already
    `rev`'s: the merge writes them again. A path with any other content (a person's edit) is
    left as it is, so the merge still refuses and names it. Returns the paths put back."""
    base = run_git(worktree, "merge-base", "HEAD", rev)
    if not base.ok:
        return []
    changed = [p for p in run_git(worktree, "diff", "--no-renames", "--name-only", "-z",
                                  base.stdout.strip(), rev).stdout.split("\0") if p]
    if not changed:
        return []
    dirty = {p for args in (("diff", "HEAD", "--no-renames", "--name-only", "-z"),
                            ("ls-files", "--others", "-z"))
             for p in run_git(worktree, "--literal-pathspecs", *args, "--", *changed
                              ).stdout.split("\0")}
    leftovers = []
    for path in (p for p in changed if p in dirty):
        file = worktree / path
        want = run_git(worktree, "rev-parse", "--verify", "-q", f"{rev}:{path}").stdout.strip()
        if file.is_symlink() or not (file.is_file() if want else not file.exists()):
            continue
        if want and run_git(worktree, "hash-object", "--", path).stdout.strip() != want:
            continue
        leftovers.append(path)
    if not leftovers:
        return []
    run_git(worktree, "--literal-pathspecs", "reset", "-q", "HEAD", "--", *leftovers)
    in_head = set(run_git(worktree, "--literal-pathspecs", "ls-tree", "-r", "-z", "--name-only",
                          "HEAD", "--", *leftovers).stdout.split("\0"))
    if back := [p for p in leftovers if p in in_head]:
        run_git(worktree, "--literal-pathspecs", "checkout", "HEAD", "--", *back)
    for path in leftovers:
        if path not in in_head:
            (worktree / path).unlink(missing_ok=True)
    return leftovers


def conclude_merge(worktree: Path, message: str) -> str:
    """Commit the merge `merge(commit=False)` staged; return its SHA."""
    git = _merge_git(worktree)
    done = git("commit", "--no-verify", "-q", "-m", message)
    if not done.ok:
        raise GitError(f"cannot commit the merge in {worktree} (`git commit` exited "
                       f"{done.exit_code}: {(done.stderr or done.stdout).strip()})")
    return git("rev-parse", "HEAD").stdout.strip()


def abort_merge(worktree: Path) -> None:
    """Undo a merge `merge(commit=False)` staged (or a kill left): the tree as it was before."""
    _merge_git(worktree)("merge", "--abort")


def merging(worktree: Path) -> str | None:
    """The commit being merged into the worktree (its MERGE_HEAD), or None."""
    repo = _git().Repo(worktree)
    head = Path(repo.git_dir) / "MERGE_HEAD"
    return head.read_text(encoding="utf-8").split()[0] if head.is_file() else None


def branch_heads(worktree: Path, pattern: str) -> set[str]:
    """The commits the branches matching `pattern` (a `refs/heads/` glob) point at."""
    result = run_git(worktree, "for-each-ref", "--format=%(objectname)", f"refs/heads/{pattern}")
    return set(result.stdout.split()) if result.ok else set()


def merge_in_progress(worktree: Path) -> bool:
    return merging(worktree) is not None


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def export_tree(target: Path, delivery: str, into: Path) -> tuple[Path, str]:
    """(tree, commit): the files the delivery's worktree will hold when its first run creates
    it (feat-<d> if that branch exists, else HEAD), checked out under `into` through a private
    index, and that commit: the repository, its index and its refs are not touched."""
    branch = f"refs/heads/{branch_name(delivery)}"
    env = {**os.environ, "GIT_INDEX_FILE": str(into / "index")}

    def git(*args: str):
        return run_git(target, *args, env=env)

    rev = branch if git("rev-parse", "--verify", "--quiet", branch).ok else "HEAD"
    tree = into / "tree"
    for args in (("read-tree", rev), ("checkout-index", "-a", f"--prefix={tree}/")):
        result = git(*args)
        if not result.ok:
            raise UsageError(f"cannot read {rev} of {target} (`git {' '.join(args)}`: "
                             f"{result.stderr.strip() or result.exit_code}); the worktree is "
                             "created from it: commit to the target repository first")
    tree.mkdir(exist_ok=True)
    commit = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    return tree, commit.stdout.strip()


def snapshot_commit(worktree: Path, scratch: Path, message: str) -> tuple[str, str]:
    """(commit, tree) of the worktree as it is now — tracked and untracked files, ignore rules
    honoured — on top of its HEAD, built through a private index in `scratch`: the worktree's
    files, index, HEAD and branch are not touched and no ref points at the commit."""
    env = {**os.environ, "GIT_INDEX_FILE": str(scratch.resolve() / "snapshot-index"), **IDENTITY}
    scratch.mkdir(parents=True, exist_ok=True)

    def git(*args: str) -> str:
        result = run_git(worktree, *args, env=env)
        if not result.ok:
            raise GitError(f"cannot snapshot {worktree} (`git {' '.join(args)}` exited "
                           f"{result.exit_code}: {result.stderr.strip()})")
        return result.stdout.strip()

    try:
        git("read-tree", "HEAD")
        git("add", "-A")
        tree = git("write-tree")
        return git("commit-tree", "-p", "HEAD", "-m", message, tree), tree
    finally:
        Path(env["GIT_INDEX_FILE"]).unlink(missing_ok=True)


def add_detached_worktree(repo: Path, path: Path, rev: str) -> None:
    """A throwaway worktree of `repo` at `rev` (no branch): `remove_worktree` takes it away."""
    result = run_git(repo, "worktree", "add", "--detach", str(path), rev)
    if not result.ok:
        raise GitError(f"cannot create a throwaway worktree at {path} "
                       f"(`git worktree add --detach` exited {result.exit_code}: "
                       f"{result.stderr.strip()})")


def remove_worktree(repo: Path, path: Path) -> None:
    """Remove a throwaway worktree with whatever it holds (build output included), and prune
    git's record of it, also when its folder is already gone."""
    run_git(repo, "worktree", "remove", "--force", "--force", str(path))
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
    run_git(repo, "worktree", "prune")


def stale_locks(worktree: Path, branch: str) -> tuple[list[Path], list[Path]]:
    """Git lock files left in the worktree's git folders (its `index.lock`, `HEAD.lock`, the
    branch's ref lock): every later git write would fail on them. Returns (provably stale: no
    process has the file open, so a killed git left it; undecided: held open, or this process
    cannot see every other process's open files)."""
    repo = _git().Repo(worktree)
    git_dir, common = Path(repo.git_dir), Path(repo.common_dir)
    found = [p for p in (git_dir / "index.lock", git_dir / "HEAD.lock",
                         common / "refs" / "heads" / f"{branch}.lock") if p.exists()]
    if not found:
        return [], []
    users = open_by_any_process({os.path.realpath(p) for p in found})
    if users is None:
        return [], found
    return [p for p in found if os.path.realpath(p) not in users], \
        [p for p in found if os.path.realpath(p) in users]


def open_by_any_process(paths: set[str]) -> set[str] | None:
    """Which of `paths` some process has open (from /proc/*/fd), or None when a process's open
    files cannot be read (another user's): then nothing is provably unused."""
    held = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except FileNotFoundError:
            continue
        except PermissionError:
            return None
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target in paths:
                held.add(target)
    return held


def numstat(worktree: Path, base: str, rev: str) -> str:
    """`git diff --numstat base rev`: added, deleted and path of each file, tab-separated."""
    try:
        return git_out(worktree, "diff", "--numstat", "--no-renames", base, rev).rstrip("\n")
    except GitError as err:
        raise GitError(f"cannot diff {base[:12]}..{rev[:12]} in {worktree}: {err.message}"
                       ) from err


def head(worktree: Path) -> str:
    """HEAD's commit, resolved from the repository's files (HEAD, the branch, packed refs):
    no git process, and no object is read (GitPython would start a `git cat-file` for that).
    Raises ValueError for a HEAD with no commit yet, GitPython's errors for no repository."""
    git = _git()
    with git.Repo(worktree) as repo:
        return git.SymbolicReference.dereference_recursive(repo, "HEAD")


def product_changes(worktree: Path, since: str | None = None) -> list[str]:
    """Paths outside phases/ and docs/phase/ changed since `since` (default HEAD) or untracked:
    what one `git status` reports (staged, unstaged, untracked; no rename pairing), plus what
    the commits after `since` changed. The metadata folders are left out by pathspec, so git
    does not even walk them (a delivery adds files there at every node)."""
    scope = ["--", ".", *(f":(exclude){m}" for m in METADATA)]
    listed = git_out(worktree, "status", "--porcelain=v1", "-z", "--no-renames",
                     "--untracked-files=all", *scope)
    paths = {entry[3:] for entry in listed.split("\0") if entry}  # "XY path"
    if since:
        paths.update(git_out(worktree, "diff", "--name-only", "-z", "--no-renames", since,
                             "HEAD", *scope).split("\0"))
    paths.discard("")  # after the last NUL
    return sorted(paths)


def check_clean(worktree: Path, delivery: str, node: str) -> None:
    dirty = product_changes(worktree)
    if dirty:
        raise WriteConflict(
            f"write conflict: the worktree {worktree} of `{delivery}` has uncommitted changes "
            f"({', '.join(dirty[:5])}); commit or discard them yourself, then "
            f"`specops resume {delivery} {node}`")


@dataclass(frozen=True)
class StepCommits:
    product: str | None
    metadata: str | None


def commit_product(worktree: Path, delivery: str, node: str, attempt: int) -> str | None:
    """Commit every change outside phases/ and docs/phase/; None when there is none."""
    changed = product_changes(worktree)
    if not changed:
        return None
    # Exactly the changed paths: an exclude pathspec over an ignored folder (a harness root's
    # /phases/) would make `git add` fail.
    _add_literal(worktree, changed)
    return _commit(worktree, f"[{delivery}] {node} attempt {attempt}: product changes")


def commit_metadata(worktree: Path, delivery_dir: Path, delivery: str, node: str,
                    attempt: int, since: str | None = None,
                    others: frozenset[str] = frozenset()) -> str | None:
    """Copy what changed in the delivery folder into the worktree and commit it with
    docs/phase/<d>/. Only files that are new or differ (size or mtime; see `sync_tree`) are
    copied and added, and the folders of `others` (the delivery's other nodes, each
    committed by its own steps) are not looked at: a commit costs the same at the 200th node of a
    delivery as at the first."""
    message = f"[{delivery}] {node} attempt {attempt}: metadata"
    changed = [f"phases/{delivery}/{rel}"
               for rel in sync_tree(delivery_dir, worktree / "phases" / delivery, skip=others)]
    # a reopen moved the node's files to .revisions/<node>/: the move (its deletions too)
    changed += [f"phases/{delivery}/{rel}" for rel in (node, f".revisions/{node}")
                if (worktree / "phases" / delivery / rel).exists()]
    if (worktree / "docs" / "phase" / delivery).exists():
        changed.append(f"docs/phase/{delivery}")
    if changed:
        _add_literal(worktree, changed, force=True)  # force: a harness root's exclude: /phases/
    return (_commit(worktree, message) if changed else None) or made_before(worktree, message,
                                                                            since)


def made_before(worktree: Path, message: str, since: str | None) -> str | None:
    """The commit of `message` already on the branch after `since` (the step's base commit, so a
    reopened step's earlier run never counts) — a run killed after `git commit` and before the
    state recorded its SHA — or None when there was nothing to commit at all."""
    scope = [f"{since}..HEAD"] if since else []
    return git_out(worktree, "log", "-1", "--fixed-strings", f"--grep={message}", "--format=%H",
                   *scope).strip() or None


# A copy's mtime is its source's moved back 2 s. Git takes a file whose mtime is not older than
# its index (to the second) as "racily clean" and hashes it again at each write of the index: a
# state file copied just before a commit was hashed again by every `git add` and `write-tree` in
# that second (~2 ms each for a 650 KB state). A copy changed later still shows: it gets a new
# mtime, not the one git recorded.
BACKDATE_NS = 2_000_000_000


def sync_tree(src: Path, dest: Path, skip: frozenset[str] = frozenset()) -> list[str]:
    """Copy the files of `src` that are missing or differ in `dest` (size, or mtime: a copy's is
    its source's less BACKDATE_NS; skipping scratch files and transcripts, which are never
    committed, and the folders of `src` named in `skip`); return their relative POSIX paths,
    folder by folder in name order. It walks with `os.scandir` and plain strings: each file
    looked at costs a stat on each side."""
    copied: list[str] = []
    _sync_folder(os.fspath(src), os.fspath(dest), "", copied, skip)
    return copied


def _sync_folder(src: str, dest: str, rel: str, copied: list[str],
                 skip: frozenset[str] = frozenset()) -> None:
    with os.scandir(src) as it:
        entries = sorted(it, key=lambda e: e.name)
    folders = []
    for entry in entries:
        name = entry.name
        if entry.is_dir():
            if name not in SCRATCH and name not in skip and not name.startswith(".attempt-"):
                folders.append(entry)
            continue
        if name in SCRATCH or TRANSCRIPT.fullmatch(name):
            continue
        st, target = entry.stat(), os.path.join(dest, name)
        try:
            tt = os.stat(target)
            if (tt.st_size, tt.st_mtime_ns + BACKDATE_NS) == (st.st_size, st.st_mtime_ns):
                continue
        except FileNotFoundError:
            os.makedirs(dest, exist_ok=True)
        shutil.copy2(entry.path, target)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns - BACKDATE_NS))
        copied.append(rel + name)
    for entry in folders:
        if not entry.is_symlink():  # as os.walk: a linked folder is not followed
            _sync_folder(entry.path, os.path.join(dest, entry.name), f"{rel}{entry.name}/",
                         copied)


def _add_literal(worktree: Path, paths: list[str], force: bool = False) -> None:
    """`git add -A` of exactly `paths` (literal, NUL-separated, on its stdin: no argv limit)."""
    git_out(worktree, "--literal-pathspecs", "add", "-A", *(["-f"] if force else []),
            "--pathspec-from-file=-", "--pathspec-file-nul",
            stdin=b"\0".join(os.fsencode(p) for p in paths))


def _commit(worktree: Path, message: str) -> str | None:
    """Commit the index on HEAD as specops; None when it holds nothing new (its tree is HEAD's).
    Git's plumbing: `write-tree`, `commit-tree` (no hook of the target repository, no signing
    prompt) and `update-ref` of HEAD's branch from the HEAD it was made on, so a branch that moved
    meanwhile fails the commit instead of losing the other work. Unlike `git commit` it does not
    stat every tracked file again (`git add` just did, for what changed) nor start `git
    maintenance`: a commit costs the same at the 200th node of a delivery as at the first."""
    tree = git_out(worktree, "write-tree").strip()
    parent, parent_tree = git_out(worktree, "rev-parse", "HEAD", "HEAD^{tree}").split()
    if tree == parent_tree:
        return None
    commit = git_out(worktree, "-c", "commit.gpgsign=false", "commit-tree", tree, "-p", parent,
                     "-m", message, env={**os.environ, **IDENTITY}).strip()
    git_out(worktree, "update-ref", "-m", f"commit: {message}", "HEAD", commit, parent)
    return commit


def push(worktree: Path, delivery: str) -> str:
    """`git push origin feat-<delivery>` (never forced); returns git's summary of the push. It
    goes through the runner like every child: a push that hangs (a remote that does not answer)
    is ended with its whole tree (ssh included) at `GIT_DEADLINE_S`, and git never asks for
    credentials on a terminal no one watches (`GIT_TERMINAL_PROMPT=0`)."""
    branch = branch_name(delivery)
    if "origin" not in run_git(worktree, "remote").stdout.split():
        raise GitError(f"cannot push {branch}: the target repository has no `origin` remote; "
                       "add one with `git remote add origin <url>`")
    done = run_git(worktree, "push", "--porcelain", "origin",
                   f"refs/heads/{branch}:refs/heads/{branch}",
                   env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
    if done.timed_out:
        raise GitError(f"git push origin {branch} did not finish within {GIT_DEADLINE_S} s and "
                       "was stopped; check that origin is reachable, then push again")
    # --porcelain: "<flag>\t<from>:<to>\t<summary>" per ref; `!` is rejected
    refs = [line.split("\t") for line in done.stdout.splitlines()
            if line.count("\t") == 2 and line[:1] in " +-*!="]
    bad = [summary for flag, _, summary in refs if flag == "!"]
    if bad or (refs and not done.ok):
        summary = "; ".join(bad) or "no ref was pushed"
        raise GitError(f"git push origin {branch} was rejected ({summary}); it is never forced: "
                       "integrate the remote changes by hand")
    if not done.ok or not refs:
        raise GitError(f"git push origin {branch} failed: "
                       f"{(done.stderr or done.stdout).strip() or f'exit {done.exit_code}'}")
    return refs[0][2].strip()
