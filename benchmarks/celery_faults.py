"""Faults across Celery workers at random points (issue #45 item 3): TRIALS deliveries of the
napping diamond (a → b, c → d; a git target with a bare origin) run by `dagster job execute` of
the Celery code location on 2 `specops worker` processes, with Debian's `redis-server` (its
append-only file on, as a broker is run) and one private Postgres storage. In each trial, at a
random point of a random step (a random fraction, 0.1–0.9, of its nap after it shows
`running`), one fault:

  kill     SIGKILL of one worker's whole process tree (dagster-celery, celery, its pool, the
           step's processes): the worker running a step when one runs, chosen at random, else
           either worker;
  broker   a restart of redis-server (SIGTERM, 2 s down, started again on its port).

Then it waits for the run to end, for no step to be running on a live worker, and runs
`specops run` on the delivery. Per trial it prints the fault, its point (seconds after the
launch), the steps running then and how long the run took to end after it, and checks that the
run ended (not STARTED), that `specops run` completed the delivery, that no step completed
before the fault ran again (its attempts and `ran_on` unchanged), that no completed step's
handoff changed (path and sha256), that `feat-<d>` holds every node's product file, and that no
process of the trial is left. Each trial starts its own 2 workers. BENCH_TRIALS sets the count
(default 20), BENCH_SEED the random seed. Exit 1 when a trial breaks a check. Not a test:
nothing asserts a time.

`python -m benchmarks.celery_faults`
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import git  # noqa: E402
import psutil  # noqa: E402

from benchmarks import compile_package  # noqa: E402
from specops_dag.delivery.store import Store  # noqa: E402
from tests.support.broker import (  # noqa: E402
    celery_workers,
    kill_trees,
    launch,
    napping_git_diamond,
    redis_server,
    tree,
)
from tests.support.postgres import postgres_server, use_postgres  # noqa: E402
from tests.support.processes import ours  # noqa: E402

TRIALS = int(os.environ.get("BENCH_TRIALS", "20"))
SEED = int(os.environ.get("BENCH_SEED", str(int(time.time()))))
BIN = Path(sys.executable).parent
NAPS = {"NAP_a": "3", "NAP_b": "8", "NAP_c": "8", "NAP_d": "3"}


@dataclass
class Trial:
    fault: str
    point: float
    running: list[str]
    ended_after: float
    checks: list[str]  # the checks it broke


def steps(root: Path) -> list:
    try:
        return Store(root).read("d1").steps
    except Exception:  # noqa: BLE001 — a read racing a write: try again
        time.sleep(0.2)
        return Store(root).read("d1").steps


def specops(env: dict[str, str], root: Path, *args: str) -> int:
    import subprocess

    return subprocess.run([str(BIN / "specops"), "--root", str(root), *args], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=900).returncode


def trial(n: int, rng: random.Random, work: Path, env0: dict[str, str], broker) -> Trial:
    tmp = work / f"t{n}"
    tmp.mkdir()
    root = napping_git_diamond(tmp)
    env = {**env0, "CALLS": str(tmp / "calls.txt"), **NAPS}
    assert specops(env, root, "new", "diamond", "d1", "--request", "x") == 0
    folders = {"w1": tmp / "workers" / "w1", "w2": tmp / "workers" / "w2"}
    fault = rng.choice(("kill", "kill", "kill", "broker"))
    during = rng.choice("abcd")  # the step the fault lands in, at a random point of its nap
    into = rng.uniform(0.1, 0.9) * float(NAPS[f"NAP_{during}"])
    checks: list[str] = []
    with celery_workers(BIN / "specops", env, root, broker.url, folders, ready_s=120) as started:
        run = launch(env, root, broker.url, "diamond_job")
        began = time.monotonic()
        try:
            while run.poll() is None and not any(
                    s.name == during and s.status == "running" for s in steps(root)):
                time.sleep(0.05)
            time.sleep(into)
            point = time.monotonic() - began
            now = steps(root)
            running = [s.name for s in now if s.status == "running"]
            before = {s.name: (s.attempts, s.ran_on, dict(s.handoff))
                      for s in now if s.status == "completed"}
            hit = time.monotonic()
            if fault == "broker":
                broker.restart(down_s=2)
            else:
                on = [s.ran_on.worker for s in now
                      if s.status == "running" and s.ran_on and s.ran_on.worker]
                victim = rng.choice(on or sorted(started))
                doomed = tree(started[victim].pid)
                kill_trees([started[victim]])
                if [p for p in doomed if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]:
                    checks.append("a process of the killed worker's tree survived")
            try:
                run.communicate(timeout=600)
            except Exception:  # noqa: BLE001
                checks.append("the run did not end within 600 s of the fault")
            ended_after = time.monotonic() - hit
        finally:
            kill_trees([run])
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and any(  # a live worker's step goes on after its run
                s.status == "running" and s.ran_on and psutil.pid_exists(s.ran_on.pid)
                for s in steps(root)):
            time.sleep(0.5)
        if specops(env, root, "run", "d1") != 0:
            checks.append("specops run did not complete the delivery")
    after = {s.name: s for s in steps(root)}
    if [s.status for s in after.values()] != ["completed"] * 4:
        checks.append(f"not every step completed: {[s.status for s in after.values()]}")
    for name, (attempts, ran_on, handoff) in before.items():
        if (after[name].attempts, after[name].ran_on) != (attempts, ran_on):
            checks.append(f"{name}, completed before the fault, ran again")
        if dict(after[name].handoff) != handoff:
            checks.append(f"{name}'s handoff changed")
    tree_files = {b.path for b in git.Repo(root).heads["feat-d1"].commit.tree.traverse()}
    if not {f"src/{n}.txt" for n in "abcd"} <= tree_files:
        checks.append("feat-d1 lacks a node's product file")
    if ours(root, str(tmp / "workers")):
        checks.append("a process of the trial was left")
    return Trial(fault, point, running, ended_after, checks)


def main() -> int:
    compile_package()
    rng = random.Random(SEED)
    work = Path(tempfile.mkdtemp(prefix="specops-celery-faults-"))
    home = work / "dh"
    home.mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(home),
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("SPECOPS_ROOT", None)
    os.environ["DAGSTER_HOME"] = str(home)
    print(f"{TRIALS} trials, seed {SEED}")
    done: list[Trial] = []
    with postgres_server() as url, redis_server(work / "redis", persist=True) as broker:
        use_postgres(home, url)
        for n in range(1, TRIALS + 1):
            t = trial(n, rng, work, env, broker)
            done.append(t)
            print(f"  trial {n:2}: {t.fault:6} at {t.point:4.1f} s, running "
                  f"{','.join(t.running) or '-':5}; run ended {t.ended_after:5.1f} s after it; "
                  + ("ok" if not t.checks else "BROKEN: " + "; ".join(t.checks)), flush=True)
    kills = [t for t in done if t.fault == "kill"]
    broken = [t for t in done if t.checks]
    mid = [t for t in done if t.running]
    print(f"{len(done)} trials ({len(kills)} worker kills, {len(done) - len(kills)} broker "
          f"restarts; {len(mid)} with a step running at the fault): {len(done) - len(broken)} "
          f"recovered exactly, {len(broken)} broke a check; the run ended at most "
          f"{max(t.ended_after for t in done):.1f} s after a fault (median "
          f"{sorted(t.ended_after for t in done)[len(done) // 2]:.1f} s)")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
