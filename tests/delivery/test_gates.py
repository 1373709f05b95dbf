from __future__ import annotations

import datetime as dt
from pathlib import Path

import dagster as dg
import pytest

from specops_dag.dagster_adapter.definitions import build_definitions
from specops_dag.dagster_adapter.resources import SpecopsResource
from specops_dag.delivery import gates
from specops_dag.delivery import queries as reading
from specops_dag.delivery.store import Store
from specops_dag.errors import UsageError
from specops_dag.execution.step import run_step

from ..support.harness import command_phase, make_delivery

RISKY = ("[python3, -c, \"import os,pathlib; d=os.environ['SPECOPS_NODE_DIR']; "
         "pathlib.Path(d,'out.txt').write_text('a'); "
         "pathlib.Path(d,'risk.md').write_text('# Risk: the cache is not thread-safe')\"]")


def gated(root: Path) -> Store:
    """scope before everything, requirements after a, target-write before c."""
    wf = root / "workflow_defs/workflows/diamond.yaml"
    text = wf.read_text().replace("inputs: {request: {contract: req}}",
                                  "inputs: {request: {contract: req}}\ngates: {before: scope}")
    text = text.replace("{id: a, phase: p-a,", "{id: a, phase: p-a, gates: {after: requirements},")
    text = text.replace("{id: c, phase: p-c,", "{id: c, phase: p-c, gates: {before: target-write},")
    wf.write_text(text)
    return make_delivery(root)


def statuses(store: Store) -> dict[str, str]:
    return {s.name: s.status for s in store.read("d1").steps}


def test_each_gate_blocks_exactly_the_nodes_behind_it(diamond_root: Path) -> None:
    store = gated(diamond_root)
    assert [s.gates for s in store.read("d1").steps] == [
        ["scope"], ["requirements"], ["target-write", "requirements"], []]
    assert run_step(store, "d1", "a").message == "awaiting approval: scope"
    gates.approve(store, "d1", "scope", note="right workflow")
    assert run_step(store, "d1", "a").status == "completed"
    assert [run_step(store, "d1", n).message for n in "bc"] == [
        "awaiting approval: requirements", "awaiting approval: target-write"]
    gates.approve(store, "d1", "requirements")
    assert run_step(store, "d1", "b").status == "completed"
    assert run_step(store, "d1", "c").message == "awaiting approval: target-write"
    assert run_step(store, "d1", "d").status == "skipped"
    assert statuses(store) == {"a": "completed", "b": "completed", "c": "blocked",
                               "d": "pending"}
    prompt = reading.gate_prompt(store.read("d1"), store.read("d1").get_step("c"))
    assert prompt == {"gate": "target-write",
                      "question": "May the agent change the target repository now?",
                      "look_at": ["phases/d1/a/out.txt"],
                      "approve": "specops approve d1 target-write --note ...",
                      "reject": "specops approve d1 target-write --reject --note ...",
                      "open": False}


def test_one_approval_never_carries_to_the_next_gate(diamond_root: Path) -> None:
    store = gated(diamond_root)
    gates.approve(store, "d1", "scope")
    run_step(store, "d1", "a")
    gates.approve(store, "d1", "target-write")
    assert run_step(store, "d1", "c").message == "awaiting approval: requirements"


def test_a_rejection_sends_the_node_back_and_keeps_its_downstream_blocked_with_the_note(
        diamond_root: Path) -> None:
    store = gated(diamond_root)
    gates.approve(store, "d1", "scope")
    run_step(store, "d1", "a")
    run_step(store, "d1", "b")
    gates.approve(store, "d1", "requirements", note="AC 3 is ambiguous", reject=True)
    a = store.read("d1").get_step("a")
    assert (a.status, a.feedback) == ("pending", "gate `requirements` rejected: AC 3 is ambiguous")
    assert run_step(store, "d1", "b").message == "upstream not completed: `a` is `pending`"
    assert run_step(store, "d1", "a").status == "completed"
    assert run_step(store, "d1", "b").message == "rejected: requirements: AC 3 is ambiguous"
    step = store.read("d1").get_step("b")
    assert (step.status, step.blocked_reason) == ("blocked", "rejected: requirements: AC 3 is "
                                                  "ambiguous")


@pytest.mark.e2e
def test_a_changed_decision_is_a_revision_that_reopens_what_consumed_it(
        diamond_root: Path) -> None:
    store = gated(diamond_root)
    gates.approve(store, "d1", "scope")
    assert run_step(store, "d1", "a").status == "completed"
    gates.approve(store, "d1", "requirements")  # on what `a` wrote
    gates.approve(store, "d1", "target-write")
    for node in "bcd":
        assert run_step(store, "d1", node).status == "completed"
    decision = gates.approve(store, "d1", "requirements", note="wrong spec", reject=True)
    assert (decision.decision, decision.revision) == ("rejected", 1)
    state = store.read("d1")
    assert statuses(store) == {"a": "pending", "b": "pending", "c": "pending", "d": "pending"}
    assert [a.decision for a in state.approvals if a.gate == "requirements"] == [
        "approved", "rejected"]  # history is kept, never rewritten
    assert state.get_step("b").revisions[0].reason == "gate `requirements` rejected: wrong spec"
    assert run_step(store, "d1", "a").status == "completed"
    assert run_step(store, "d1", "b").message == "rejected: requirements: wrong spec"
    gates.approve(store, "d1", "requirements", note="fixed")  # a changed decision again
    assert [run_step(store, "d1", n).status for n in "bcd"] == ["completed"] * 3
    gates.approve(store, "d1", "target-write", note="now it is not", reject=True)
    assert statuses(store) == {"a": "completed", "b": "completed", "c": "pending",
                               "d": "pending"}
    assert store.read("d1").get_step("c").revisions[-1].reason == (
        "decision on gate `target-write` changed to rejected: now it is not")


@pytest.mark.e2e
def test_an_agent_raises_a_risk_gate_for_its_downstream(diamond_root: Path) -> None:
    (diamond_root / "workflow_defs/phases/p-a.yaml").write_text(
        command_phase("p-a", RISKY, {"request": "req"}, {"out": "a-out"}))
    store = make_delivery(diamond_root)
    assert run_step(store, "d1", "a").status == "completed"
    state = store.read("d1")
    assert [(r.node, r.path) for r in state.risks] == [("a", "phases/d1/a/risk.md")]
    assert run_step(store, "d1", "b").message == "awaiting approval: risk"
    prompt = reading.gate_prompt(store.read("d1"), store.read("d1").get_step("b"))
    assert prompt["look_at"] == ["phases/d1/a/risk.md"]
    gates.approve(store, "d1", "risk", note="acceptable for now")
    assert run_step(store, "d1", "b").status == "completed"


def test_an_unknown_or_unused_gate_is_refused(diamond_root: Path) -> None:
    store = make_delivery(diamond_root)
    with pytest.raises(UsageError) as info:
        gates.approve(store, "d1", "approval")
    assert info.value.message == ("unknown gate `approval` (gates: scope, requirements, design, "
                                  "target-write, risk, external-write)")
    with pytest.raises(UsageError) as info:
        gates.approve(store, "d1", "design")
    assert info.value.message == ("delivery `d1` has no `design` gate (its gates: "
                                  "external-write)")


def test_the_approve_gate_job_records_a_decision_from_run_config(diamond_root: Path) -> None:
    store = gated(diamond_root)
    defs = build_definitions(diamond_root)
    job = defs.resolve_job_def("approve_gate")
    with dg.instance_for_test() as instance:
        result = job.execute_in_process(instance=instance, run_config={"ops": {"decide_gate": {
            "config": {"delivery": "d1", "gate": "scope", "decision": "approved",
                       "note": "from the Launchpad"}}}})
    assert result.success
    [approval] = store.read("d1").approvals
    assert (approval.gate, approval.decision, approval.note) == ("scope", "approved",
                                                                 "from the Launchpad")


def test_the_approval_sensor_launches_the_next_nodes_once_per_approval(
        diamond_root: Path) -> None:
    store = gated(diamond_root)
    defs = build_definitions(diamond_root)
    sensor = defs.resolve_sensor_def("gate_approvals")
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("delivery", ["d1"])
        context = dg.build_sensor_context(
            instance=instance, repository_def=defs.get_repository_def(),
            resources={"specops": SpecopsResource(root=str(diamond_root))})
        with dg.partition_loading_context(dynamic_partitions_store=instance):
            assert list(sensor.evaluate_tick(context).run_requests or []) == []
            approval = gates.approve(store, "d1", "scope")
            [request] = sensor.evaluate_tick(context).run_requests or []
        assert (request.partition_key, request.run_key) == ("d1", f"d1:scope:{approval.at}")
        assert sorted(k.path[1] for k in request.asset_selection) == ["a", "b", "c", "d"]
        assert request.job_name == defs.resolve_implicit_global_asset_job_def().name
    assert dt.datetime.fromisoformat(approval.at.replace("Z", "+00:00"))


def test_a_gate_on_a_nodes_output_cannot_be_decided_before_the_node_has_run(
        diamond_root: Path) -> None:
    store = gated(diamond_root)
    gates.approve(store, "d1", "scope")
    before = store.read("d1").model_dump()
    for reject in (False, True):
        with pytest.raises(UsageError) as err:
            gates.approve(store, "d1", "requirements", note="looks fine", reject=reject)
        assert err.value.message == (
            "gate `requirements` decides on what `a` wrote, and it has not run yet (a: pending): "
            "run `specops run d1` first, then decide on its output")
    assert store.read("d1").model_dump() == before
    assert run_step(store, "d1", "a").status == "completed"
    assert gates.approve(store, "d1", "requirements").decision == "approved"
