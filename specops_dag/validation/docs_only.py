"""Decides whether a step's git change is documentation only (seed 001 §8 docs-only, DESIGN §8),
so the .NET build may be skipped. Anything doubtful falls back to full validation: a git failure,
an empty or bookkeeping-only change, an untracked C# or other file, a path through a symlink.
Reads git (two commands through the runner) and the work tree; changes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from specops_dag.gitflow import GitError, git_out

# What specops itself writes in a delivery's folder. A node's evidence record is committed with
# its metadata, so a node reopened and run again changes (removes) those of the nodes after it.
BOOKKEEPING = {"index.json", "prompt.md", "request.md", "last-message.txt", ".lock",
               ".run.lock", "evidence.json"}
STEP_OUTPUT = re.compile(r"step\d+-output\.json")


@dataclass(frozen=True)
class DocsDecision:
    docs_only: bool
    reason: str
    paths: tuple[str, ...] = ()


def classify(path: str, delivery: str) -> str:
    """`doc`, `bookkeeping` or `other` for one changed path (relative, POSIX)."""
    p = PurePosixPath(path)
    if path == "AGENTS.md" or (p.parts[:1] == ("docs",) and p.suffix == ".md"):
        return "doc"
    if path in ("phases/index.json", "phases/.index.lock", "phases/README.md"):
        return "bookkeeping"
    if p.parts[:2] != ("phases", delivery):
        return "other"
    if (p.parts[2:3] in (("snapshot",), ("runs",), (".owners",), (".revisions",))
            or p.name in BOOKKEEPING or STEP_OUTPUT.fullmatch(p.name)):
        return "bookkeeping"
    return "doc" if p.suffix == ".md" else "other"  # the delivery's own documents (handoffs)


def changed_paths(target: Path, base: str) -> list[str]:
    """Every path changed since `base` in the work tree (both sides of a rename: no rename
    pairing) + untracked, in git's order."""
    untracked = git_out(target, "ls-files", "-z", "--others", "--exclude-standard")
    listed = git_out(target, "diff", "--name-only", "-z", "--no-renames", base, "--")
    return list(dict.fromkeys(p for p in (listed + untracked).split("\0") if p))


def through_symlink(root: Path, path: str) -> bool:
    current = root
    for part in PurePosixPath(path).parts:
        current = current / part
        if current.is_symlink():
            return True
    return False


def docs_only_change(target: Path, base_commit: str | None, delivery: str) -> DocsDecision:
    """Whether the change since `base_commit` may skip the build; `reason` says why (not)."""
    if not base_commit:
        return DocsDecision(False, "no base commit was recorded for the step")
    try:
        paths = changed_paths(target, base_commit)
    except GitError as err:
        return DocsDecision(False, f"git could not list the change ({err.message})")
    if not paths:
        return DocsDecision(False, "the change since the base commit is empty")
    linked = [p for p in paths if through_symlink(target, p)]
    if linked:
        return DocsDecision(False, f"changed through a symlink: {', '.join(linked[:5])}",
                            tuple(paths))
    kinds = {p: classify(p, delivery) for p in paths}
    others = [p for p, k in kinds.items() if k == "other"]
    if others:
        return DocsDecision(False, f"not documentation: {', '.join(others[:5])}", tuple(paths))
    docs = [p for p, k in kinds.items() if k == "doc"]
    if not docs:
        return DocsDecision(False, "bookkeeping only, no documentation change", tuple(paths))
    return DocsDecision(True, f"documentation only: {', '.join(docs[:5])}", tuple(paths))
