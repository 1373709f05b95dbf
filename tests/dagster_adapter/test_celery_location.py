"""The Celery code location (`specops_dag.dagster_adapter.celery`): every job of it runs on
dagster-celery's executor while the default location keeps its own, and the broker and backend
come from run config, else the environment, else (the backend) the broker. Running it on real
workers and a real broker is tests/system/test_celery.py."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from specops_dag.cli import worker
from specops_dag.dagster_adapter.celery import (
    BACKEND_ENV,
    BROKER_ENV,
    NO_BROKER,
    celery_definitions,
    celery_settings,
)
from specops_dag.dagster_adapter.definitions import build_definitions
from specops_dag.errors import UsageError

RUN_BROKER, RUN_BACKEND = "redis://run:6379/0", "redis://run:6379/1"
ENV_BROKER, ENV_BACKEND = "redis://env:6379/0", "redis://env:6379/1"


def test_every_job_of_the_celery_location_runs_on_celery_and_the_default_location_is_unchanged(
        diamond_root: Path) -> None:
    celery = celery_definitions(diamond_root).get_repository_def().get_all_jobs()
    default = build_definitions(diamond_root).get_repository_def().get_all_jobs()
    assert {j.name for j in celery} == {j.name for j in default}
    assert {j.executor_def.name for j in celery} == {"celery"}
    assert {j.executor_def.name for j in default} == {"multi_or_in_process_executor"}


def test_the_run_config_of_the_docs_is_valid_and_leaves_the_backend_unset_when_not_given(
        diamond_root: Path) -> None:
    job = celery_definitions(diamond_root).resolve_job_def("diamond_job")
    both = dg.validate_run_config(job, {"execution": {"config": {
        "broker": RUN_BROKER, "backend": RUN_BACKEND}}})
    assert (both["execution"]["celery"]["broker"], both["execution"]["celery"]["backend"]) == (
        RUN_BROKER, RUN_BACKEND)
    alone = dg.validate_run_config(job, {"execution": {"config": {"broker": RUN_BROKER}}})
    assert "backend" not in alone["execution"]["celery"]  # not dagster-celery's rpc://


@pytest.mark.parametrize(("config", "env", "broker", "backend"), [
    ({"broker": RUN_BROKER, "backend": RUN_BACKEND}, {BROKER_ENV: ENV_BROKER,
                                                      BACKEND_ENV: ENV_BACKEND},
     RUN_BROKER, RUN_BACKEND),
    ({"broker": RUN_BROKER}, {BACKEND_ENV: ENV_BACKEND}, RUN_BROKER, ENV_BACKEND),
    ({}, {BROKER_ENV: ENV_BROKER, BACKEND_ENV: ENV_BACKEND}, ENV_BROKER, ENV_BACKEND),
    ({"backend": None}, {BROKER_ENV: ENV_BROKER}, ENV_BROKER, ENV_BROKER),
    ({"broker": RUN_BROKER}, {}, RUN_BROKER, RUN_BROKER),
], ids=["run-config", "run-broker-env-backend", "env", "backend-is-the-broker", "broker-only"])
def test_the_broker_and_backend_come_from_run_config_then_the_environment(
        config: dict, env: dict[str, str], broker: str, backend: str) -> None:
    settings = celery_settings(config, env)
    assert (settings["broker"], settings["backend"]) == (broker, backend)


def test_a_run_with_no_broker_anywhere_is_refused_with_where_to_name_one() -> None:
    with pytest.raises(UsageError) as info:
        celery_settings({"backend": RUN_BACKEND}, {BACKEND_ENV: ENV_BACKEND})
    assert info.value.message == NO_BROKER == (
        "the Celery executor has no broker: set `execution: {config: {broker: "
        "redis://HOST:PORT/0}}` in the run config or SPECOPS_CELERY_BROKER in the environment of "
        "the process that launches the run, to the broker the `specops worker` processes use "
        "(docs/operations.md, \"Celery workers\")")


def test_the_location_and_specops_worker_read_the_same_environment_variables() -> None:
    assert (worker.BROKER_ENV, worker.BACKEND_ENV) == (BROKER_ENV, BACKEND_ENV)
