"""The `approve_gate` job (the Launchpad form of `specops approve`) logs what the decision did as
the CLI prints it: the decision, a decision that only repeats the last one, and the nodes a
rejection reopened (tests/cli/test_cli.py has the CLI's side)."""

from __future__ import annotations

import logging
from pathlib import Path

import dagster as dg

from specops_dag.dagster_adapter.definitions import build_definitions
from specops_dag.delivery.store import Store

from ..support.harness import complete, make_delivery


def requirements_after_a(root: Path) -> Store:
    """The diamond with a `requirements` gate asked after node a."""
    wf = root / "workflow_defs/workflows/diamond.yaml"
    wf.write_text(wf.read_text().replace("{id: a, phase: p-a,",
                                         "{id: a, phase: p-a, gates: {after: requirements},"))
    return make_delivery(root)


def decide(root: Path, decision: str, note: str = "") -> list[tuple[str, str]]:
    """Run the job once; (level, message) of each line the op logged."""
    job = build_definitions(root).resolve_job_def("approve_gate")
    with dg.instance_for_test() as instance:
        result = job.execute_in_process(instance=instance, run_config={"ops": {"decide_gate": {
            "config": {"delivery": "d1", "gate": "requirements", "decision": decision,
                       "note": note}}}})
        assert result.success
        return [(logging.getLevelName(entry.level), entry.user_message) for entry in instance.all_logs(result.run_id)
                if entry.step_key == "decide_gate" and entry.dagster_event is None]


def test_the_approve_gate_job_logs_a_repeated_decision_and_the_nodes_a_rejection_reopened(
        diamond_root: Path) -> None:
    store = requirements_after_a(diamond_root)
    complete(store, "d1", "a")
    assert store.read("d1").approvals == []
    approved = decide(diamond_root, "approved")
    at = store.read("d1").approvals[-1]
    assert approved == [("INFO", f"requirements approved for d1 at {at.at}")]
    again = decide(diamond_root, "approved")
    repeat = store.read("d1").approvals[-1]
    assert again == [
        ("INFO", f"requirements approved for d1 at {repeat.at}"),
        ("WARNING", f"note: `requirements` was already approved at {at.at} by {at.by}; recorded "
                    "again, nothing else changed")]
    for node in "bcd":
        complete(store, "d1", node)
    rejected = decide(diamond_root, "rejected", "AC 2 is wrong")
    rejection = store.read("d1").approvals[-1]
    assert rejected == [
        ("INFO", f"requirements rejected for d1 at {rejection.at} (revision 1)"),
        ("INFO", "reopened: a, b, c, d (their earlier files are kept under "
                 "phases/d1/.revisions/); `specops run d1` runs them again")]
    assert {s.name: s.status for s in store.read("d1").steps} == {
        "a": "pending", "b": "pending", "c": "pending", "d": "pending"}
