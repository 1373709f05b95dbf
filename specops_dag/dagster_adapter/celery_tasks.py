"""The Celery app a `specops worker` runs (`celery -A specops_dag.dagster_adapter.celery_tasks`):
dagster-celery's own three tasks, with its step task (`execute_plan`) run at most once per task
id and under a lease the waiting run judges (`celery_leases`). The harness root is the worker's
SPECOPS_ROOT, which `specops worker` sets."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from dagster import DagsterInstance, DagsterRunStatus
from dagster._grpc.types import ExecuteStepArgs
from dagster._serdes import unpack_value
from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_execute_job_task, create_resume_job_task, create_task

from specops_dag.dagster_adapter.celery_leases import lease_path, started_path
from specops_dag.errors import UsageError
from specops_dag.locking import Lease

log = logging.getLogger(__name__)
app = make_app()


class OnceTask(app.Task):  # type: ignore[name-defined]
    """A step task that runs once per task id, with a lease its run can see while it runs."""

    def __call__(self, *args: object, **kwargs: object) -> object:
        if not os.environ.get("SPECOPS_ROOT"):
            raise UsageError("SPECOPS_ROOT is not set in this Celery worker: start workers "
                             "with `specops --root <harness root> worker --name NAME`")
        root = Path(os.environ["SPECOPS_ROOT"])
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


execute_plan = create_task(app, base=OnceTask)
execute_job = create_execute_job_task(app)
resume_job = create_resume_job_task(app)
