"""Fault and parallelism suites (issue #8), bounded in time."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from specops_dag.delivery.store import Store, lock_holder

from ..support.cli import specops
from ..support.harness import SLEEP, VENV_BIN, command_phase

pytestmark = pytest.mark.e2e


def run_lock_holder(lock: Path) -> int | None:
    fd = os.open(lock, os.O_RDONLY)
    try:
        return lock_holder(fd)
    finally:
        os.close(fd)


def sleepy_diamond(root: Path) -> None:
    ports = {"p-a": ({"request": "req"}, {"out": "a-out"}), "p-b": ({"up": "a-out"}, {"out": "b-out"}),
             "p-c": ({"up": "a-out"}, {"out": "c-out"}),
             "p-d": ({"left": "b-out", "right": "c-out"}, {"out": "d-out"})}
    for pid, (ins, outs) in ports.items():
        (root / f"workflow_defs/phases/{pid}.yaml").write_text(
            command_phase(pid, SLEEP, ins, outs))


def test_a_second_run_of_the_same_delivery_reports_the_write_conflict(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    sleepy_diamond(diamond_root)
    env = {**clean_env, "NAP": "3"}
    assert specops(env, diamond_root, "new", "diamond", "d1", "--request", "x").returncode == 0
    first = subprocess.Popen([str(VENV_BIN / "specops"), "--root", str(diamond_root), "run", "d1",
                              "--executor", "in_process"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    lock = diamond_root / "phases/d1/.run.lock"
    deadline = time.monotonic() + 30
    while not (lock.exists() and run_lock_holder(lock) == first.pid):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    second = specops(env, diamond_root, "run", "d1", "--executor", "in_process")
    assert second.returncode == 3
    assert second.stderr == (f"error: write conflict: delivery `d1` (another `specops run`) is "
                             f"being written by another process (pid {first.pid}); nothing was "
                             "changed, retry when it finishes\n")
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    state = Store(diamond_root).read("d1")
    assert state.status == "completed"
    assert [s.attempts for s in state.steps] == [1, 1, 1, 1]


def test_parallel_branches_run_at_once_with_the_multiprocess_executor(
        diamond_root: Path, clean_env: dict[str, str]) -> None:
    sleepy_diamond(diamond_root)
    for pid in ("p-b", "p-c"):  # the two middle nodes each take ~10 s
        path = diamond_root / f"workflow_defs/phases/{pid}.yaml"
        path.write_text(path.read_text().replace("os.environ.get('NAP', '0')", "'10'"))
    assert specops(clean_env, diamond_root, "new", "diamond", "d1", "--request", "x"
                   ).returncode == 0
    run = specops(clean_env, diamond_root, "run", "d1", "--executor", "multiprocess")
    assert run.returncode == 0, run.stderr
    state = json.loads((diamond_root / "phases/d1/index.json").read_text())
    assert [s["status"] for s in state["steps"]] == ["completed"] * 4
    (b_start, b_end), (c_start, c_end) = (
        json.loads((diamond_root / f"phases/d1/{n}/ran.json").read_text()) for n in "bc")
    assert b_start < c_end and c_start < b_end  # the two branches overlapped in time
    (_, a_end), (d_start, _) = (
        json.loads((diamond_root / f"phases/d1/{n}/ran.json").read_text()) for n in "ad")
    assert a_end <= min(b_start, c_start) and d_start >= max(b_end, c_end)  # needs respected


def test_runs_killed_at_random_points_never_lose_work_or_redo_completed_nodes(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    import random
    import signal

    import git

    from specops_dag.files import sha256_file

    from ..support.cli import job_execute
    from ..support.git import git_harness
    from ..support.processes import start_run, survivors

    rng = random.Random(20261130)  # fixed seed: the same "random" points every run
    cut_short = []
    for trial in range(4):
        root, _ = git_harness(tmp_path / f"t{trial}")
        calls = tmp_path / f"calls-{trial}.log"
        env = {**clean_env, "CALLS": str(calls)}
        assert specops(env, root, "new", "diamond", "d1", "--request", "x").returncode == 0
        proc = start_run(env, root, "diamond_job")
        time.sleep(rng.uniform(0.5, 3.0))
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        before = Store(root).read("d1")  # always parses
        done = {s.name for s in before.steps if s.status == "completed"}
        cut_short.append(len(done) < 4)
        calls.write_text("")
        run = job_execute(env, root, "diamond_job", "d1")
        assert run.returncode == 0, run.stderr[-2000:]
        after = Store(root).read("d1")
        assert after.status == "completed"
        assert not done & set(calls.read_text().split()), (trial, done)  # never redone
        for step in after.steps:  # no handoff lost
            for ref in step.handoff.values():
                assert sha256_file(root / ref.path) == ref.sha256
            if step.name in done:
                assert step.handoff == before.get_step(step.name).handoff
        branch = git.Repo(root).heads["feat-d1"].commit
        assert {f"src/{n}.txt" for n in "abcd"} <= {b.path for b in branch.tree.traverse()}
        assert survivors(str(root)) == []
    assert any(cut_short), cut_short  # the kills really landed mid-delivery
