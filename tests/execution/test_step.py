from __future__ import annotations

import json
from pathlib import Path

import pytest

from specops_dag.delivery import gates
from specops_dag.delivery import queries as reading
from specops_dag.execution.step import run_step
from specops_dag.files import sha256_file

from ..support.harness import DIAMOND, FAIL, command_phase, make_delivery, write_tree

FIRST = "workflow_defs/phases/p-a.yaml"


def with_phase_a(tmp_path: Path, argv: str, artifact: str = "out.txt", kind: str = "") -> Path:
    phase = command_phase("p-a", argv, {"request": "req"}, {"out": "a-out"}, artifact=artifact)
    if kind:
        phase = (f"kind: phase\nid: p-a\ninput: {{ports: {{request: {{contract: req}}}}}}\n"
                 f"execution:\n  goal: Think.\n  executor: {{kind: {kind}}}\n  skills:\n"
                 "    - {id: think, path: skills/think/SKILL.md, load: entry, required: true}\n"
                 "output: {ports: {out: {contract: a-out}}}\n")
    return write_tree(tmp_path / "harness", {**DIAMOND, FIRST: phase,
                                             "workflow_defs/skills/think/SKILL.md": "# think\n"})


def test_a_diamond_of_commands_completes_and_registers_handoffs_with_sha256(
        diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    outcomes = [run_step(store, "d1", node, workflow="diamond") for node in "abcd"]
    assert [(o.node, o.status, o.attempt) for o in outcomes] == [
        ("a", "completed", 1), ("b", "completed", 1), ("c", "completed", 1),
        ("d", "completed", 1)]
    state = store.read("d1")
    assert state.status == "completed"
    out = diamond_root / "phases/d1/d/out.txt"
    assert out.read_text() == "d"
    d = state.get_step("d")
    assert d.handoff["result"].model_dump() == {"path": "phases/d1/d/out.txt",
                                                "sha256": sha256_file(out)}
    assert list(d.consumed) == ["b/result", "c/result"]
    assert d.owner is None and d.completed_at and d.started_at
    record = json.loads((diamond_root / "phases/d1/d/step3-output.json").read_text())
    assert (record["attempt"], record["exit_code"], record["timed_out"]) == (1, 0, False)


@pytest.mark.e2e
def test_a_completed_step_is_reported_reused_and_never_re_run(diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    run_step(store, "d1", "a")
    out = diamond_root / "phases/d1/a/out.txt"
    out.write_text("edited by hand")
    phases = diamond_root / "phases"
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in phases.rglob("*") if p.is_file()}
    again = run_step(store, "d1", "a")
    assert (again.status, again.message) == ("reused", "completed earlier; not re-run")
    assert out.read_text() == "edited by hand"
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in phases.rglob("*")
            if p.is_file()} == before  # deciding "reused" writes nothing
    assert reading.drift(store.root, store.read("d1")) == []
    run_step(store, "d1", "b")
    out.write_text("edited again")
    assert reading.drift(store.root, store.read("d1")) == [
        "b: input `a/result` phases/d1/a/out.txt changed since it was consumed"]


@pytest.mark.e2e
def test_a_failing_command_gets_three_attempts_then_the_step_is_error(tmp_path: Path) -> None:
    store = make_delivery(with_phase_a(tmp_path, FAIL))
    outcomes = [run_step(store, "d1", "a") for _ in range(3)]
    assert [(o.status, o.attempt, o.retryable) for o in outcomes] == [
        ("failed", 1, True), ("failed", 2, True), ("error", 3, False)]
    step = store.read("d1").get_step("a")
    assert (step.status, step.attempts) == ("error", 3)
    assert step.error_message == ("`python3 -c 'import sys; print('\"'\"'boom on stdout'\"'\"'); sys.exit(7)'` "
                                  "exited 7\nboom on stdout")
    assert step.failed_at is not None
    fourth = run_step(store, "d1", "a")
    assert fourth.status == "error"
    assert fourth.message.endswith("fix the cause, then `specops resume d1 a`")
    assert store.read("d1").get_step("a").attempts == 3


def test_exit_zero_without_the_required_artifact_is_a_failed_attempt(tmp_path: Path) -> None:
    store = make_delivery(with_phase_a(tmp_path, "[python3, -c, pass]"))
    outcome = run_step(store, "d1", "a")
    assert (outcome.status, outcome.message) == (
        "failed", "attempt 1/3 failed: exit 0 but required artifacts are missing: `result` "
        "(phases/d1/a/out.txt)")


def test_a_command_past_its_deadline_is_killed_and_counts_as_an_attempt(tmp_path: Path) -> None:
    root = with_phase_a(tmp_path, "[python3, -c, 'import time; time.sleep(60)']")
    phase = root / FIRST
    phase.write_text(phase.read_text().replace("timeout_s: 30", "timeout_s: 1"))
    store = make_delivery(root)
    outcome = run_step(store, "d1", "a")
    assert outcome.status == "failed"
    assert outcome.message == ("attempt 1/3 failed: `python3 -c 'import time; time.sleep(60)'` "
                               "timed out after 1 s")
    assert outcome.duration_s < 10


def test_an_evaluator_phase_cannot_be_a_node_of_its_own(tmp_path: Path) -> None:
    from specops_dag.errors import DefinitionError

    with pytest.raises(DefinitionError) as info:
        make_delivery(with_phase_a(tmp_path, "", kind="evaluator"))
    assert info.value.problems == [
        "workflow_defs/phases/p-a.yaml: execution.criteria: an evaluator phase needs at least one "
        "criterion `{id, description, threshold}` to score against",
        "workflow_defs/workflows/diamond.yaml: nodes[0].phase: `p-a` is an evaluator phase; an "
        "evaluator judges a generator node: use `review: {phase: p-a, max_rounds: N}` on that "
        "node instead"]


def test_a_step_whose_upstream_is_not_completed_is_skipped(diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    index = store.index_path("d1")
    before = (index.read_bytes(), index.stat().st_mtime_ns)
    outcome = run_step(store, "d1", "b")
    assert (outcome.status, outcome.message) == ("skipped", "upstream not completed: `a` is "
                                                            "`pending`")
    assert (index.read_bytes(), index.stat().st_mtime_ns) == before


def test_an_unapproved_gate_blocks_the_step_until_approved(diamond_root: Path) -> None:
    wf = diamond_root / "workflow_defs/workflows/diamond.yaml"
    wf.write_text(wf.read_text().replace("{id: a, phase: p-a,",
                                         "{id: a, phase: p-a, gates: {after: requirements},"))
    store = make_delivery(diamond_root)
    assert run_step(store, "d1", "a").status == "completed"
    blocked = run_step(store, "d1", "b")
    assert (blocked.status, blocked.message) == ("blocked", "awaiting approval: requirements")
    step = store.read("d1").get_step("b")
    assert (step.status, step.blocked_reason) == ("blocked", "awaiting approval: requirements")
    gates.approve(store, "d1", "requirements", note="ok")
    assert store.read("d1").get_step("b").status == "pending"
    assert run_step(store, "d1", "b").status == "completed"


def test_the_command_sees_the_specops_environment(tmp_path: Path) -> None:
    dump = ("[python3, -c, \"import os,json,pathlib; d=os.environ['SPECOPS_NODE_DIR']; "
            "pathlib.Path(d,'out.txt').write_text(json.dumps({k: v for k, v in os.environ.items() "
            "if k.startswith('SPECOPS_')}))\"]")
    root = with_phase_a(tmp_path, dump)
    store = make_delivery(root)
    assert run_step(store, "d1", "a").status == "completed"
    env = json.loads((root / "phases/d1/a/out.txt").read_text())
    assert env == {"SPECOPS_ROOT": str(root), "SPECOPS_DELIVERY": "d1", "SPECOPS_NODE": "a",
                   "SPECOPS_NODE_DIR": str(root / "phases/d1/a"), "SPECOPS_TARGET": str(root),
                   "SPECOPS_ATTEMPT": "1", "SPECOPS_INPUTS": json.dumps({"request": {
                       "path": "phases/d1/request.md",
                       "sha256": sha256_file(root / "phases/d1/request.md")}})}
