from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from specops_dag.dagster_adapter.definitions import build_definitions
from specops_dag.delivery.store import Store

from ..support.cli import job_execute, specops
from ..support.harness import FAIL, command_phase


def test_the_code_version_changes_when_the_phase_definition_changes(diamond_root: Path) -> None:
    key = dg.AssetKey(["diamond", "b"])
    before = build_definitions(diamond_root).resolve_asset_graph().get(key).code_version
    phase = diamond_root / "workflow_defs/phases/p-b.yaml"
    phase.write_text(phase.read_text().replace("Run p-b.", "Run p-b twice."))
    after = build_definitions(diamond_root).resolve_asset_graph().get(key).code_version
    assert before != after


@pytest.mark.e2e
def test_a_failing_node_gets_three_attempts_and_an_unrelated_branch_still_completes(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    (diamond_root / "workflow_defs/phases/p-b.yaml").write_text(
        command_phase("p-b", FAIL, {"up": "a-out"}, {"out": "b-out"}))
    assert specops(clean_env, diamond_root, "new", "diamond", "d1", "--request", "Go.").returncode == 0
    run = job_execute(clean_env, diamond_root, "diamond_job", "d1")
    assert run.returncode == 1
    assert "resulted in failure" in run.stderr
    state = Store(diamond_root).read("d1")
    assert {s.name: s.status for s in state.steps} == {
        "a": "completed", "b": "error", "c": "completed", "d": "pending"}
    b = state.get_step("b")
    assert b.attempts == 3
    assert b.error_message.startswith("`python3 -c ")
    assert b.failed_at is not None
    with dg.DagsterInstance.get() as instance:
        run_id = instance.get_runs(limit=1)[0].run_id
        kinds = {dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_RESTARTED,
                 dg.DagsterEventType.STEP_UP_FOR_RETRY}
        events = [e.dagster_event.event_type for e in instance.all_logs(run_id, of_type=kinds)
                  if e.step_key == "diamond__b"]
        assert [e.value for e in events] == ["STEP_START", "STEP_UP_FOR_RETRY", "STEP_RESTARTED",
                                             "STEP_UP_FOR_RETRY", "STEP_RESTARTED"]


@pytest.mark.e2e
def test_a_node_without_agent_sessions_materializes_on_its_first_dagster_attempt_priced_at_zero(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    # No session priced is $0.0: a float, as Dagster's float metadata requires (an int 0 failed
    # every command node's materialization once and Dagster retried it).
    assert specops(clean_env, diamond_root, "new", "diamond", "d1", "--request", "Go.").returncode == 0
    assert job_execute(clean_env, diamond_root, "diamond_job", "d1").returncode == 0
    with dg.DagsterInstance.get() as instance:
        run_id = instance.get_runs(limit=1)[0].run_id
        retries = instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_UP_FOR_RETRY)
        assert [e.step_key for e in retries] == []
        event = instance.get_latest_materialization_event(dg.AssetKey(["diamond", "a"]))
        meta = event.asset_materialization.metadata
        assert {k: meta[k].value for k in ("usd_attempt", "usd_node", "usd_delivery")} == {
            "usd_attempt": 0.0, "usd_node": 0.0, "usd_delivery": 0.0}
        assert meta["reused"].value is False


def test_a_fan_out_runs_no_more_sessions_at_once_than_the_codex_pool_allows() -> None:
    from specops_dag.dagster_adapter.assets import codex_pool_limit

    with dg.instance_for_test(overrides={"concurrency": {"pools": {"default_limit": 3}}}) as i:
        assert codex_pool_limit(i) == 3  # dagster.yaml's default pool limit
    with dg.instance_for_test() as instance:
        assert codex_pool_limit(instance) is None  # no limit anywhere
        instance.event_log_storage.set_concurrency_slots("codex", 5)
        assert codex_pool_limit(instance) == 5  # the pool's own limit
