"""Harness roots that are real git repositories: the diamond of command phases that change
product files (with a bare origin), its deliveries, and the commits they make."""

from __future__ import annotations

from pathlib import Path

import git

from specops_dag.delivery import lifecycle as ops
from specops_dag.delivery.store import Store
from specops_dag.execution.step import run_step
from specops_dag.workflow.catalog import definition_roots, load_catalog

from .harness import DIAMOND, command_phase, write_tree

# Writes a product file in the worktree (cwd), the artifact, and the step record; appends the
# node to $CALLS so tests can count which nodes really ran.
WRITE = ("[python3, -c, \"import os,pathlib; n=os.environ['SPECOPS_NODE']; "
         "d=os.environ['SPECOPS_DELIVERY']; pathlib.Path('src').mkdir(exist_ok=True); "
         "pathlib.Path('src', n + '.txt').write_text(n + chr(10)); "
         "pathlib.Path(os.environ['SPECOPS_NODE_DIR'], 'out.txt').write_text(n); "
         "r=pathlib.Path('docs/phase', d); r.mkdir(parents=True, exist_ok=True); "
         "(r / (n + '.md')).write_text('# ' + n + chr(10)); "
         "open(os.environ['CALLS'], 'a').write(n + chr(10))\"]")

WHO = git.Actor("tester", "tester@example.com")


def git_harness(tmp_path: Path) -> tuple[Path, Path]:
    """(harness root = target repo on `main` with one commit, bare origin)."""
    files = dict(DIAMOND)
    ports = {"p-a": ({"request": "req"}, {"out": "a-out"}), "p-b": ({"up": "a-out"}, {"out": "b-out"}),
             "p-c": ({"up": "a-out"}, {"out": "c-out"}),
             "p-d": ({"left": "b-out", "right": "c-out"}, {"out": "d-out"})}
    for pid, (ins, outs) in ports.items():
        files[f"workflow_defs/phases/{pid}.yaml"] = command_phase(pid, WRITE, ins, outs)
    root = write_tree(tmp_path / "harness", {**files, "README.md": "# product\n",
                                             ".gitignore": ".dagster_home/\n"})
    repo = git.Repo.init(root, initial_branch="main")
    repo.git.add(A=True)
    repo.index.commit("initial", author=WHO, committer=WHO)
    origin = tmp_path / "origin.git"
    git.Repo.init(origin, bare=True)
    repo.create_remote("origin", str(origin))
    return root, origin


def commit_paths(repo: git.Repo, sha: str) -> list[str]:
    commit = repo.commit(sha)
    return sorted(commit.stats.files)


def commit_all(folder: Path) -> None:
    repo = git.Repo.init(folder, initial_branch="main")
    repo.git.add(A=True)
    repo.index.commit("initial", author=WHO, committer=WHO)


def new(root: Path, delivery: str = "d1") -> Store:
    store = Store(root)
    ops.new_delivery(store, load_catalog(definition_roots(root), display_base=root), "diamond",
                     delivery, "Add the four files.")
    return store


def run_all(store: Store, delivery: str = "d1") -> list[str]:
    return [run_step(store, delivery, n).status for n in "abcd"]
