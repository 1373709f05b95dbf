"""The Celery app a `specops worker` runs (`celery -A specops_dag.dagster_adapter.celery_tasks`):
dagster-celery's own three tasks, with its step task (`execute_plan`) run at most once per task
id and under a lease the waiting run judges (`celery_leases`), and `fan_out_task`, which runs a
fan-out task another worker's step offered (`dispatcher`). The harness root is the worker's
SPECOPS_ROOT, which `specops worker` sets."""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from celery.signals import task_received
from dagster import DagsterInstance, DagsterRunStatus
from dagster._grpc.types import ExecuteStepArgs
from dagster._serdes import unpack_value
from dagster_celery.config import TASK_EXECUTE_PLAN_NAME
from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_execute_job_task, create_resume_job_task, create_task

from specops_dag.dagster_adapter.celery_leases import lease_path, started_path, taken_path
from specops_dag.errors import UsageError
from specops_dag.files import write_json_atomic
from specops_dag.locking import LEASE_S, Lease, this_process

log = logging.getLogger(__name__)
app = make_app()
FAN_OUT_TASK = "specops.fan_out_task"


def worker_root() -> Path:
    """The harness root of this worker (`specops worker` sets SPECOPS_ROOT)."""
    if not os.environ.get("SPECOPS_ROOT"):
        raise UsageError("SPECOPS_ROOT is not set in this Celery worker: start workers "
                         "with `specops --root <harness root> worker --name NAME`")
    return Path(os.environ["SPECOPS_ROOT"])


@task_received.connect
def taken(request: object = None, **_: object) -> None:
    """A step task's message reached this worker: its main process's owner record, so a run
    waiting on the task sees this worker die before the task starts (`celery_leases`)."""
    if getattr(request, "name", None) != TASK_EXECUTE_PLAN_NAME:
        return
    record = dataclasses.replace(this_process(), lease_until=time.time() + LEASE_S)
    path = taken_path(worker_root(), request.id)  # type: ignore[union-attr]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, dataclasses.asdict(record))


class OnceTask(app.Task):  # type: ignore[name-defined]
    """A step task that runs once per task id, with a lease its run can see while it runs."""

    def __call__(self, *args: object, **kwargs: object) -> object:
        root = worker_root()
        task_id = self.request.id
        started = started_path(root, task_id)
        started.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.close(os.open(started, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            log.warning("step task %s was started before (%s exists): the worker that took it "
                        "died, and this copy runs nothing; `specops run` recovers the step",
                        task_id, started)
            return []
        ended = run_ended(kwargs.get("execute_step_args_packed"))
        if ended is not None:
            log.warning("step task %s belongs to run %s, which ended (%s) before a worker took "
                        "it: it runs nothing; `specops run` runs the step", task_id, *ended)
            return []
        lease = Lease(lease_path(root, task_id))
        try:
            return super().__call__(*args, **kwargs)
        finally:
            os.utime(started)  # ended now: the run waits LEASE_S more for the result
            lease.end()


def run_ended(packed: object) -> tuple[str, str] | None:
    """(run id, status) when the step task's Dagster run is over — a message the broker kept
    through a restart, taken after its run failed — else None."""
    if not isinstance(packed, dict):
        return None
    args = unpack_value(packed, as_type=ExecuteStepArgs)
    with DagsterInstance.from_ref(args.instance_ref) as instance:
        run = instance.get_run_by_id(args.run_id)
    if run is None or run.status in (DagsterRunStatus.STARTED, DagsterRunStatus.STARTING):
        return None
    return args.run_id, run.status.value


def dispatcher() -> Callable[[str, str, str], None] | None:
    """How a step running in this worker offers its fan-out's tasks to the other workers: a
    `fan_out_task` message on the queue the step came from; None outside a step task."""
    current = app.current_task
    if current is None or current.name != TASK_EXECUTE_PLAN_NAME:
        return None
    queue = ((current.request.delivery_info or {}).get("routing_key") or "dagster").split(".")[0]

    def offer(delivery: str, node: str, task: str) -> None:
        app.send_task(FAN_OUT_TASK, args=[delivery, node, task], queue=queue,
                      routing_key=f"{queue}.{FAN_OUT_TASK}")

    return offer


@app.task(name=FAN_OUT_TASK, ignore_result=True, acks_late=True)
def fan_out_task(delivery: str, node: str, task: str) -> str:
    """Run a fan-out task offered by a step on another worker, when it is still free to take
    (`fanout.run_offered_task`): a copy the broker kept, or one another process took, runs
    nothing."""
    from specops_dag.agent.codex import AgentSettings
    from specops_dag.delivery.store import Store
    from specops_dag.execution.fanout import run_offered_task

    said = run_offered_task(Store(worker_root()), delivery, node, task,
                            AgentSettings.from_env(os.environ), log.info)
    log.info(said)
    return said


execute_plan = create_task(app, base=OnceTask)
execute_job = create_execute_job_task(app)
resume_job = create_resume_job_task(app)
