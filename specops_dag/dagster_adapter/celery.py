"""The code location whose steps run as Celery tasks on `specops worker` processes
(`dagster job execute -m specops_dag.dagster_adapter.celery`, docs/operations.md "Celery
workers"): specops_dag's own definitions with dagster-celery's executor as their executor. The
broker and result backend come from run config (`execution: {config: {broker, backend}}`), else
from SPECOPS_CELERY_BROKER and SPECOPS_CELERY_BACKEND. It builds nothing of its own;
`specops_dag.definitions` (and `specops run`) keep the warm multiprocess executor."""

import os
import time
from collections.abc import Callable
from pathlib import Path

import dagster as dg
from dagster_celery import celery_executor
from dagster_celery.core_execution_loop import core_celery_execution_loop
from dagster_celery.executor import CELERY_CONFIG, CeleryExecutor, _submit_task
from dagster_shared.record import copy

from specops_dag.dagster_adapter.celery_leases import prune, worker_gone
from specops_dag.dagster_adapter.definitions import (
    SNAPSHOT_OF,
    build_definitions,
    harness_root,
    long_lived_build,
)
from specops_dag.errors import UsageError

# Read by the process that launches the run when its run config names no broker or backend;
# `specops worker` reads the same two for its own (cli/worker.py): both sides must name one.
BROKER_ENV, BACKEND_ENV = "SPECOPS_CELERY_BROKER", "SPECOPS_CELERY_BACKEND"
NO_BROKER = (f"the Celery executor has no broker: set `execution: {{config: {{broker: "
             f"redis://HOST:PORT/0}}}}` in the run config or {BROKER_ENV} in the environment of "
             "the process that launches the run, to the broker the `specops worker` processes "
             "use (docs/operations.md, \"Celery workers\")")


def celery_settings(config: dict, env: dict[str, str] | os._Environ[str]) -> dict:
    """The executor config with the broker and backend filled in: run config first, then the
    environment; a backend named nowhere is the broker (Redis serves both), as for a worker."""
    broker = config.get("broker") or env.get(BROKER_ENV)
    if not broker:
        raise UsageError(NO_BROKER)
    return {**config, "broker": broker,
            "backend": config.get("backend") or env.get(BACKEND_ENV) or broker}


class WorkerLost(Exception):
    """The worker running a step is gone: the step fails instead of being waited on."""


class Watched:
    """A step task's Celery result that is also ready, as a failure, once the worker that
    started the step is gone (`celery_leases.worker_gone`): dagster-celery's loop then fails the
    step and the run ends, and the delivery's state keeps the step for `specops run`."""

    def __init__(self, result: object, root: Path, step_key: str,
                 say: Callable[[str], None]) -> None:
        self.result, self.root, self.step_key, self.say = result, root, step_key, say
        self.lost: str | None = None

    def ready(self) -> bool:
        if self.result.ready():  # type: ignore[attr-defined]
            return True
        gone = worker_gone(self.root, self.result.id, time.time())  # type: ignore[attr-defined]
        if gone is not None:
            self.lost = (f"the Celery worker that took step `{self.step_key}` is gone: {gone}; "
                         "the step fails here, and `specops run` re-runs it from the "
                         "delivery's state within its remaining attempts")
            self.say(self.lost)
            self.result.revoke()  # type: ignore[attr-defined]
        return self.lost is not None

    def get(self) -> object:
        if self.lost is not None:
            raise WorkerLost(self.lost)
        return self.result.get()  # type: ignore[attr-defined]

    def revoke(self) -> None:
        self.result.revoke()  # type: ignore[attr-defined]


class WatchedCeleryExecutor(CeleryExecutor):
    """dagster-celery's executor, its step tasks watched (`Watched`)."""

    def execute(self, plan_context, execution_plan):  # noqa: ANN001, ANN201 — dagster's API
        root = harness_root()
        prune(root)

        def submit(*args: object) -> Watched:
            step = args[2]
            return Watched(_submit_task(*args), root, step.key,  # type: ignore[attr-defined]
                           plan_context.log.error)

        return core_celery_execution_loop(plan_context, execution_plan, step_execution_fn=submit)


def _celery(init_context: dg.InitExecutorContext) -> dg.Executor:
    config = celery_settings(dict(init_context.executor_config), os.environ)
    made = celery_executor.executor_creation_fn(init_context._replace(executor_config=config))
    return WatchedCeleryExecutor(retries=made.retries, broker=made.broker, backend=made.backend,
                                 include=made.include,
                                 config_source=vars(made.config_source))


executor = dg.ExecutorDefinition(
    name="celery",
    # dagster-celery's own schema, except that `backend` has no default (its `rpc://` would hide
    # SPECOPS_CELERY_BACKEND and the broker fallback)
    config_schema={**CELERY_CONFIG, "backend": dg.Field(
        dg.Noneable(dg.StringSource), is_required=False,
        description=f"The Celery result backend; default {BACKEND_ENV}, else the broker.")},
    executor_creation_fn=_celery,
    requirements=celery_executor.get_requirements,
    description="dagster-celery's executor: each step a Celery task on a `specops worker`.")


def celery_definitions(root: Path, delivery: str | None = None) -> dg.Definitions:
    """The location's definitions with the Celery executor instead of the warm multiprocess one.
    Every job takes the Definitions' executor (none sets its own), so this switches them all."""
    return copy(build_definitions(root, delivery), executor=executor)


with long_lived_build():
    defs = celery_definitions(harness_root(), os.environ.get(SNAPSHOT_OF) or None)
