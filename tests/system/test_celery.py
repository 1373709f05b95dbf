"""Celery, for real (issue #45): Debian's redis-server as the broker, Postgres as Dagster's
storage, and `specops worker` processes started here, each in its own folder. A delivery's
steps run on the workers, never in the process that launched the run; the parallel branches of
the diamond run at once on different workers, and so do the tasks of a fan-out node; each step
and task records where it ran, and a worker that lacks the codex CLI blocks the step before any
agent call, with no attempt spent."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path

import dagster as dg
import git
import pytest

from specops_dag.delivery.store import Store

from ..support.agents import AGENTIC, attempts, replay
from ..support.broker import celery_workers, execute, napping_git_diamond, tree
from ..support.cli import specops
from ..support.fanout import TWO, harness, writes
from ..support.harness import VENV_BIN, write_tree
from ..support.postgres import use_postgres
from ..support.processes import ours

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

def test_a_delivery_runs_on_two_celery_workers_and_its_parallel_branches_on_different_ones(
        tmp_path: Path, clean_env: dict[str, str], postgres: str, redis: str) -> None:
    use_postgres(Path(clean_env["DAGSTER_HOME"]), postgres)
    root = napping_git_diamond(tmp_path)
    env = {**clean_env, "CALLS": os.devnull, "NAP": "3"}
    assert specops(env, root, "new", "diamond", "d1", "--request", "x").returncode == 0
    folders = {"w1": tmp_path / "workers" / "w1", "w2": tmp_path / "workers" / "w2"}
    with celery_workers(VENV_BIN / "specops", env, root, redis, folders) as started:
        pids = {name: {p.pid for p in tree(proc.pid)} for name, proc in started.items()}
        assert all(len(p) >= 3 for p in pids.values())  # dagster-celery, celery, its pool
        assert ours(root, str(tmp_path / "workers"))  # the check below sees them while they run
        run, launcher = execute(env, root, redis, "diamond_job")
        assert run.returncode == 0, run.stderr[-3000:]
    state = Store(root).read("d1")
    assert [(s.name, s.status, s.attempts) for s in state.steps] == [
        (n, "completed", 1) for n in "abcd"]
    host = socket.gethostname()
    ran = {s.name: s.ran_on for s in state.steps}
    for node, where in ran.items():  # each step ran in the pool of the worker it names
        assert where is not None and where.host == host, node
        assert where.pid in pids[where.worker] and where.pid != launcher, (node, where)
    assert ran["b"].worker != ran["c"].worker and ran["b"].pid != ran["c"].pid
    marks = {p.suffix: set() for p in (root / ".specops/celery").iterdir()}
    for p in (root / ".specops/celery").iterdir():
        marks[p.suffix].add(p.stem)
    # each step task's message was recorded as taken by a worker, then started (celery_leases)
    assert set(marks) == {".taken", ".started"} and len(marks[".taken"]) == 4
    assert marks[".taken"] == marks[".started"]
    (b_start, b_end), (c_start, c_end) = (
        json.loads((root / f"phases/d1/{n}/ran.json").read_text()) for n in "bc")
    assert b_start < c_end and c_start < b_end  # the two branches overlapped in time
    assert {f"src/{n}.txt" for n in "abcd"} <= {
        b.path for b in git.Repo(root).heads["feat-d1"].commit.tree.traverse()}

    shown = specops(env, root, "status", "d1").stdout.splitlines()
    assert [line for line in shown if "ran on" in line] == [
        f"       ran on Celery worker `{ran[n].worker}` (host {host}, pid {ran[n].pid})"
        for n in "abcd"]
    as_json = json.loads(specops(env, root, "status", "d1", "--json").stdout)
    assert [s["ran_on"] for s in as_json["steps"]] == [
        {"host": host, "pid": ran[n].pid, "worker": ran[n].worker} for n in "abcd"]
    with dg.DagsterInstance.get() as instance:  # the materializations, read back from Postgres
        for n in "abcd":
            event = instance.fetch_materializations(dg.AssetKey(["diamond", n]), limit=1)
            metadata = event.records[0].asset_materialization.metadata
            assert (metadata["worker"].value, metadata["celery_worker"].value) == (
                f"{host}:{ran[n].pid}", ran[n].worker)
    assert ours(root, str(tmp_path / "workers")) == []  # no worker, pool or step process left


def test_the_tasks_of_a_fan_out_node_run_on_different_celery_workers(
        tmp_path: Path, clean_env: dict[str, str], postgres: str, redis: str) -> None:
    use_postgres(Path(clean_env["DAGSTER_HOME"]), postgres)
    root = harness(tmp_path, TWO, clean_env).root
    folders = {"w1": tmp_path / "workers" / "w1", "w2": tmp_path / "workers" / "w2"}
    with replay(tmp_path, {"build.t1": [writes("t1")], "build.t2": [writes("t2")]}) as server:
        env = {**clean_env, "SPECOPS_REPLAY_URL": server.url,
               "SPECOPS_CODEX_HOME": str(tmp_path / "codex-home")}
        with celery_workers(VENV_BIN / "specops", env, root, redis, folders) as started:
            pids = {name: {p.pid for p in tree(proc.pid)} for name, proc in started.items()}
            run, launcher = execute(env, root, redis, "plan_build_job")
            assert run.returncode == 0, run.stderr[-3000:]
    build = Store(root).read("d1").get_step("build")
    t1, t2 = build.tasks
    assert [(t.id, t.status, t.attempts, t.owner) for t in build.tasks] == [
        ("t1", "merged", 1, None), ("t2", "merged", 1, None)]
    assert [len(attempts(tmp_path, f"build.{t}")) for t in ("t1", "t2")] == [1, 1]
    host = socket.gethostname()
    # the step's own worker ran the first task and the other worker took the one it offered
    assert build.ran_on is not None and t1.ran_on == build.ran_on
    assert t2.ran_on is not None and t2.ran_on.worker != t1.ran_on.worker
    for where in (t1.ran_on, t2.ran_on):
        assert where.host == host and where.pid in pids[where.worker] and where.pid != launcher
    assert {f"src/{t}.txt" for t in ("t1", "t2")} <= {
        b.path for b in git.Repo(root).heads["feat-d1"].commit.tree.traverse()}
    shown = specops(env, root, "status", "d1").stdout.splitlines()
    assert [line for line in shown if "ran on" in line][-3:] == [
        f"       ran on Celery worker `{build.ran_on.worker}` (host {host}, pid "
        f"{build.ran_on.pid})",
        *(f"           ran on Celery worker `{t.ran_on.worker}` (host {host}, pid "
          f"{t.ran_on.pid})" for t in (t1, t2))]
    with dg.DagsterInstance.get() as instance:  # the node's materialization, from Postgres
        event = instance.get_latest_materialization_event(dg.AssetKey(["plan-build", "build"]))
        tasks = event.asset_materialization.metadata["tasks"].value
        assert [t["ran_on"] for t in tasks] == [t.ran_on.model_dump() for t in (t1, t2)]
        logs = [e.user_message for e in instance.all_logs(event.run_id)]
    assert "build: task t2: offered to the other workers" in logs
    assert (f"build: task t2: taken by Celery worker `{t2.ran_on.worker}` (host {host}, pid "
            f"{t2.ran_on.pid})") in logs
    assert ours(root, str(tmp_path / "workers")) == []


def test_a_worker_that_lost_its_codex_cli_blocks_the_step_before_any_agent_call(
        tmp_path: Path, clean_env: dict[str, str], postgres: str, redis: str) -> None:
    use_postgres(Path(clean_env["DAGSTER_HOME"]), postgres)
    root = write_tree(tmp_path / "harness", AGENTIC)
    codex = tmp_path / "bin" / "codex"  # there when the worker checks, gone when the step runs
    codex.parent.mkdir()
    codex.write_text("#!/bin/sh\nexit 1\n")
    codex.chmod(codex.stat().st_mode | stat.S_IEXEC)
    env = {**clean_env, "SPECOPS_CODEX_BIN": str(codex), "SPECOPS_REPLAY_URL": "http://127.0.0.1:9"}
    assert specops(env, root, "new", "agentic", "d1", "--request", "x").returncode == 0
    with celery_workers(VENV_BIN / "specops", env, root, redis,
                        {"w1": tmp_path / "workers" / "w1"}):
        assert f"  codex CLI: {codex}" in (tmp_path / "workers" / "w1.log").read_text()
        codex.unlink()
        run, _ = execute(env, root, redis, "agentic_job")
    reason = (f"environment error: SPECOPS_CODEX_BIN={codex} is not an executable file; fix it "
              f"or unset it (found on host `{socket.gethostname()}` by Celery worker `w1` before "
              "the attempt: no agent call was made and no attempt was spent)")
    assert run.returncode != 0
    assert f"write of d1: blocked: {reason}" in run.stdout + run.stderr
    step = Store(root).read("d1").get_step("write")
    assert (step.status, step.blocked_reason) == ("blocked", reason)
    assert (step.attempts, step.attempt_log, step.usage, step.ran_on) == (0, [], [], None)
    assert Store(root).read("d1").get_step("review").status == "pending"
    assert ours(root, str(tmp_path / "workers")) == []
