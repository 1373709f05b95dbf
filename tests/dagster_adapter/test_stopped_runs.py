"""Runs that do no work must say why, through a real `dagster job execute`: a node stopped at a
closed gate leaves a green run (Dagster's "Success" for a run with nothing materialized), so the
run carries the gate as a tag, a WARNING and an observation; a partition with no delivery (one
added with the UI's "Add a partition") fails at once with what to do and is removed."""

from __future__ import annotations

import logging
from pathlib import Path

import dagster as dg
import pytest

from specops_dag.dagster_adapter.assets import GATE_TAG
from specops_dag.delivery.store import Store

from ..support.cli import job_execute, specops

pytestmark = pytest.mark.e2e


def gate_before(root: Path, node: str, gate: str) -> None:
    wf = root / "workflow_defs/workflows/diamond.yaml"
    at = f"{{id: {node}, phase: p-{node},"
    wf.write_text(wf.read_text().replace(at, f"{at} gates: {{before: {gate}}},"))


def warnings_of(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [e.user_message for e in instance.all_logs(run_id)
            if e.dagster_event is None and e.level == logging.WARNING]


def test_a_run_whose_nodes_stop_at_gates_is_tagged_with_the_gates_and_its_log_names_them(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    gate_before(diamond_root, "b", "design")
    gate_before(diamond_root, "c", "target-write")
    created = specops(clean_env, diamond_root, "new", "diamond", "d1", "--request", "Go.")
    assert created.returncode == 0, created.stderr
    assert specops(clean_env, diamond_root, "approve", "d1", "design", "--reject", "--note",
                   "too big").returncode == 0
    run = job_execute(clean_env, diamond_root, "diamond_job", "d1")
    assert run.returncode == 0, run.stderr  # Dagster's verdict: nothing failed
    assert "awaiting approval: gate `target-write` before `c`" in run.stderr  # the console too
    assert {s.name: s.status for s in Store(diamond_root).read("d1").steps} == {
        "a": "completed", "b": "blocked", "c": "blocked", "d": "pending"}
    with dg.DagsterInstance.get() as instance:
        [dagster_run] = instance.get_runs()
        assert dagster_run.status == dg.DagsterRunStatus.SUCCESS
        assert dagster_run.tags[GATE_TAG] == "design,target-write"
        assert warnings_of(instance, dagster_run.run_id) == [
            "rejected: gate `design` before `b`: too big; to go on, approve it with "
            "`specops approve d1 design` or the approve_gate job",
            "awaiting approval: gate `target-write` before `c`; approve with "
            "`specops approve d1 target-write` or the approve_gate job"]
        observed = instance.fetch_observations(dg.AssetKey(["diamond", "c"]), limit=1).records
        [obs] = [r.asset_observation for r in observed]
        assert (obs.partition, obs.metadata["gate"].value, obs.metadata["approve_with"].value) == (
            "d1", "target-write", "specops approve d1 target-write")


def test_a_run_of_a_partition_without_a_delivery_fails_at_once_and_removes_the_partition(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    root = diamond_root.resolve()
    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions("delivery", ["ghost"])  # the UI's "Add a partition"
    run = job_execute(clean_env, diamond_root, "diamond_job", "ghost")
    assert run.returncode == 1
    expected = (f"no delivery `ghost` in {root}: create it with `specops new diamond ghost "
                "--request …` (a partition added in the UI does not create a delivery)")
    with dg.DagsterInstance.get() as instance:
        assert not instance.has_dynamic_partition("delivery", "ghost")
        [failure] = instance.all_logs(instance.get_runs()[0].run_id,
                                      of_type=dg.DagsterEventType.STEP_FAILURE)
        data = failure.dagster_event.step_failure_data
        assert data.user_failure_data.description == f"{expected}; partition `ghost` removed"
        assert failure.step_key == "diamond__a"  # no retry, nothing downstream ran
        assert len(instance.all_logs(instance.get_runs()[0].run_id,
                                     of_type=dg.DagsterEventType.STEP_START)) == 1
        # Added again and launched again: an earlier run used it, so the root may be what is
        # wrong (a webserver started elsewhere), not the partition; it is kept.
        instance.add_dynamic_partitions("delivery", ["ghost"])
    assert job_execute(clean_env, diamond_root, "diamond_job", "ghost").returncode == 1
    with dg.DagsterInstance.get() as instance:
        assert instance.has_dynamic_partition("delivery", "ghost")
        [failure] = instance.all_logs(instance.get_runs()[0].run_id,
                                      of_type=dg.DagsterEventType.STEP_FAILURE)
        assert failure.dagster_event.step_failure_data.user_failure_data.description == (
            f"{expected}; partition `ghost` kept: 1 other run(s) used it")
    assert not (root / "phases/ghost").exists()


def test_a_partition_that_cannot_be_a_delivery_id_fails_with_the_reason_and_is_removed(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions("delivery", ["ghost.lock"])
    assert job_execute(clean_env, diamond_root, "diamond_job", "ghost.lock").returncode == 1
    with dg.DagsterInstance.get() as instance:
        assert not instance.has_dynamic_partition("delivery", "ghost.lock")
        [failure] = instance.all_logs(instance.get_runs()[0].run_id,
                                      of_type=dg.DagsterEventType.STEP_FAILURE)
        assert failure.dagster_event.step_failure_data.user_failure_data.description == (
            f"no delivery `ghost.lock` in {diamond_root.resolve()}, and there cannot be one: the "
            "id ends with `.` or `.lock`, which git refuses in a branch name; create a delivery "
            "with `specops new diamond <id> --request …` (a partition added in the UI does not "
            "create a delivery); partition `ghost.lock` removed")
