"""Fault and parallelism suites (issue #8), bounded in time."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from specops_dag.state import Store

from .conftest import VENV_BIN, command_phase
from .test_definitions import specops

# Sleeps NAP seconds and records when it ran, so tests can see overlap without timing anything.
SLEEP = ("[python3, -c, \"import os,pathlib,time,json; t=time.time(); "
         "time.sleep(float(os.environ.get('NAP', '0'))); d=os.environ['SPECOPS_NODE_DIR']; "
         "pathlib.Path(d,'ran.json').write_text(json.dumps([t, time.time()])); "
         "pathlib.Path(d,'out.txt').write_text('x')\"]")


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
    while not (lock.exists() and lock.read_text().strip()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    second = specops(env, diamond_root, "run", "d1", "--executor", "in_process")
    assert second.returncode == 3
    assert second.stderr.startswith("error: write conflict: delivery `d1` (another `specops "
                                    "run`) is being written by another process (pid ")
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
