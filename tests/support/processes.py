"""Processes of a test: finding them, starting runs to kill, waiting for them, free ports."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from .harness import VENV_BIN


def ours(root: Path, marker: str) -> list[psutil.Process]:
    """Processes (not this test's) started for this harness root: by command line or env."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        if p.info["pid"] == os.getpid():
            continue
        try:
            if marker in " ".join(p.info["cmdline"] or []) or (
                    p.environ().get("SPECOPS_ROOT") == str(root)):
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return [p for p in found if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def wait_for(what, limit_s: float = 60.0):
    deadline = time.monotonic() + limit_s
    while not (found := what()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
    return found


def start(env: dict[str, str], root: Path, executor: str) -> subprocess.Popen:
    return subprocess.Popen([str(VENV_BIN / "specops"), "--root", str(root), "run", "d1",
                             "--executor", executor], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def start_run(env: dict[str, str], root: Path, job: str) -> subprocess.Popen:
    config = root.parent / "in_process.yaml"
    config.write_text("execution:\n  config:\n    in_process: {}\n")
    return subprocess.Popen(
        [str(VENV_BIN / "dagster"), "job", "execute", "-m", "specops_dag.definitions", "-j", job,
         "-c", str(config), "--tags", json.dumps({"dagster/partition": "d1"})],
        env={**env, "SPECOPS_ROOT": str(root)}, cwd=root, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)


def kill_when(proc: subprocess.Popen, ready: Callable[[], bool], limit_s: float = 60) -> None:
    deadline = time.monotonic() + limit_s
    while not ready():
        assert proc.poll() is None, "the run ended before the kill point"
        assert time.monotonic() < deadline, "the kill point never came"
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def survivors(marker: str) -> list[str]:
    """Processes (not this test's) whose command line mentions `marker`, after a grace period."""
    time.sleep(3)
    me = os.getpid()
    return [" ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline", "pid"])
            if p.info["pid"] != me and marker in " ".join(p.info["cmdline"] or [])]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# A child that starts a grandchild in its own session (as codex tool commands do), then hangs.
SPAWNER = """
import subprocess, sys, time, pathlib
p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)
pathlib.Path(sys.argv[1]).write_text(str(p.pid))
print('spawned', flush=True)
time.sleep(120)
"""
