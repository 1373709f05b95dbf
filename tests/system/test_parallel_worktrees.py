"""Nodes that may run at the same time work in worktrees of their own (issue #20 item 1): each
commits only its own changes on `feat-<d>+<node>`, is validated on its own tree, lands in
`feat-<d>` by a merge, and a node downstream of several starts from their merge — a conflict
blocks that node, with the paths and the commands, never its siblings."""

from __future__ import annotations

from pathlib import Path

import git
import pytest

from specops_dag.delivery import lifecycle as ops
from specops_dag.delivery.store import Store
from specops_dag.execution.step import run_step
from specops_dag.files import sha256_file
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.agents import codex_phase, replay
from ..support.cli import job_execute, specops
from ..support.git import WHO, commit_paths
from ..support.harness import command_phase, write_tree

SPLIT = """
    kind: workflow
    id: split
    inputs: {request: {contract: req}}
    nodes:
      - {id: left, phase: s-left, inputs: {request: {input: request}}}
      - {id: right, phase: s-right, inputs: {request: {input: request}}}
      - {id: join, phase: s-join, needs: [left, right], inputs: {left: {node: left, output: notes}, right: {node: right, output: notes}}}
"""


def git_root(root: Path) -> Path:
    repo = git.Repo.init(root, initial_branch="main")
    repo.git.add(A=True)
    repo.index.commit("initial", author=WHO, committer=WHO)
    return root


def codex_split(tmp_path: Path) -> Path:
    files = {"workflow_defs/workflows/split.yaml": SPLIT, "README.md": "# product\n",
             ".gitignore": ".dagster_home/\n", "AGENTS.md": "# Agents\nBe precise.\n"}
    for pid, ins in (("s-left", {"request": "req"}), ("s-right", {"request": "req"}),
                     ("s-join", {"left": "notes", "right": "notes"})):
        files[f"workflow_defs/phases/{pid}.yaml"] = codex_phase(pid, ins, ("notes", "notes"),
                                                                "notes.md")
        files[f"workflow_defs/skills/{pid}-skill/SKILL.md"] = (
            f"---\nname: {pid}-skill\n---\nDo the {pid} part.\n")
    return git_root(write_tree(tmp_path / "harness", files))


def shell(command: str) -> dict:
    return {"literal": {"before": [{"shell": command}]}}


@pytest.mark.e2e
def test_two_branches_run_at_once_each_commit_only_their_own_work_and_the_join_starts_from_both(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    root = codex_split(tmp_path)
    assert specops(clean_env, root, "new", "split", "d1", "--request", "x").returncode == 0
    nodes = {"left": [shell("mkdir -p src && echo left > src/left.txt")],
             "right": [shell("mkdir -p src && echo right > src/right.txt")],
             "join": [shell("cat src/left.txt src/right.txt > src/join.txt")]}
    with replay(tmp_path, nodes) as server:
        env = {**clean_env, "SPECOPS_REPLAY_URL": server.url,
               "SPECOPS_CODEX_HOME": str(tmp_path / "codex-home")}
        run = job_execute(env, root, "split_job", "d1", executor="multiprocess")
    assert run.returncode == 0, run.stderr[-3000:]
    state = Store(root).read("d1")
    assert [(s.name, s.status, s.attempts) for s in state.steps] == [
        ("left", "completed", 1), ("right", "completed", 1), ("join", "completed", 1)]
    repo = git.Repo(root)
    left, right, join = (state.get_step(n) for n in ("left", "right", "join"))
    assert (left.branch, right.branch, join.branch) == ("feat-d1+left", "feat-d1+right", None)
    # no commit mixes the branches: each product commit holds its own node's file only
    assert commit_paths(repo, left.commits["product"]) == ["src/left.txt"]
    assert commit_paths(repo, right.commits["product"]) == ["src/right.txt"]
    assert commit_paths(repo, join.commits["product"]) == ["src/join.txt"]
    for sha in (left.commits["product"], right.commits["product"]):
        assert repo.commit(sha).parents[0].hexsha == state.base_commit  # from the delivery base
    # the join started from both: its base holds both files, and it read them
    base = repo.commit(join.base_commit).tree
    assert [(base / f"src/{n}.txt").data_stream.read() for n in ("left", "right")] == [
        b"left\n", b"right\n"]
    tip = repo.commit("feat-d1").tree
    assert (tip / "src/join.txt").data_stream.read() == b"left\nright\n"
    merges = [c.summary for c in repo.iter_commits("feat-d1") if len(c.parents) > 1]
    assert sorted(merges) == ["[d1] merge feat-d1+left: left attempt 1",
                              "[d1] merge feat-d1+right: right attempt 1"]
    for node in ("left", "right", "join"):  # metadata commits stay apart, on feat-d1
        sha = state.get_step(node).commits["metadata"]
        assert all(p.startswith(("phases/", "docs/phase/")) for p in commit_paths(repo, sha))
    assert sorted(p.name for p in (root / ".specops/worktrees").iterdir()) == ["d1"]


WRITE_SHARED = ("[python3, -c, \"import os,pathlib; n=os.environ['SPECOPS_NODE']; "
                "pathlib.Path('src').mkdir(exist_ok=True); "
                "pathlib.Path('src', 'shared.txt').write_text(n + chr(10)); "
                "pathlib.Path(os.environ['SPECOPS_NODE_DIR'], 'out.txt').write_text(n)\"]")
WRITE_JOIN = ("[python3, -c, \"import os,pathlib; "
              "pathlib.Path('src', 'join.txt').write_text(pathlib.Path('src/shared.txt')"
              ".read_text()); pathlib.Path(os.environ['SPECOPS_NODE_DIR'], 'out.txt')"
              ".write_text('join')\"]")


def command_split(tmp_path: Path) -> Store:
    files = {"workflow_defs/workflows/split.yaml": SPLIT.replace("output: notes", "output: out"),
             "README.md": "# product\n", ".gitignore": ".dagster_home/\n"}
    files["workflow_defs/phases/s-left.yaml"] = command_phase("s-left", WRITE_SHARED,
                                                              {"request": "req"}, {"out": "o"})
    files["workflow_defs/phases/s-right.yaml"] = command_phase("s-right", WRITE_SHARED,
                                                               {"request": "req"}, {"out": "o"})
    files["workflow_defs/phases/s-join.yaml"] = command_phase(
        "s-join", WRITE_JOIN, {"left": "o", "right": "o"}, {"out": "o"})
    root = git_root(write_tree(tmp_path / "harness", files))
    store = Store(root)
    ops.new_delivery(store, load_catalog(definition_roots(root), display_base=root), "split",
                     "d1", "Write the shared file twice.")
    return store


def test_a_merge_conflict_blocks_the_join_with_the_paths_and_commands_never_its_siblings(
        tmp_path: Path) -> None:
    store = command_split(tmp_path)
    root = store.root
    assert [run_step(store, "d1", n).status for n in ("left", "right")] == ["completed"] * 2
    state = store.read("d1")
    right = state.get_step("right")
    assert right.commits["merge"] is None  # not merged: its downstream meets the conflict
    assert [e.detail for e in state.history if e.event == "merge deferred"] == [
        "feat-d1+right conflicts with feat-d1 on src/shared.txt; the nodes downstream start "
        "from the merge of their upstream nodes and meet the conflict there"]
    outcome = run_step(store, "d1", "join")
    tree = (root / ".specops/worktrees/d1").resolve()
    rev = right.result_commit
    assert (outcome.status, outcome.message) == ("blocked", (
        f"merge conflict: merging `right` (feat-d1+right) into the tree of `join` ({tree}) "
        f"conflicts on src/shared.txt; the merge was aborted and nothing was resolved. Resolve "
        f"it by hand: `git -C {tree} merge {rev}`, fix src/shared.txt, `git -C {tree} commit "
        f"--no-edit`, then `specops resume d1 join`"))
    state = store.read("d1")
    assert [(s.name, s.status) for s in state.steps] == [
        ("left", "completed"), ("right", "completed"), ("join", "blocked")]
    repo = git.Repo(tree)
    assert not repo.is_dirty(untracked_files=True)  # the merge was aborted: nothing half-done
    # the person resolves it the way the message says, then resumes
    assert repo.git.merge(rev, with_exceptions=False) is not None
    (tree / "src/shared.txt").write_text("left and right\n")
    repo.git.add("src/shared.txt")
    repo.git.commit("--no-edit")
    ops.resume(store, "d1", "join")
    assert run_step(store, "d1", "join").status == "completed"
    tip = git.Repo(root).commit("feat-d1").tree
    assert (tip / "src/join.txt").data_stream.read() == b"left and right\n"
    assert (tip / "src/shared.txt").data_stream.read() == b"left and right\n"


def test_a_conflicting_node_with_no_downstream_node_is_blocked_itself(tmp_path: Path) -> None:
    store = command_split(tmp_path)
    snapshot = store.delivery_dir("d1") / "snapshot/workflows/split.yaml"
    snapshot.write_text(snapshot.read_text().split("  - {id: join")[0])
    with store.transaction("d1") as state:  # as if created without `join`: the frozen hash too
        state.steps = [s for s in state.steps if s.name != "join"]
        frozen = next(f for f in state.snapshot.files if f.copy_path.endswith("/split.yaml"))
        frozen.sha256 = sha256_file(snapshot)
    assert run_step(store, "d1", "left").status == "completed"
    outcome = run_step(store, "d1", "right")
    tree = (store.root / ".specops/worktrees/d1").resolve()
    assert (outcome.status, outcome.message) == ("blocked", (
        f"merge conflict: merging feat-d1+right into feat-d1 ({tree}) conflicts on "
        f"src/shared.txt; the merge was aborted and nothing was resolved. Resolve it by hand: "
        f"`git -C {tree} merge feat-d1+right`, fix src/shared.txt, `git -C {tree} commit "
        f"--no-edit`, then `specops resume d1 right`"))
    state = store.read("d1")
    assert [(s.name, s.status) for s in state.steps] == [("left", "completed"),
                                                          ("right", "blocked")]
    assert (tree / "src/shared.txt").read_text() == "left\n"
    assert not git.Repo(tree).is_dirty(untracked_files=True)


def test_a_merge_a_kill_interrupted_is_aborted_and_made_again_but_a_persons_is_left_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ..support.git import git_harness, new

    monkeypatch.setenv("CALLS", str(tmp_path / "calls.log"))
    root, _ = git_harness(tmp_path)
    store = new(root)
    assert [run_step(store, "d1", n).status for n in "ab"] == ["completed"] * 2
    tree = (root / ".specops/worktrees/d1").resolve()
    repo = git.Repo(tree)
    # as if a kill hit b's merge into feat-d1 half-way: the merge staged, never committed
    repo.git.reset("--hard", store.read("d1").get_step("a").commits["metadata"])
    repo.git.merge("--no-commit", "--no-ff", "feat-d1+b")
    assert (Path(repo.git_dir) / "MERGE_HEAD").exists()
    assert run_step(store, "d1", "c").status == "completed"
    state = store.read("d1")
    assert [e.detail for e in state.history if e.event == "aborted an interrupted merge"] == [
        f"{state.get_step('b').result_commit[:12]} in {tree}"]
    assert run_step(store, "d1", "d").status == "completed"  # merges b's work again
    tip = git.Repo(root).commit("feat-d1").tree
    assert {f"src/{n}.txt" for n in "abcd"} <= {b.path for b in tip.traverse()}

    # a merge a person started while a node is blocked on a merge conflict is theirs
    with store.transaction("d1") as state:
        state.get_step("d").status = "blocked"
        state.get_step("d").blocked_reason = "merge conflict: (by hand)"
    repo.git.reset("--hard", store.read("d1").get_step("a").commits["metadata"])
    repo.git.merge("--no-commit", "--no-ff", "feat-d1+c")
    from specops_dag.execution.step import undo_interrupted_merge

    with store.transaction("d1") as state:
        undo_interrupted_merge(state, state.get_step("d"), tree)
    assert (Path(repo.git_dir) / "MERGE_HEAD").exists()
