"""Celery for one test: Debian's `redis-server` on a free port of 127.0.0.1 as the broker,
`specops worker` processes, a diamond delivery whose steps nap, and `dagster job execute` of the
Celery code location; every process started here is killed by its pid."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import git
import psutil

from .git import WHO, WRITE, git_harness
from .harness import VENV_BIN, command_phase
from .processes import free_port

REDIS_SERVER = Path("/usr/bin/redis-server")
START_S = 30.0


class RedisServer:
    """Debian's `redis-server` on 127.0.0.1:`port`, its files and `redis.log` in `folder`; with
    `persist`, every write goes to its append-only file first (`appendfsync always`), so a
    restart keeps the queues, as a broker in production is run."""

    def __init__(self, folder: Path, persist: bool = False) -> None:
        assert REDIS_SERVER.exists(), "redis-server is missing: apt-get install -y redis-server"
        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.port, self.persist = folder, free_port(), persist
        self.url = f"redis://127.0.0.1:{self.port}"  # without a database number
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        durable = ["--appendonly", "yes", "--appendfsync", "always"] if self.persist else [
            "--appendonly", "no"]
        with (self.folder / "redis.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [str(REDIS_SERVER), "--port", str(self.port), "--bind", "127.0.0.1", "--save",
                 "", *durable, "--daemonize", "no", "--dir", str(self.folder)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + START_S
        while True:
            assert self.proc.poll() is None, (self.folder / "redis.log").read_text()
            assert time.monotonic() < deadline, f"redis-server did not listen on {self.port}"
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)

    def stop(self, sig: int = signal.SIGKILL) -> None:
        """End it by its pid (SIGTERM: it saves and exits, as `systemctl restart` does)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)

    def restart(self, down_s: float = 0.0) -> None:
        self.stop(signal.SIGTERM)
        time.sleep(down_s)
        self.start()


@contextmanager
def redis_server(folder: Path, persist: bool = False) -> Iterator[RedisServer]:
    server = RedisServer(folder, persist)
    try:
        server.start()
        yield server
    finally:
        server.stop()


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


# WRITE (a product file, the artifact, the step record), after a nap of $NAP_<node> (else $NAP)
# seconds recorded in ran.json, so a test sees two branches overlap without timing anything.
NAP_WRITE = WRITE.replace(
    "import os,pathlib; ",
    "import os,pathlib,time,json; t=time.time(); e=os.environ; "
    "time.sleep(float(e.get('NAP_' + e['SPECOPS_NODE'], e.get('NAP', '0')))); "
    "pathlib.Path(os.environ['SPECOPS_NODE_DIR'],'ran.json').write_text("
    "json.dumps([t, time.time()])); ", 1)
PORTS = {"p-a": ({"request": "req"}, {"out": "a-out"}), "p-b": ({"up": "a-out"}, {"out": "b-out"}),
         "p-c": ({"up": "a-out"}, {"out": "c-out"}),
         "p-d": ({"left": "b-out", "right": "c-out"}, {"out": "d-out"})}


def napping_git_diamond(tmp_path: Path) -> Path:
    """git_harness's diamond (a target repository with a bare origin), its phases napping."""
    root, _ = git_harness(tmp_path)
    for pid, (ins, outs) in PORTS.items():
        (root / f"workflow_defs/phases/{pid}.yaml").write_text(
            command_phase(pid, NAP_WRITE, ins, outs))
    repo = git.Repo(root)
    repo.git.add(A=True)
    repo.index.commit("napping phases", author=WHO, committer=WHO)
    return root


def launch(env: dict[str, str], root: Path, broker: str, job: str) -> subprocess.Popen:
    """`dagster job execute` of the Celery code location for partition d1, its output piped."""
    config = root.parent / "celery-run.yaml"
    config.write_text(f"execution:\n  config:\n    broker: {broker}/0\n    backend: {broker}/1\n")
    return subprocess.Popen(
        [str(VENV_BIN / "dagster"), "job", "execute", "-m", "specops_dag.dagster_adapter.celery",
         "-j", job, "-c", str(config), "--tags", json.dumps({"dagster/partition": "d1"})],
        env={**env, "SPECOPS_ROOT": str(root)}, cwd=root, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def execute(env: dict[str, str], root: Path, broker: str, job: str) -> tuple[
        subprocess.CompletedProcess, int]:
    """`launch`, waited for (300 s at most); (result, its pid)."""
    proc = launch(env, root, broker, job)
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        kill_trees([proc])  # a run past its deadline, or one the test gave up on
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), proc.pid
