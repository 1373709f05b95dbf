"""The nightly schedule as the real `dagster-daemon` runs it. Only its cron is changed (to every
minute, and on by default) so the test need not wait until 02:00 UTC: the schedule's function,
the job it targets and the run the daemon launches are the product's own."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import dagster as dg
import pytest

from specops_dag.delivery.store import Store

from ..support.cli import specops
from ..support.harness import VENV_BIN

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
