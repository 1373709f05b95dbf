from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path

import dagster as dg
import pytest

from specops_dag.dagster_adapter.assets import data_version
from specops_dag.dagster_adapter.definitions import build_definitions
from specops_dag.dagster_adapter.resources import SpecopsResource
from specops_dag.delivery.store import Store

from ..support.cli import job_execute, specops
from ..support.harness import FAIL, REPO, VENV_BIN, command_phase, complete, make_delivery


def test_definitions_have_one_asset_per_node_keyed_by_workflow_and_node(
        diamond_root: Path) -> None:
    defs = build_definitions(diamond_root)
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    diamond = {k for k in graph.get_all_asset_keys() if k.path[0] == "diamond"}
    assert diamond == {dg.AssetKey(["diamond", n]) for n in "abcd"}
    deps = {k.path[1]: sorted(p.path[1] for p in graph.get(k).parent_keys) for k in diamond}
    assert deps == {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}
    quick = [k.path[1] for k in graph.get_all_asset_keys() if k.path[0] == "quick-delivery"]
    assert sorted(quick) == ["delivery", "develop", "verify"]
    node = graph.get(dg.AssetKey(["diamond", "d"]))
    assert node.group_name == "diamond"
    assert node.partitions_def == dg.DynamicPartitionsDefinition(name="delivery")
    assert len(node.code_version or "") == 16
    assert defs.resolve_job_def("diamond_job") is not None
    assert defs.resolve_job_def("full_delivery_job") is not None
    assert defs.resolve_assets_def(dg.AssetKey(["diamond", "a"])).op.retry_policy == \
        dg.RetryPolicy(max_retries=2)


def test_the_code_version_changes_when_the_phase_definition_changes(diamond_root: Path) -> None:
    key = dg.AssetKey(["diamond", "b"])
    before = build_definitions(diamond_root).resolve_asset_graph().get(key).code_version
    phase = diamond_root / "workflow_defs/phases/p-b.yaml"
    phase.write_text(phase.read_text().replace("Run p-b.", "Run p-b twice."))
    after = build_definitions(diamond_root).resolve_asset_graph().get(key).code_version
    assert before != after


@pytest.mark.e2e
def test_the_nightly_schedule_requests_one_run_per_delivery_with_runnable_steps(
        diamond_root: Path) -> None:
    wf = diamond_root / "workflow_defs/workflows/diamond.yaml"
    wf.write_text(wf.read_text().replace("{id: a, phase: p-a,",
                                         "{id: a, phase: p-a, gates: {before: scope},"))
    store = make_delivery(diamond_root, "fresh")
    make_delivery(diamond_root, "gated-done")
    make_delivery(diamond_root, "not-a-partition")
    from specops_dag.delivery import gates
    gates.approve(store, "fresh", "scope")
    gates.approve(store, "gated-done", "scope")
    for node in "abcd":
        complete(store, "gated-done", node)
    make_delivery(diamond_root, "waiting")  # scope gate not approved
    defs = build_definitions(diamond_root)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("delivery", ["fresh", "gated-done", "waiting"])
        context = dg.build_schedule_context(
            instance=instance, repository_def=defs.get_repository_def(),
            scheduled_execution_time=dt.datetime(2026, 12, 1, 2, 0, tzinfo=dt.UTC),
            resources={"specops": SpecopsResource(root=str(diamond_root))})
        result = defs.resolve_schedule_def("nightly").evaluate_tick(context)
        requests = list(result.run_requests or [])
        assert [(r.partition_key, r.run_key, sorted(k.path[1] for k in r.asset_selection))
                for r in requests] == [("fresh", "fresh:2026-12-01", ["a", "b", "c", "d"])]
        # The schedule targets Dagster's implicit asset job; the request runs there as the
        # daemon would launch it.
        schedule_job = defs.resolve_job_def(defs.resolve_schedule_def("nightly").job_name)
        assert schedule_job.name == defs.resolve_implicit_global_asset_job_def().name
        [request] = requests
        run = schedule_job.execute_in_process(instance=instance, tags=request.tags,
                                              partition_key=request.partition_key,
                                              asset_selection=request.asset_selection)
        assert run.success
        assert [s.name for s in Store(diamond_root).read("fresh").steps
                if s.status == "completed"] == ["a", "b", "c", "d"]


@pytest.mark.e2e
def test_a_delivery_runs_end_to_end_through_dagster_job_execute(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    created = specops(clean_env, diamond_root, "new", "diamond", "d1", "--request", "Go.")
    assert created.returncode == 0, created.stderr
    assert created.stdout == ("created delivery d1 (diamond, 4 steps) in phases/d1/; run it with "
                              "`specops run d1`\n")
    run = job_execute(clean_env, diamond_root, "diamond_job", "d1", executor="multiprocess")
    assert run.returncode == 0, run.stderr[-3000:]
    state = Store(diamond_root).read("d1")
    assert state.status == "completed"
    assert {s.name: (s.status, s.attempts) for s in state.steps} == {
        n: ("completed", 1) for n in "abcd"}
    with dg.DagsterInstance.get() as instance:
        record = instance.fetch_materializations(dg.AssetRecordsFilter(
            asset_key=dg.AssetKey(["diamond", "d"]), asset_partitions=["d1"]), limit=1).records[0]
        meta = record.asset_materialization.metadata
        step = state.get_step("d")
        assert meta["handoffs"].value == {"result": step.handoff["result"].model_dump()}
        assert meta["attempt"].value == 1
        assert record.asset_materialization.tags["dagster/data_version"] == \
            data_version(step.handoff)


# Writes the command line of its step process's parent to out.txt.
STEP_PARENT = ("[python3, -c, \"import os,pathlib; stat=open('/proc/%d/stat' % os.getppid()).read(); "
               "parent=stat.rsplit(')', 1)[1].split()[1]; "
               "cmd=' '.join(open('/proc/%s/cmdline' % parent).read().split(chr(0))); "
               "pathlib.Path(os.environ['SPECOPS_NODE_DIR'], 'out.txt').write_text(cmd)\"]")


@pytest.mark.e2e
def test_multiprocess_steps_fork_from_a_warm_forkserver_unless_spawn_is_configured(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    (diamond_root / "workflow_defs/phases/p-a.yaml").write_text(
        command_phase("p-a", STEP_PARENT, {"request": "req"}, {"out": "a-out"}))
    for delivery in ("d1", "d2"):
        assert specops(clean_env, diamond_root, "new", "diamond", delivery, "--request", "Go."
                       ).returncode == 0
    assert job_execute(clean_env, diamond_root, "diamond_job", "d1", executor="multiprocess"
                       ).returncode == 0
    forked_from = (diamond_root / "phases/d1/a/out.txt").read_text()
    assert "from multiprocessing.forkserver import main" in forked_from
    assert "'specops_dag.definitions', 'specops_dag.dagster_adapter.forkserver']" in forked_from  # preloaded
    spawn = diamond_root / "spawn.yaml"
    spawn.write_text("execution:\n  config:\n    multiprocess: {start_method: {spawn: {}}}\n")
    run = subprocess.run(
        [str(VENV_BIN / "dagster"), "job", "execute", "-m", "specops_dag.definitions", "-j",
         "diamond_job", "-c", str(spawn), "--tags", json.dumps({"dagster/partition": "d2"})],
        env={**clean_env, "SPECOPS_ROOT": str(diamond_root)}, cwd=diamond_root,
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "dagster job execute" in (diamond_root / "phases/d2/a/out.txt").read_text()


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
def test_the_workspace_validates_with_dagster_definitions_validate(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    result = subprocess.run(
        [str(VENV_BIN / "dagster"), "definitions", "validate", "-w", str(REPO / "workspace.yaml")],
        env={**clean_env, "SPECOPS_ROOT": str(diamond_root)}, cwd=REPO, capture_output=True,
        text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Validation successful" in result.stdout + result.stderr
