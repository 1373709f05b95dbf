"""A Celery broker for one test: Debian's `redis-server` on a free port of 127.0.0.1, without
persistence, killed by its pid after the test."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from .processes import free_port

REDIS_SERVER = Path("/usr/bin/redis-server")
START_S = 30.0


@contextmanager
def redis_server(folder: Path) -> Iterator[str]:
    """Yields the server's URL without a database number (`redis://127.0.0.1:P`); its log is
    `folder/redis.log`."""
    assert REDIS_SERVER.exists(), "redis-server is missing: apt-get install -y redis-server"
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    with (folder / "redis.log").open("wb") as log:
        proc = subprocess.Popen([str(REDIS_SERVER), "--port", str(port), "--bind", "127.0.0.1",
                                 "--save", "", "--appendonly", "no", "--daemonize", "no",
                                 "--dir", str(folder)], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + START_S
        while True:
            assert proc.poll() is None, (folder / "redis.log").read_text()
            assert time.monotonic() < deadline, f"redis-server did not listen on {port} in time"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(timeout=10)


def tree(pid: int) -> list[psutil.Process]:
    """The process `pid` and all its descendants (empty once it is gone)."""
    try:
        top = psutil.Process(pid)
        return [top, *top.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def kill_trees(procs: list[subprocess.Popen]) -> None:
    """SIGKILL each process still running and all its descendants, by pid (dagster-celery's
    `celery` child and its pool do not end with it), and wait for them; one already reaped is
    left alone: its pid may be another process's now."""
    for proc in procs:
        if proc.poll() is not None:
            continue
        found = tree(proc.pid)
        for p in found:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(found, timeout=20)
        proc.wait(timeout=10)


@contextmanager
def celery_workers(specops: Path, env: dict[str, str], root: Path, broker: str,
                   folders: dict[str, Path], *args: str, ready_s: float = 90.0,
                   ) -> Iterator[dict[str, subprocess.Popen]]:
    """`specops worker --name N --dir F [args]` for each name and folder, running from that
    folder with the broker's database 0 and backend 1; yielded once every one logged that it is
    ready. At the end each one's whole process tree (dagster-celery, the Celery main process,
    its pool) is killed by pid."""
    started: dict[str, subprocess.Popen] = {}
    try:
        for name, folder in folders.items():
            folder.mkdir(parents=True)
            with (folder.parent / f"{name}.log").open("wb") as log:
                started[name] = subprocess.Popen(
                    [str(specops), "--root", str(root), "worker", "--name", name, "--dir",
                     str(folder), "--broker", f"{broker}/0", "--backend", f"{broker}/1", *args],
                    env=env, cwd=folder, stdout=log, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + ready_s
        for name, folder in folders.items():
            log = folder.parent / f"{name}.log"
            while f"{name}@{socket.gethostname()} ready." not in log.read_text():
                assert started[name].poll() is None, log.read_text()
                assert time.monotonic() < deadline, f"worker {name} not ready:\n{log.read_text()}"
                time.sleep(0.2)
        yield started
    finally:
        kill_trees(list(started.values()))
