"""No step process outlives its run (issue #22 item 3): killing `dagster job execute` alone, the
`specops run` above it, or its process group ends every step's process tree within seconds, and
the Dagster run the kill left STARTED is marked failed by the next `specops run`."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import dagster as dg
import psutil
import pytest

from specops_dag.delivery.store import Store

from ..support.cli import specops
from ..support.harness import SLEEP, VENV_BIN, command_phase
from ..support.processes import ours, start, wait_for

pytestmark = pytest.mark.e2e


def sleepy(root: Path) -> str:
    """Every phase of the diamond sleeps NAP seconds; its command line carries a marker."""
    marker = f"marker-{root}"
    ports = {"p-a": ({"request": "req"}, {"out": "a-out"}), "p-b": ({"up": "a-out"}, {"out": "b-out"}),
             "p-c": ({"up": "a-out"}, {"out": "c-out"}),
             "p-d": ({"left": "b-out", "right": "c-out"}, {"out": "d-out"})}
    argv = SLEEP[:-1] + f", '{marker}']"
    for pid, (ins, outs) in ports.items():
        (root / f"workflow_defs/phases/{pid}.yaml").write_text(command_phase(pid, argv, ins, outs))
    return marker


def start_job_execute(env: dict[str, str], root: Path, executor: str) -> subprocess.Popen:
    """`dagster job execute` as a user starts it, with no `specops run` above it."""
    config = root.parent / "run.yaml"
    config.write_text(f"execution:\n  config:\n    {executor}: {{}}\n")
    return subprocess.Popen(
        [str(VENV_BIN / "dagster"), "job", "execute", "-m", "specops_dag.definitions", "-j",
         "diamond_job", "-c", str(config), "--tags", '{"dagster/partition": "d1"}'],
        env={**env, "SPECOPS_ROOT": str(root)}, cwd=root, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def job_execute_of(run: subprocess.Popen) -> psutil.Process:
    def find() -> psutil.Process | None:
        for child in psutil.Process(run.pid).children():
            try:  # a child that already ended (a reaper, say) is a zombie until reaped
                if "execute" in child.cmdline():
                    return child
            except psutil.Error:
                pass
        return None
    return wait_for(find)


@pytest.mark.parametrize(("executor", "kill"), [
    ("multiprocess", "job-execute"), ("in_process", "job-execute"),
    ("multiprocess", "specops-run"), ("multiprocess", "group"),
    ("multiprocess", "job-execute-alone"), ("in_process", "job-execute-alone")])
def test_a_kill_ends_every_step_process_within_seconds_and_the_next_run_finishes(
        diamond_root: Path, clean_env: dict[str, str], executor: str, kill: str) -> None:
    marker = sleepy(diamond_root)
    env = {**clean_env, "NAP": "60"}
    assert specops(env, diamond_root, "new", "diamond", "d1", "--request", "x").returncode == 0
    alone = kill == "job-execute-alone"
    run = (start_job_execute if alone else start)(env, diamond_root, executor)
    try:
        job = psutil.Process(run.pid) if alone else job_execute_of(run)
        wait_for(lambda: [p for p in ours(diamond_root, marker)
                          if marker in " ".join(p.cmdline())])  # node a's command sleeps
        if kill.startswith("job-execute"):
            os.kill(job.pid, signal.SIGKILL)
        elif kill == "specops-run":
            os.kill(run.pid, signal.SIGKILL)
        else:
            os.killpg(run.pid, signal.SIGKILL)
        run.wait(timeout=30)
        killed_at = time.monotonic()
        wait_for(lambda: not ours(diamond_root, marker), limit_s=15)
        assert time.monotonic() - killed_at < 15
    finally:
        for p in ours(diamond_root, marker):
            p.kill()
        if run.poll() is None:
            run.kill()
            run.wait()
    home = Path(clean_env["DAGSTER_HOME"])
    with dg.DagsterInstance.from_config(str(home)) as instance:
        [stuck] = instance.get_runs()
    # SIGKILLed, `dagster job execute` cannot report its end: the `specops run` that launched it
    # marks it failed as it ends, and with no `specops run` above it the next one does;
    # SIGTERMed by the reaper of a killed `specops run` it reports the failure itself
    assert stuck.status == (dg.DagsterRunStatus.STARTED if alone
                            else dg.DagsterRunStatus.FAILURE)
    again = specops({**env, "NAP": "0"}, diamond_root, "run", "d1", "--executor", "in_process")
    assert again.returncode == 0, again.stderr
    assert (f"marked Dagster run {stuck.run_id} failed: its process was gone (killed)\n"
            in again.stderr) == alone
    assert Store(diamond_root).read("d1").status == "completed"
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert [r.status for r in instance.get_runs()] == [dg.DagsterRunStatus.SUCCESS,
                                                           dg.DagsterRunStatus.FAILURE]


LEFT_STARTED = """\
import socket, sys
import dagster as dg
from dagster._core.events import DagsterEvent, DagsterEventType
with dg.DagsterInstance.get() as instance:
    run = instance.add_run(dg.DagsterRun(
        job_name="diamond_job", status=dg.DagsterRunStatus.STARTED,
        tags={"dagster/partition": "d1", "specops/host": socket.gethostname()}))
    instance.report_engine_event("the run started; this process then ends", run)
    print(run.run_id)
"""


def test_a_run_killed_after_its_last_step_is_marked_failed_by_a_run_that_has_nothing_to_do(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    sleepy(diamond_root)
    env = {**clean_env, "NAP": "0"}
    assert specops(env, diamond_root, "new", "diamond", "d1", "--request", "x").returncode == 0
    assert specops(env, diamond_root, "run", "d1", "--executor", "in_process").returncode == 0
    # what a kill between the last step and the run's end leaves: a STARTED run whose process
    # is gone, and the `runs/active` of the `specops run` that was killed
    left = subprocess.run([str(VENV_BIN / "python"), "-c", LEFT_STARTED], env=env,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, check=True)
    stuck = left.stdout.strip()
    active = diamond_root / "phases/d1/runs/active"
    active.write_text("1\n")
    again = specops(env, diamond_root, "run", "d1")
    assert again.returncode == 0, again.stderr
    assert again.stdout.endswith("nothing to run: every step of d1 is completed\n")
    assert again.stderr == f"marked Dagster run {stuck} failed: its process was gone (killed)\n"
    assert not active.exists()
    with dg.DagsterInstance.from_config(clean_env["DAGSTER_HOME"]) as instance:
        assert instance.get_run_by_id(stuck).status == dg.DagsterRunStatus.FAILURE


def test_a_completed_run_leaves_no_active_marker(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    sleepy(diamond_root)
    env = {**clean_env, "NAP": "0"}
    assert specops(env, diamond_root, "new", "diamond", "d1", "--request", "x").returncode == 0
    assert specops(env, diamond_root, "run", "d1", "--executor", "in_process").returncode == 0
    assert not (diamond_root / "phases/d1/runs/active").exists()
    assert (diamond_root / "phases/d1/runs/dagster-run.err").exists()
