"""Where a step runs: its claim records the host, pid and Celery worker of the process that runs
it (`ran_on`, kept after the attempt, shown by `specops status` for a worker's step and in the
materialization's metadata), and a host without a tool the step needs blocks it at the claim,
before any agent call or command, without counting an attempt."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from specops_dag.dagster_adapter.assets import materialization
from specops_dag.delivery import lifecycle as ops
from specops_dag.delivery.model import RanOn
from specops_dag.delivery.queries import render_status, status_report
from specops_dag.execution.step import run_step
from specops_dag.validation.dotnet import INSTALL_HINT

from ..support.dotnet import path_without_dotnet
from ..support.harness import make_delivery

HOST = socket.gethostname()


def test_a_step_records_where_it_ran_and_status_names_the_celery_worker_only(
        diamond_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_delivery(diamond_root)
    monkeypatch.setenv("SPECOPS_WORKER", "w7")
    on_worker = run_step(store, "d1", "a")
    monkeypatch.delenv("SPECOPS_WORKER")
    here = run_step(store, "d1", "b")
    assert (on_worker.status, here.status) == ("completed", "completed")
    assert on_worker.ran_on == RanOn(host=HOST, pid=os.getpid(), worker="w7")
    assert here.ran_on == RanOn(host=HOST, pid=os.getpid())
    state = store.read("d1")
    assert state.get_step("a").owner is None  # the claim is over; where it ran stays
    assert [state.get_step(n).ran_on for n in "ab"] == [on_worker.ran_on, here.ran_on]
    shown = render_status(state, status_report(store.root, state)).splitlines()
    assert shown[2].startswith("  ✔  0 a ")
    assert shown[3] == f"       ran on Celery worker `w7` (host {HOST}, pid {os.getpid()})"
    assert [line for line in shown if "ran on" in line] == [shown[3]]  # b ran here: unchanged
    worker = materialization(on_worker, "d1").metadata
    assert (worker["worker"], worker["celery_worker"]) == (f"{HOST}:{os.getpid()}", "w7")
    local = materialization(here, "d1").metadata
    assert (local["worker"], "celery_worker" in local) == (f"{HOST}:{os.getpid()}", False)
    assert run_step(store, "d1", "a").ran_on == on_worker.ran_on  # reused: where it completed
    ops.reopen(store, "d1", "a")
    assert store.read("d1").get_step("a").ran_on is None


def test_a_full_step_on_a_host_without_dotnet_is_blocked_at_its_claim_without_an_attempt(
        diamond_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    phase = diamond_root / "workflow_defs/phases/p-a.yaml"
    phase.write_text(phase.read_text().replace("validation: none", "validation: full"))
    store = make_delivery(diamond_root)
    monkeypatch.setenv("PATH", path_without_dotnet(tmp_path))
    monkeypatch.setenv("SPECOPS_WORKER", "w2")
    outcome = run_step(store, "d1", "a")
    reason = (f"environment error: {INSTALL_HINT} (found on host `{HOST}` by Celery worker `w2` "
              "before the attempt: no agent call was made and no attempt was spent)")
    assert (outcome.status, outcome.message, outcome.retryable) == (
        "environment", f"blocked: {reason}", False)
    step = store.read("d1").get_step("a")
    assert (step.status, step.blocked_reason, step.attempts, step.attempt_log) == (
        "blocked", reason, 0, [])
    assert not (diamond_root / "phases/d1/a/out.txt").exists()  # its command never ran
