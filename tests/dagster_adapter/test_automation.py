"""The nightly schedule, evaluated for one tick and as the real `dagster-daemon` runs it. For the
daemon only its cron is changed (to every minute, and on by default) so the test need not wait
until 02:00 UTC: the schedule's function, the job it targets and the run the daemon launches are
the product's own."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import time
from pathlib import Path

import dagster as dg
import pytest

from specops_dag.dagster_adapter.definitions import build_definitions
from specops_dag.dagster_adapter.resources import SpecopsResource
from specops_dag.delivery.store import Store

from ..support.cli import specops
from ..support.harness import VENV_BIN, complete, make_delivery

pytestmark = pytest.mark.e2e

MINUTELY_LOCATION = '''\
import dagster as dg

_schedule = dg.schedule


def minutely(**kwargs):
    kwargs.update(cron_schedule="* * * * *", default_status=dg.DefaultScheduleStatus.RUNNING)
    return _schedule(**kwargs)


dg.schedule = minutely
from specops_dag.dagster_adapter.definitions import build_definitions, harness_root  # noqa: E402

defs = build_definitions(harness_root())
'''


def test_the_daemon_runs_the_nightly_schedules_request_for_a_pending_delivery(
        tmp_path: Path, diamond_root: Path, clean_env: dict[str, str]) -> None:
    env = {**clean_env, "SPECOPS_ROOT": str(diamond_root)}
    created = specops(env, diamond_root, "new", "diamond", "d1", "--request", "Go.")
    assert created.returncode == 0, created.stderr
    (tmp_path / "location.py").write_text(MINUTELY_LOCATION)
    workspace = tmp_path / "workspace.yaml"
    workspace.write_text(f"load_from:\n  - python_file: {tmp_path / 'location.py'}\n")
    log = tmp_path / "daemon.log"
    with open(log, "w") as out:
        daemon = subprocess.Popen([str(VENV_BIN / "dagster-daemon"), "run", "-w", str(workspace)],
                                  env=env, cwd=diamond_root, start_new_session=True, stdout=out,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180  # the next minute's tick, then a four-node run
        with dg.DagsterInstance.get() as instance:
            # Until the run has ended, not just its last step: the run process is in the
            # daemon's process group and would die with it.
            while not (runs := instance.get_runs()) or not runs[0].is_finished:
                assert daemon.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(1)
    finally:  # ours, by process group: its code server and the run's processes go too
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(timeout=60)
    [run] = runs
    assert (run.job_name, run.status, run.tags["dagster/schedule_name"],
            run.tags["dagster/partition"]) == ("__ASSET_JOB", dg.DagsterRunStatus.SUCCESS,
                                               "nightly", "d1")
    assert sorted(k.path[1] for k in run.asset_selection or []) == ["a", "b", "c", "d"]
    assert Store(diamond_root).read("d1").status == "completed"
    assert {s.name: s.attempts for s in Store(diamond_root).read("d1").steps} == {
        n: 1 for n in "abcd"}


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
