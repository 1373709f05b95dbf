"""`specops worker`: what it checks before it starts, with each value printed, the exact refusal
(exit 3) naming everything missing, and the `dagster-celery worker start` command and Celery
config it starts with. Starting real workers on a real broker is tests/system/test_celery.py."""

from __future__ import annotations

import socket
from pathlib import Path

import yaml
from dagster_celery.cli import get_validated_config
from dagster_celery.defaults import broker_transport_options

from specops_dag.cli.worker import Worker, celery_config, worker_argv
from specops_dag.validation.dotnet import INSTALL_HINT

from ..support.cli import specops
from ..support.dotnet import path_without_dotnet
from ..support.harness import REPO, VENV_BIN
from ..support.processes import free_port

HOST = socket.gethostname()


def test_a_worker_missing_everything_refuses_with_exit_3_naming_each_thing_and_how_to_fix_it(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    root = tmp_path / "not-a-harness"
    root.mkdir()
    env = {k: v for k, v in clean_env.items() if k not in ("DAGSTER_HOME", "SPECOPS_CELERY_BROKER",
                                                           "SPECOPS_CELERY_BACKEND")}
    env |= {"SPECOPS_CODEX_BIN": "/nowhere/codex",
            "PATH": path_without_dotnet(tmp_path, env["PATH"])}
    result = specops(env, root, "worker", "--name", "w9")
    assert result.returncode == 3
    assert result.stdout == (
        f"specops worker `w9` on host {HOST} checks what its steps need:\n"
        "  harness root: MISSING\n"
        "  DAGSTER_HOME: MISSING\n"
        "  codex CLI: MISSING\n"
        "  dotnet: MISSING\n"
        f"  caches: {root}/.specops/cache (to be created)\n"
        "  broker: MISSING\n"
        f"  dagster-celery: {VENV_BIN / 'dagster-celery'}\n")
    assert result.stderr == (
        f"error: worker `w9` on host {HOST} cannot run steps: "
        f"harness root: {root} has neither workflow_defs/ nor phases/: pass `specops --root "
        "<harness root> worker …` or set SPECOPS_ROOT to the folder the deliveries were created "
        "in (the launching process's SPECOPS_ROOT); "
        "DAGSTER_HOME: not set: set it to a folder with the dagster.yaml of the instance the "
        "runs use (Postgres storage shared by every machine, docs/operations.md \"Postgres "
        "storage\"); "
        "codex CLI: SPECOPS_CODEX_BIN=/nowhere/codex is not an executable file; fix it or unset "
        f"it; dotnet: {INSTALL_HINT}; or start this worker with --no-dotnet for steps that never "
        "validate `full`; "
        "broker: no broker: pass --broker redis://HOST:PORT/0 or set SPECOPS_CELERY_BROKER, to "
        "the broker the launching process's run config names; nothing was started\n")
    assert sorted(p.name for p in root.iterdir()) == []  # no worker folder, no cache folder


def test_a_worker_prints_what_it_found_and_refuses_a_broker_that_does_not_answer(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    port = free_port()
    env = {**clean_env, "SPECOPS_CELERY_BROKER": f"redis://127.0.0.1:{port}/0"}
    env.pop("SPECOPS_CODEX_BIN", None)
    result = specops(env, diamond_root, "worker", "--name", "w1", "--no-dotnet")
    assert result.returncode == 3
    assert result.stdout == (
        f"specops worker `w1` on host {HOST} checks what its steps need:\n"
        f"  harness root: {diamond_root} (workflow_defs/)\n"
        f"  DAGSTER_HOME: {clean_env['DAGSTER_HOME']} (storage: sqlite, the default: only runs "
        "launched on this machine can use it)\n"
        f"  codex CLI: {REPO / 'node_modules/.bin/codex'}\n"
        "  dotnet: not required (--no-dotnet: a step that validates `full` is blocked on this "
        "worker)\n"
        f"  caches: {diamond_root}/.specops/cache (to be created)\n"
        "  broker: MISSING\n"
        f"  backend: redis://127.0.0.1:{port}/0 (the broker)\n"
        f"  dagster-celery: {VENV_BIN / 'dagster-celery'}\n")
    assert result.stderr == (
        f"error: worker `w1` on host {HOST} cannot run steps: broker: redis://127.0.0.1:{port}/0 "
        f"does not answer at 127.0.0.1:{port} (Connection refused): start the broker or fix "
        "--broker; nothing was started\n")
    assert not (diamond_root / ".specops").exists()


def test_the_worker_starts_dagster_celery_with_one_step_at_a_time_in_its_own_folder(
        tmp_path: Path) -> None:
    worker = Worker(root=tmp_path, name="w1", broker="redis://127.0.0.1:6379/0", backend=None,
                    folder=tmp_path / "w1", queues=("dagster", "dotnet"))
    assert worker_argv(worker, tmp_path / "w1/celery.yaml") == [
        str(VENV_BIN / "dagster-celery"), "worker", "start", "-A",
        "specops_dag.dagster_adapter.celery_tasks", "-y", str(tmp_path / "w1/celery.yaml"), "--name", "w1", "-q", "dagster", "-q", "dotnet",
        "-l", "INFO", "--", "--concurrency", "1"]


def test_the_worker_config_is_one_dagster_celery_itself_accepts(tmp_path: Path) -> None:
    worker = Worker(root=tmp_path, name="w1", broker="redis://127.0.0.1:6379/0",
                    backend="redis://127.0.0.1:6379/1", folder=tmp_path / "w1")
    path = tmp_path / "celery.yaml"
    path.write_text(celery_config(worker))
    source = {"task_acks_late": True, "broker_transport_options": {
        **broker_transport_options, "visibility_timeout": 7 * 24 * 3600}}
    assert yaml.safe_load(path.read_text()) == {"execution": {"config": {
        "broker": "redis://127.0.0.1:6379/0", "backend": "redis://127.0.0.1:6379/1",
        "config_source": source}}}
    checked = get_validated_config(str(path))  # what `dagster-celery worker start -y` does
    assert (checked["broker"], checked["backend"], checked["config_source"]) == (
        "redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/1", source)
    alone = Worker(root=tmp_path, name="w1", broker="redis://h:1/0", backend=None,
                   folder=tmp_path / "w1")
    assert yaml.safe_load(celery_config(alone))["execution"]["config"]["backend"] == (
        "redis://h:1/0")
