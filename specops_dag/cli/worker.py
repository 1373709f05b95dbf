"""`specops worker`: one Celery worker for the Celery code location (`dagster job execute -m
specops_dag.dagster_adapter.celery`). Before it starts it checks, on this machine and with its
own environment, what a step will need — the harness root, DAGSTER_HOME, the codex CLI (found
as a step finds it), `dotnet`, the cache folder, the broker — prints each with its value and
refuses (exit 3) naming what is missing; then it replaces itself with `dagster-celery worker
start` in its own folder. It runs no step and decides nothing about runs."""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit

from specops_dag.errors import BlockedError, SpecopsError
from specops_dag.files import write_text_atomic

# The same two names the Celery code location reads (dagster_adapter/celery.py): the launching
# process and every worker must name one broker and one result backend.
BROKER_ENV, BACKEND_ENV = "SPECOPS_CELERY_BROKER", "SPECOPS_CELERY_BACKEND"
APP = "specops_dag.dagster_adapter.celery_tasks"  # dagster-celery's tasks, a step task once
BROKER_PORTS = {"redis": 6379, "rediss": 6379, "amqp": 5672, "pyamqp": 5672, "amqps": 5671}
# Redis hands an unacknowledged message to another worker after this long; a step's message is
# acknowledged when the step ends (`task_acks_late`), and an agent step can run for hours.
VISIBILITY_S = 7 * 24 * 3600
# dagster-celery's own broker_transport_options (dagster_celery/defaults.py), which a worker's
# `config_source` replaces whole, with the visibility timeout added.
TRANSPORT = {"max_retries": 3, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5,
             "visibility_timeout": VISIBILITY_S}
CONNECT_S = 3.0


@dataclass(frozen=True)
class Worker:
    """What `specops worker` was asked for, resolved (root absolute, folder chosen)."""

    root: Path
    name: str
    broker: str | None
    backend: str | None  # None: the broker
    folder: Path
    queues: tuple[str, ...] = ("dagster",)
    concurrency: int = 1
    loglevel: str = "INFO"
    dotnet: bool = True  # False: `--no-dotnet`, a worker for steps that never validate `full`


@dataclass(frozen=True)
class Check:
    """One thing a step needs on this worker: its value when found, else what to do."""

    what: str
    value: str | None
    problem: str | None = None


def worker_env(worker: Worker, env: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """The worker's environment: the harness root and the worker's name for its steps (which
    record it), this Python's scripts first on PATH (dagster-celery runs `celery` from PATH)."""
    scripts = str(Path(sys.executable).parent)
    path = [scripts, *(p for p in (env.get("PATH") or "").split(os.pathsep) if p and p != scripts)]
    from specops_dag.delivery.lifecycle import WORKER_ENV

    return {**env, "SPECOPS_ROOT": str(worker.root), WORKER_ENV: worker.name,
            "PATH": os.pathsep.join(path)}


def check_root(root: Path) -> Check:
    found = [f"{d}/" for d in ("workflow_defs", "phases") if (root / d).is_dir()]
    if found:
        return Check("harness root", f"{root} ({' and '.join(found)})")
    return Check("harness root", None, f"{root} has neither workflow_defs/ nor phases/: pass "
                 "`specops --root <harness root> worker …` or set SPECOPS_ROOT to the folder "
                 "the deliveries were created in (the launching process's SPECOPS_ROOT)")


def check_dagster_home(env: dict[str, str]) -> Check:
    home = env.get("DAGSTER_HOME") or ""
    if not home or not os.path.isabs(home) or not Path(home).is_dir():
        said = f"{home} is not an existing absolute folder" if home else "not set"
        return Check("DAGSTER_HOME", None, f"{said}: set it to a folder with the dagster.yaml "
                     "of the instance the runs use (Postgres storage shared by every machine, "
                     "docs/operations.md \"Postgres storage\")")
    return Check("DAGSTER_HOME", f"{home} (storage: {storage_of(Path(home))})")


def storage_of(home: Path) -> str:
    """What dagster.yaml names as the instance's storage, as one word or two."""
    import yaml

    try:
        config = yaml.safe_load((home / "dagster.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        config = {}
    storage = config.get("storage") if isinstance(config, dict) else None
    if isinstance(storage, dict) and storage:
        return next(iter(storage))
    if isinstance(config, dict) and "run_storage" in config:
        return "run_storage of dagster.yaml"
    return "sqlite, the default: only runs launched on this machine can use it"


def check_codex(root: Path, env: dict[str, str]) -> Check:
    from specops_dag.agent.codex import AgentSettings, find_codex

    try:
        return Check("codex CLI", find_codex(AgentSettings.from_env(env), root))
    except SpecopsError as err:
        return Check("codex CLI", None, err.message)


def check_dotnet(worker: Worker, env: dict[str, str]) -> Check:
    if not worker.dotnet:
        return Check("dotnet", "not required (--no-dotnet: a step that validates `full` is "
                     "blocked on this worker)")
    found = shutil.which("dotnet", path=env.get("PATH"))
    if found:
        return Check("dotnet", found)
    from specops_dag.validation.dotnet import INSTALL_HINT

    return Check("dotnet", None, f"{INSTALL_HINT}; or start this worker with --no-dotnet for "
                 "steps that never validate `full`")


def check_caches(root: Path) -> Check:
    """`<root>/.specops/cache`, where steps restore NuGet packages: writable, or creatable."""
    cache = root / ".specops" / "cache"
    existing = next(p for p in (cache, *cache.parents) if p.exists())
    if existing.is_dir() and os.access(existing, os.W_OK | os.X_OK):
        return Check("caches", f"{cache} ({'writable' if existing == cache else 'to be created'})")
    return Check("caches", None, f"{cache} cannot be written by uid {os.getuid()} ({existing} "
                 "is not a writable folder): give this user write access to it")


def check_broker(worker: Worker) -> list[Check]:
    if not worker.broker:
        return [Check("broker", None, f"no broker: pass --broker redis://HOST:PORT/0 or set "
                      f"{BROKER_ENV}, to the broker the launching process's run config names")]
    url = urlsplit(worker.broker)
    port = url.port or BROKER_PORTS.get(url.scheme)
    backend = Check("backend", worker.backend or f"{worker.broker} (the broker)")
    if not url.hostname or port is None:
        return [Check("broker", worker.broker), backend]  # a transport we do not probe
    try:
        socket.create_connection((url.hostname, port), timeout=CONNECT_S).close()
    except OSError as err:
        return [Check("broker", None, f"{worker.broker} does not answer at {url.hostname}:{port} "
                      f"({err.strerror or err}): start the broker or fix --broker"), backend]
    return [Check("broker", f"{worker.broker} (answers)"), backend]


def check_dagster_celery() -> Check:
    path = Path(sys.executable).parent / "dagster-celery"
    if path.is_file():
        return Check("dagster-celery", str(path))
    return Check("dagster-celery", None, f"{path} is not installed: pip install "
                 "'specops-dag[celery]' into this Python's environment")


def worker_checks(worker: Worker, env: dict[str, str]) -> list[Check]:
    return [check_root(worker.root), check_dagster_home(env), check_codex(worker.root, env),
            check_dotnet(worker, env), check_caches(worker.root), *check_broker(worker),
            check_dagster_celery()]


def celery_config(worker: Worker) -> str:
    """The worker's `-y` file: the executor config block dagster-celery reads for the broker and
    backend. `task_acks_late` keeps a running step's message unacknowledged, so with a
    prefetch of 1 a busy worker takes no second step and a parallel branch goes to an idle one."""
    import yaml

    config = {"broker": worker.broker, "backend": worker.backend or worker.broker,
              "config_source": {"task_acks_late": True, "broker_transport_options": TRANSPORT}}
    return yaml.safe_dump({"execution": {"config": config}}, sort_keys=False)


def worker_argv(worker: Worker, config: Path) -> list[str]:
    """`dagster-celery worker start` for this worker (it adds `--prefetch-multiplier=1`)."""
    queues = [arg for q in worker.queues for arg in ("-q", q)]
    return [str(Path(sys.executable).parent / "dagster-celery"), "worker", "start", "-A", APP,
            "-y", str(config), "--name", worker.name, *queues, "-l", worker.loglevel, "--",
            "--concurrency", str(worker.concurrency)]


def check_worker(worker: Worker, env: dict[str, str], say: Callable[[str], None]) -> None:
    """Print every check; raise BlockedError naming each missing thing (nothing started)."""
    host = socket.gethostname()
    say(f"specops worker `{worker.name}` on host {host} checks what its steps need:")
    checks = worker_checks(worker, env)
    for check in checks:
        say(f"  {check.what}: {check.value if check.problem is None else 'MISSING'}")
    problems = [f"{c.what}: {c.problem}" for c in checks if c.problem is not None]
    if problems:
        raise BlockedError(f"worker `{worker.name}` on host {host} cannot run steps: "
                           + "; ".join(problems) + "; nothing was started")


def start_worker(worker: Worker, say: Callable[[str], None]) -> NoReturn:
    """Check, then become `dagster-celery worker start` in the worker's own folder."""
    env = worker_env(worker, os.environ)
    check_worker(worker, env, say)
    worker.folder.mkdir(parents=True, exist_ok=True)
    config = worker.folder / "celery.yaml"
    write_text_atomic(config, celery_config(worker))
    argv = worker_argv(worker, config)
    say(f"starting in {worker.folder}: {shlex.join(argv)}")
    sys.stdout.flush()
    os.chdir(worker.folder)
    os.execve(argv[0], argv, env)
