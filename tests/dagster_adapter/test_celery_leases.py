"""How the run judges the worker of a step task it waits on (`celery_leases.worker_gone`), and
the step task's guards on the worker (`celery_tasks`): a task id runs once, and a task of a run
that already ended runs nothing. Killing real workers is tests/system/test_celery_faults.py."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.code_pointer import ModuleCodePointer
from dagster._core.origin import JobPythonOrigin, RepositoryPythonOrigin
from dagster._grpc.types import ExecuteStepArgs
from dagster._serdes import pack_value

from specops_dag.cli.worker import VISIBILITY_S
from specops_dag.dagster_adapter import celery_tasks
from specops_dag.dagster_adapter.celery_leases import (
    KEEP_S,
    lease_path,
    prune,
    started_path,
    taken_path,
    worker_gone,
)
from specops_dag.errors import UsageError
from specops_dag.locking import LEASE_S, this_process


def write_lease(path: Path, **fields: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {**dataclasses.asdict(this_process()), "lease_until": time.time() + LEASE_S, **fields}
    path.write_text(json.dumps(record))


def test_a_queued_task_and_one_under_a_live_lease_are_waited_for(tmp_path: Path) -> None:
    now = time.time()
    assert worker_gone(tmp_path, "t1", now) is None  # not started: queued
    write_lease(lease_path(tmp_path, "t1"))
    started_path(tmp_path, "t1").touch()
    assert worker_gone(tmp_path, "t1", now) is None
    write_lease(lease_path(tmp_path, "t2"), host="elsewhere", pid=4242, boot_id="b")
    assert worker_gone(tmp_path, "t2", now) is None  # another host: its lease still runs


def test_a_lease_whose_process_ended_or_whose_lease_ran_out_names_why(tmp_path: Path) -> None:
    now = time.time()
    write_lease(lease_path(tmp_path, "t1"), pid=2 ** 22 + 7, started=1.0)
    assert worker_gone(tmp_path, "t1", now) == f"its process (pid {2 ** 22 + 7}) has ended"
    write_lease(lease_path(tmp_path, "t2"), host="elsewhere", pid=4242, boot_id="b",
                lease_until=now - 30)
    assert worker_gone(tmp_path, "t2", now) == (
        "its lease (pid 4242 on host elsewhere) ran out 30 s ago")


def test_a_task_whose_worker_died_after_taking_its_message_and_before_starting_it_is_gone(
        tmp_path: Path) -> None:
    now = time.time()
    write_lease(taken_path(tmp_path, "t1"))  # this process took it: alive, not started yet
    assert worker_gone(tmp_path, "t1", now) is None
    write_lease(taken_path(tmp_path, "t2"), pid=2 ** 22 + 7, started=1.0)
    assert worker_gone(tmp_path, "t2", now) == (
        f"the worker that took it (pid {2 ** 22 + 7}) ended before it started the step")
    write_lease(taken_path(tmp_path, "t3"), host="elsewhere", pid=4242, boot_id="b",
                lease_until=now - 1)
    assert worker_gone(tmp_path, "t3", now) == (
        "the worker that took it (pid 4242 on host elsewhere) ended before it started the step")
    started_path(tmp_path, "t2").touch()  # started: its lease, not the taker, is judged now
    assert worker_gone(tmp_path, "t2", now) is None


def test_a_worker_that_receives_a_step_task_writes_its_taken_record_and_ignores_other_tasks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    monkeypatch.setenv("SPECOPS_ROOT", str(tmp_path))
    celery_tasks.taken(SimpleNamespace(name="specops.fan_out_task", id="f1"))
    celery_tasks.taken(SimpleNamespace(name="execute_plan", id="s1"))
    assert sorted(p.name for p in (tmp_path / ".specops/celery").iterdir()) == ["s1.taken"]
    record = json.loads(taken_path(tmp_path, "s1").read_text())
    assert (record["pid"], record["host"]) == (os.getpid(), this_process().host)
    assert 0 < record["lease_until"] - time.time() <= LEASE_S


def test_a_task_that_ended_is_waited_for_its_result_only_for_one_lease(tmp_path: Path) -> None:
    started = started_path(tmp_path, "t1")
    started.parent.mkdir(parents=True)
    started.touch()
    now = time.time()
    assert worker_gone(tmp_path, "t1", now + LEASE_S - 1) is None
    assert worker_gone(tmp_path, "t1", now + LEASE_S + 5) == (
        f"its step ended {LEASE_S + 5:.0f} s ago and no result was stored")


def test_spent_task_ids_are_kept_longer_than_a_broker_keeps_an_unacknowledged_message(
        tmp_path: Path) -> None:
    assert KEEP_S > VISIBILITY_S
    old, new = started_path(tmp_path, "old"), started_path(tmp_path, "new")
    old.parent.mkdir(parents=True)
    old.touch()
    new.touch()
    os.utime(old, (time.time() - KEEP_S - 60,) * 2)
    prune(tmp_path)
    assert sorted(p.name for p in old.parent.iterdir()) == ["new.started"]


def step_args(instance: dg.DagsterInstance, run_id: str) -> dict:
    origin = JobPythonOrigin("diamond_job", RepositoryPythonOrigin(
        sys.executable, ModuleCodePointer("specops_dag.definitions", "defs", None)))
    return pack_value(ExecuteStepArgs(origin, run_id, ["diamond__a"], instance.get_ref()))


@pytest.fixture
def instance(tmp_path: Path) -> dg.DagsterInstance:
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        yield instance


def test_a_redelivered_copy_of_a_started_step_task_runs_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("SPECOPS_ROOT", str(tmp_path))
    started = started_path(tmp_path, "t1")
    started.parent.mkdir(parents=True)
    started.touch()
    result = celery_tasks.execute_plan.apply(
        kwargs={"execute_step_args_packed": {}, "executable_dict": {}}, task_id="t1")
    assert result.get() == []
    assert not lease_path(tmp_path, "t1").exists()
    assert (f"step task t1 was started before ({started} exists): the worker that took it "
            "died, and this copy runs nothing; `specops run` recovers the step") in caplog.text


def test_a_step_task_of_a_run_that_already_ended_runs_nothing_and_spends_its_id(
        tmp_path: Path, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("SPECOPS_ROOT", str(tmp_path))
    run = instance.add_run(dg.DagsterRun(job_name="diamond_job", status=dg.DagsterRunStatus.FAILURE))
    result = celery_tasks.execute_plan.apply(kwargs={
        "execute_step_args_packed": step_args(instance, run.run_id), "executable_dict": {}},
        task_id="t2")
    assert result.get() == []
    assert started_path(tmp_path, "t2").exists() and not lease_path(tmp_path, "t2").exists()
    assert (f"step task t2 belongs to run {run.run_id}, which ended (FAILURE) before a worker "
            "took it: it runs nothing; `specops run` runs the step") in caplog.text


def test_a_worker_started_without_a_harness_root_refuses_the_step_saying_how_to_start_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPECOPS_ROOT", raising=False)
    result = celery_tasks.execute_plan.apply(
        kwargs={"execute_step_args_packed": {}, "executable_dict": {}}, task_id="t3")
    with pytest.raises(UsageError) as raised:
        result.get()
    assert str(raised.value) == (
        "SPECOPS_ROOT is not set in this Celery worker: start workers with "
        "`specops --root <harness root> worker --name NAME`")
