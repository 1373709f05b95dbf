"""The delivery's git workflow (DESIGN §10, seed 001 §9) with GitPython: a dedicated worktree on
branch `feat-<delivery>`, two commits per successful step (product, then metadata), and a push
that never forces. The user's checkout and other branches are never touched; a dirty worktree is
a write conflict to resolve by hand, never a silent reset.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from .errors import SpecopsError, WriteConflict

METADATA = ("phases", "docs/phase")
WORKTREES = Path(".specops") / "worktrees"
# Files of phases/<d>/ that are scratch, not metadata worth a commit.
SCRATCH = {".lock", ".run.lock", "runs", "validation", "last-message.txt"}


def _git():
    """GitPython, imported on first use: loading the code location or a fast command skips it."""
    import git

    return git


def identity():
    return _git().Actor("specops", "specops@localhost")


class GitError(SpecopsError):
    """A git operation failed (push rejected, repository broken)."""


def is_repo(path: Path) -> bool:
    try:
        _git().Repo(path, search_parent_directories=False)
        return True
    except (_git().InvalidGitRepositoryError, _git().NoSuchPathError):
        return False


def branch_name(delivery: str) -> str:
    return f"feat-{delivery}"


def ensure_worktree(target: Path, harness_root: Path, delivery: str) -> Path:
    """The delivery's worktree (created on first use from the target's HEAD, reused after)."""
    path = (harness_root / WORKTREES / delivery).resolve()
    repo = _git().Repo(target)
    exclude = Path(repo.git_dir) / "info" / "exclude"
    rule = "/.specops/"
    if harness_root.resolve() == target.resolve() and rule not in _read(exclude):
        exclude.parent.mkdir(parents=True, exist_ok=True)
        with open(exclude, "a", encoding="utf-8") as fh:  # keep worktrees out of `git status`
            fh.write(f"\n{rule}\n")
    if (path / ".git").exists():
        return path
    branch = branch_name(delivery)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if branch in repo.heads:
            repo.git.worktree("add", str(path), branch)
        else:
            repo.git.worktree("add", "-b", branch, str(path), "HEAD")
    except _git().GitCommandError as err:
        raise WriteConflict(f"write conflict: cannot create the worktree of `{delivery}` at "
                            f"{path} on branch {branch}: {err.stderr.strip()}") from err
    return path


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def head(worktree: Path) -> str:
    return _git().Repo(worktree).head.commit.hexsha


def product_changes(worktree: Path, since: str | None = None) -> list[str]:
    """Paths outside phases/ and docs/phase/ changed since `since` (default HEAD) or untracked."""
    repo = _git().Repo(worktree)
    base = repo.commit(since or "HEAD")
    paths = {p for d in base.diff(None) for p in (d.a_path, d.b_path) if p}
    paths |= set(repo.untracked_files)
    return sorted(p for p in paths if not _is_metadata(p))


def _is_metadata(path: str) -> bool:
    return any(path == m or path.startswith(m + "/") for m in METADATA)


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
    repo = _git().Repo(worktree)
    changed = product_changes(worktree)
    if not changed:
        return None
    repo.git.add("-A", "--", ".", *(f":(exclude){m}" for m in METADATA))
    commit = repo.index.commit(f"[{delivery}] {node} attempt {attempt}: product changes",
                               author=identity(), committer=identity())
    return commit.hexsha


def commit_metadata(worktree: Path, delivery_dir: Path, delivery: str, node: str,
                    attempt: int) -> str | None:
    """Copy the delivery folder into the worktree and commit it with docs/phase/<d>/."""
    repo = _git().Repo(worktree)
    dest = worktree / "phases" / delivery
    shutil.copytree(delivery_dir, dest, dirs_exist_ok=True,
                    ignore=lambda folder, names: [n for n in names
                                                  if n in SCRATCH or n.startswith(".attempt-")])
    paths = [f"phases/{delivery}"]
    if (worktree / "docs" / "phase" / delivery).exists():
        paths.append(f"docs/phase/{delivery}")
    repo.git.add("-A", "--", *paths)
    if not repo.index.diff("HEAD"):
        return None
    commit = repo.index.commit(f"[{delivery}] {node} attempt {attempt}: metadata",
                               author=identity(), committer=identity())
    return commit.hexsha


def push(worktree: Path, delivery: str) -> str:
    """`git push origin feat-<delivery>` (never forced); returns git's summary of the push."""
    repo = _git().Repo(worktree)
    branch = branch_name(delivery)
    if "origin" not in [r.name for r in repo.remotes]:
        raise GitError(f"cannot push {branch}: the target repository has no `origin` remote; "
                       "add one with `git remote add origin <url>`")
    try:
        results = repo.remote("origin").push(f"refs/heads/{branch}:refs/heads/{branch}")
    except _git().GitCommandError as err:
        raise GitError(f"git push origin {branch} failed: {err.stderr.strip()}") from err
    bad = [r for r in results if r.flags & (r.ERROR | r.REJECTED | r.REMOTE_REJECTED)]
    if bad or not results:
        summary = "; ".join(r.summary.strip() for r in bad) or "no ref was pushed"
        raise GitError(f"git push origin {branch} was rejected ({summary}); it is never forced: "
                       "integrate the remote changes by hand")
    return results[0].summary.strip()
