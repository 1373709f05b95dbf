"""Human feedback reaches the agent, handoffs are only what completed steps left, resumed steps go
on from their own leftovers, and the user's checkout stays clean (issue #15, items 4-6)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import git
import pytest

from specops_dag.agent.prompt import assemble_prompt
from specops_dag.delivery import lifecycle as ops
from specops_dag.delivery.gates import approve
from specops_dag.delivery.lifecycle import snapshot_catalog
from specops_dag.delivery.store import Store
from specops_dag.errors import UsageError
from specops_dag.execution.step import run_step
from specops_dag.files import sha256_file
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.agents import agentic_root, completed_write
from ..support.agents import new as new_agentic
from ..support.git import WHO, commit_paths, git_harness
from ..support.harness import DIAMOND, command_phase, write_tree


def prompt_parts(root: Path, node: str) -> list[tuple[str, str | None]]:
    store = Store(root)
    state = store.read("d1")
    prompt = assemble_prompt(root, state, state.get_step(node), snapshot_catalog(store, state),
                             root)
    return [(p.label, p.path) for p in prompt.parts]


def test_a_handoff_file_no_completed_step_left_is_not_presented_as_the_delivery_handoff(
        tmp_path: Path) -> None:
    root = agentic_root(tmp_path)
    new_agentic(root)
    completed_write(root)  # `write` completed before any handoff.md existed
    write_tree(root, {"docs/phase/d1/handoff.md": "# left by a failed attempt\n"})
    assert ("delivery handoff", "docs/phase/d1/handoff.md") not in prompt_parts(root, "review")
    assert ("summary of step 0 (write)", None) in prompt_parts(root, "review")


def completed_with_handoff(tmp_path: Path) -> Path:
    """`write` completed after writing docs/phase/d1/handoff.md (so it registered it)."""
    root = agentic_root(tmp_path)
    write_tree(root, {"docs/phase/d1/handoff.md": "# from write\n"})
    new_agentic(root)
    completed_write(root)
    return root


def test_the_handoff_a_completed_step_registered_is_presented_until_it_changes(
        tmp_path: Path) -> None:
    root = completed_with_handoff(tmp_path)
    assert ("delivery handoff", "docs/phase/d1/handoff.md") in prompt_parts(root, "review")
    (root / "docs/phase/d1/handoff.md").write_text("# rewritten by review's failed attempt\n")
    assert ("delivery handoff", "docs/phase/d1/handoff.md") not in prompt_parts(root, "review")


def test_after_a_reopen_the_stale_handoff_of_the_reopened_step_is_not_presented(
        tmp_path: Path) -> None:
    root = completed_with_handoff(tmp_path)
    ops.reopen(Store(root), "d1", "write", "the notes miss the edge cases")
    assert [label for label, _ in prompt_parts(root, "review")] == [
        "AGENTS.md", "common work rules", "human feedback", "current step"]


def test_a_reopen_reason_reaches_the_prompt_of_every_node_it_sends_back(tmp_path: Path) -> None:
    root = agentic_root(tmp_path)
    new_agentic(root)
    completed_write(root)
    store = Store(root)
    with store.transaction("d1") as state:
        state.get_step("write").last_failure = "an older failure"
    ops.reopen(store, "d1", "write", "cover the empty feed")
    state = store.read("d1")
    assert state.get_step("write").feedback == "cover the empty feed"
    assert state.get_step("review").feedback == "cover the empty feed (reopened from `write`)"
    prompt = assemble_prompt(root, state, state.get_step("write"),
                             snapshot_catalog(store, state), root)
    assert prompt.parts[2].label == "human feedback"
    assert prompt.parts[2].text == ("# Feedback from a person on this step\n\n"
                                    "cover the empty feed")


def after_gate_root(tmp_path: Path) -> Path:
    files = dict(DIAMOND)
    files["workflow_defs/workflows/diamond.yaml"] = files[
        "workflow_defs/workflows/diamond.yaml"].replace(
        "- {id: a, phase: p-a, inputs", "- {id: a, phase: p-a, gates: {after: design}, inputs")
    return write_tree(tmp_path / "harness", files)


def test_rejecting_an_after_gate_sends_its_node_back_with_the_note_in_its_prompt(
        tmp_path: Path) -> None:
    root = after_gate_root(tmp_path)
    store = Store(root)
    ops.new_delivery(store, load_catalog(definition_roots(root), display_base=root), "diamond",
                     "d1", "Do it.")
    assert run_step(store, "d1", "a").status == "completed"
    assert run_step(store, "d1", "b").message == "awaiting approval: design"
    approve(store, "d1", "design", note="the plan ignores caching", reject=True)
    state = store.read("d1")
    a = state.get_step("a")
    assert (a.status, a.feedback) == ("pending", "gate `design` rejected: the plan ignores caching")
    assert state.get_step("b").status == "pending"
    assert state.get_step("a").revisions[-1].reason == (
        "gate `design` rejected: the plan ignores caching")
    assert run_step(store, "d1", "a").status == "completed"
    assert store.read("d1").get_step("a").feedback is None
    assert run_step(store, "d1", "b").message == "rejected: design: the plan ignores caching"


FLAKY = ("[python3, -c, \"import os,pathlib,sys; pathlib.Path('src').mkdir(exist_ok=True); "
         "pathlib.Path('src/left.txt').write_text('half done' + chr(10)); "
         "ok=pathlib.Path(os.environ['MARKER']).exists(); "
         "ok and pathlib.Path(os.environ['SPECOPS_NODE_DIR'], 'out.txt').write_text('x'); "
         "sys.exit(0 if ok else 1)\"]")


@pytest.mark.e2e
def test_a_resumed_step_goes_on_from_its_own_leftover_changes_instead_of_a_write_conflict(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_tree(tmp_path / "harness", {
        "workflow_defs/workflows/one.yaml": """
            kind: workflow
            id: one
            inputs: {request: {contract: req}}
            nodes:
              - {id: a, phase: p-flaky, inputs: {request: {input: request}}}
        """,
        "workflow_defs/phases/p-flaky.yaml": command_phase("p-flaky", FLAKY, {"request": "req"}),
        "README.md": "# product\n"})
    repo = git.Repo.init(root, initial_branch="main")
    repo.git.add(A=True)
    repo.index.commit("initial", author=WHO, committer=WHO)
    marker = tmp_path / "marker"
    monkeypatch.setenv("MARKER", str(marker))
    store = Store(root)
    ops.new_delivery(store, load_catalog(definition_roots(root), display_base=root), "one", "d1",
                     "Do it.")
    assert [run_step(store, "d1", "a").status for _ in range(3)] == ["failed", "failed", "error"]
    marker.touch()
    ops.resume(store, "d1", "a")
    assert run_step(store, "d1", "a").status == "completed"
    state = store.read("d1")
    assert commit_paths(repo, state.get_step("a").commits["product"]) == ["src/left.txt"]
    assert [e.detail for e in state.history if e.event == "resumed on leftover changes"] == [
        "src/left.txt"]


BUILD_OUTPUT = ("[python3, -c, \"import os,pathlib; n=os.environ['SPECOPS_NODE']; "
                "[pathlib.Path(p).mkdir(parents=True, exist_ok=True) for p in "
                "('src/bin/Debug', 'src/obj', 'tests/TestResults', '.vs')]; "
                "[pathlib.Path(p, n).write_text(n) for p in "
                "('src/bin/Debug', 'src/obj', 'tests/TestResults', '.vs', 'src')]; "
                "pathlib.Path(os.environ['SPECOPS_NODE_DIR'], 'out.txt').write_text(n)\"]")


@pytest.mark.e2e
def test_build_outputs_are_never_committed_and_the_users_checkout_stays_clean(
        tmp_path: Path) -> None:
    root, _ = git_harness(tmp_path)
    (root / ".gitignore").unlink()  # nothing of the user's ignores .dagster_home/ or bin/
    for pid in ("p-a", "p-b", "p-c", "p-d"):
        path = root / "workflow_defs/phases" / f"{pid}.yaml"
        text = path.read_text()
        start = text.index("argv: ") + len("argv: ")
        path.write_text(text[:start] + BUILD_OUTPUT + text[text.index(", timeout_s"):])
    repo = git.Repo(root)
    repo.git.add(A=True)
    repo.index.commit("no ignores", author=WHO, committer=WHO)
    store = Store(root)
    ops.new_delivery(store, load_catalog(definition_roots(root), display_base=root), "diamond",
                     "d1", "Build it.")
    (root / ".dagster_home").mkdir()  # as `specops new` / `run` default it
    assert [run_step(store, "d1", n).status for n in "abcd"] == ["completed"] * 4
    state = store.read("d1")
    assert commit_paths(repo, state.get_step("a").commits["product"]) == ["src/a"]
    assert state.get_step("b").commits["product"] is not None
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=root,
                            capture_output=True, text=True, check=True, timeout=30)
    assert status.stdout == ""
    assert sha256_file(root / ".specops/worktrees/d1/src/bin/Debug/a")  # still on disk


@pytest.mark.parametrize(("error", "reason"), [
    (RuntimeError("boom"), "internal error while running the attempt (RuntimeError: boom); "
                           "report it, then `specops resume d1 a`"),
    (UsageError("docs/x.md: not UTF-8 text; save it as UTF-8 or remove it"),
     "docs/x.md: not UTF-8 text; save it as UTF-8 or remove it; after fixing it, `specops "
     "resume d1 a`")])
def test_an_error_while_running_an_attempt_leaves_the_step_blocked_never_running(
        diamond_root: Path, monkeypatch: pytest.MonkeyPatch, error: Exception,
        reason: str) -> None:
    import specops_dag.execution.step as step_module

    def explode(*args: object) -> None:
        raise error

    monkeypatch.setattr(step_module, "run_attempt", explode)
    store = Store(diamond_root)
    ops.new_delivery(store, load_catalog(definition_roots(diamond_root),
                                         display_base=diamond_root), "diamond", "d1", "Do it.")
    outcome = run_step(store, "d1", "a")
    assert (outcome.status, outcome.message) == ("environment", f"blocked: {reason}")
    step = store.read("d1").get_step("a")
    assert (step.status, step.blocked_reason, step.owner) == ("blocked", reason, None)
