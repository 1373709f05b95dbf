"""Faults across Celery workers (issue #45 item 3), for real: Debian's redis-server, Postgres,
two `specops worker` processes and `dagster job execute` of the Celery code location, on the
napping diamond (a → b, c → d). A worker whose whole process tree is SIGKILLed in the middle of
a step, or a broker restarted under a running delivery, does not leave the run waiting: it ends,
and the next `specops run` re-runs what was interrupted within its attempts, redoing no completed
step and losing no handoff. A worker killed while it runs a fan-out task another worker's step
offered it leaves that task to run again, in the same run, with the killed session spent."""

from __future__ import annotations

import time
from pathlib import Path

import git
import psutil
import pytest

from specops_dag.delivery.store import Store

from ..support.agents import attempts, replay
from ..support.broker import celery_workers, kill_trees, launch, napping_git_diamond, tree
from ..support.cli import specops
from ..support.fanout import TWO, harness, writes
from ..support.harness import VENV_BIN
from ..support.postgres import use_postgres
from ..support.processes import ours, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


def running(root: Path, node: str) -> bool:
    step = Store(root).read("d1").get_step(node)
    return step.status == "running" and step.ran_on is not None


def handoffs(root: Path) -> dict[str, list[tuple[str, str, str]]]:
    """Each completed step's recorded outputs: (path, sha256)."""
    return {s.name: sorted((p, r.path, r.sha256) for p, r in s.handoff.items())
            for s in Store(root).read("d1").steps if s.status == "completed"}


def test_a_worker_killed_mid_step_fails_the_run_and_specops_run_redoes_only_that_step(
        tmp_path: Path, clean_env: dict[str, str], postgres: str, redis: str) -> None:
    use_postgres(Path(clean_env["DAGSTER_HOME"]), postgres)
    root = napping_git_diamond(tmp_path)
    env = {**clean_env, "CALLS": str(tmp_path / "calls.txt"), "NAP_b": "30", "NAP_c": "2"}
    assert specops(env, root, "new", "diamond", "d1", "--request", "x").returncode == 0
    folders = {"w1": tmp_path / "workers" / "w1", "w2": tmp_path / "workers" / "w2"}
    with celery_workers(VENV_BIN / "specops", env, root, redis, folders) as started:
        run = launch(env, root, redis, "diamond_job")
        try:
            wait_for(lambda: running(root, "b"), 120)
            victim = Store(root).read("d1").get_step("b").ran_on
            doomed = tree(started[victim.worker].pid)
            assert victim.pid in {p.pid for p in doomed}
            time.sleep(2)  # b naps 30 s: the kill lands in the middle of it
            kill_trees([started[victim.worker]])
            assert [p for p in doomed if p.is_running()
                    and p.status() != psutil.STATUS_ZOMBIE] == []
            out, err = run.communicate(timeout=120)  # ends: not waited on for ever
        finally:
            kill_trees([run])
    assert run.returncode != 0
    assert (f"the Celery worker that took step `diamond__b` is gone: its process (pid {victim.pid}) "
            "has ended; the step fails here, and `specops run` re-runs it from the delivery's "
            "state within its remaining attempts") in out + err
    before = Store(root).read("d1")
    assert [(s.name, s.status) for s in before.steps] == [
        ("a", "completed"), ("b", "running"), ("c", "completed"), ("d", "pending")]
    kept = handoffs(root)
    ran_on = {s.name: s.ran_on for s in before.steps if s.status == "completed"}

    recover = specops({**env, "NAP_b": "0"}, root, "run", "d1")
    assert recover.returncode == 0, recover.stdout + recover.stderr
    after = Store(root).read("d1")
    assert [(s.name, s.status, s.attempts) for s in after.steps] == [
        ("a", "completed", 1), ("b", "completed", 2), ("c", "completed", 1),
        ("d", "completed", 1)]
    assert {n: after.get_step(n).ran_on for n in ran_on} == ran_on  # not redone
    assert {n: v for n, v in handoffs(root).items() if n in kept} == kept
    assert (tmp_path / "calls.txt").read_text().splitlines().count("a") == 1
    assert {f"src/{n}.txt" for n in "abcd"} <= {
        b.path for b in git.Repo(root).heads["feat-d1"].commit.tree.traverse()}
    assert ours(root, str(tmp_path / "workers")) == []


def test_a_worker_killed_after_taking_a_step_and_before_starting_it_fails_the_run(
        tmp_path: Path, clean_env: dict[str, str], postgres: str, redis: str) -> None:
    use_postgres(Path(clean_env["DAGSTER_HOME"]), postgres)
    root = napping_git_diamond(tmp_path)
    env = {**clean_env, "CALLS": str(tmp_path / "calls.txt")}
    assert specops(env, root, "new", "diamond", "d1", "--request", "x").returncode == 0
    with celery_workers(VENV_BIN / "specops", env, root, redis,
                        {"w1": tmp_path / "workers" / "w1"}) as started:
        worker = tree(started["w1"].pid)
        pool = [p for p in worker if not p.children()]  # its pool: stopped, it starts nothing
        for p in pool:
            p.suspend()
        run = launch(env, root, redis, "diamond_job")
        try:
            taken = wait_for(lambda: list((root / ".specops/celery").glob("*.taken")), 120)
            [taker] = [p for p in worker if str(p.pid) in taken[0].read_text()]
            kill_trees([started["w1"]])
            out, err = run.communicate(timeout=120)  # ends: not waited on for ever
        finally:
            kill_trees([run])
    assert run.returncode != 0
    assert ("the Celery worker that took step `diamond__a` is gone: the worker that took it "
            f"(pid {taker.pid}) ended before it started the step; the step fails here, and "
            "`specops run` re-runs it from the delivery's state within its remaining attempts"
            ) in out + err
    assert [s.status for s in Store(root).read("d1").steps] == ["pending"] * 4
    assert not (tmp_path / "calls.txt").exists()  # no step ran
    recover = specops(env, root, "run", "d1")
    assert recover.returncode == 0, recover.stdout + recover.stderr
    assert [(s.status, s.attempts) for s in Store(root).read("d1").steps] == [
        ("completed", 1)] * 4
    assert ours(root, str(tmp_path / "workers")) == []


def test_a_broker_restarted_under_a_running_delivery_loses_no_step_and_no_handoff(
        tmp_path: Path, clean_env: dict[str, str], postgres: str) -> None:
    from ..support.broker import redis_server

    use_postgres(Path(clean_env["DAGSTER_HOME"]), postgres)
    root = napping_git_diamond(tmp_path)
    env = {**clean_env, "CALLS": str(tmp_path / "calls.txt"), "NAP_b": "10", "NAP_c": "10"}
    assert specops(env, root, "new", "diamond", "d1", "--request", "x").returncode == 0
    folders = {"w1": tmp_path / "workers" / "w1", "w2": tmp_path / "workers" / "w2"}
    with redis_server(tmp_path / "redis", persist=True) as broker, celery_workers(
            VENV_BIN / "specops", env, root, broker.url, folders):
        run = launch(env, root, broker.url, "diamond_job")
        try:
            wait_for(lambda: running(root, "b") and running(root, "c"), 120)
            broker.restart(down_s=2)
            out, err = run.communicate(timeout=240)
        finally:
            kill_trees([run])
        # the run cannot read its results while the broker is down: it ends at once, failed,
        # and the steps on the workers go on and complete
        assert run.returncode != 0
        assert "redis.exceptions.ConnectionError" in out + err
        wait_for(lambda: [s.status for s in Store(root).read("d1").steps] == [
            "completed", "completed", "completed", "pending"], 120)
        kept = handoffs(root)
        recover = specops(env, root, "run", "d1")
        assert recover.returncode == 0, recover.stdout + recover.stderr
    after = Store(root).read("d1")
    assert [(s.name, s.status, s.attempts) for s in after.steps] == [
        (n, "completed", 1) for n in "abcd"]
    assert {n: v for n, v in handoffs(root).items() if n in kept} == kept
    assert sorted((tmp_path / "calls.txt").read_text().split()) == list("abcd")
    assert ours(root, str(tmp_path / "workers")) == []


def test_a_worker_killed_while_it_runs_an_offered_task_leaves_the_task_to_run_again_in_the_run(
        tmp_path: Path, clean_env: dict[str, str], postgres: str, redis: str) -> None:
    use_postgres(Path(clean_env["DAGSTER_HOME"]), postgres)
    root = harness(tmp_path, TWO, clean_env).root
    hang = [{"shell": "sleep 600", "sleep_s": 0}, {"hang": True}]
    folders = {"w1": tmp_path / "workers" / "w1", "w2": tmp_path / "workers" / "w2"}
    with replay(tmp_path, {"build.t1": [writes("t1")],
                           "build.t2": [hang, writes("t2")]}) as server:
        env = {**clean_env, "SPECOPS_REPLAY_URL": server.url,
               "SPECOPS_CODEX_HOME": str(tmp_path / "codex-home")}
        with celery_workers(VENV_BIN / "specops", env, root, redis, folders) as started:
            run = launch(env, root, redis, "plan_build_job")
            try:
                def t2_hangs_on_the_other_worker() -> bool:
                    build = Store(root).read("d1").get_step("build")
                    t2 = build.tasks[1] if build.tasks else None
                    return (t2 is not None and t2.status == "running" and t2.ran_on is not None
                            and build.ran_on is not None
                            and t2.ran_on.worker != build.ran_on.worker
                            and any("sleep 600" in " ".join(p.info["cmdline"] or [])
                                    for p in psutil.process_iter(["cmdline"])))

                wait_for(t2_hangs_on_the_other_worker, 120)
                build = Store(root).read("d1").get_step("build")
                victim = build.tasks[1].ran_on
                kill_trees([started[victim.worker]])
                out, err = run.communicate(timeout=240)
            finally:
                kill_trees([run])
    assert run.returncode == 0, err[-3000:]
    build = Store(root).read("d1").get_step("build")
    assert (build.status, build.attempts) == ("completed", 1)
    assert [(t.id, t.status, t.attempts) for t in build.tasks] == [
        ("t1", "merged", 1), ("t2", "merged", 2)]
    assert build.tasks[1].ran_on == build.ran_on  # the step's worker ran it the second time
    assert len(attempts(tmp_path, "build.t2")) == 2
    gone = (f"its session was interrupted (Celery worker `{victim.worker}` (host {victim.host}, "
            f"pid {victim.pid}) is gone); the call is spent")
    import dagster as dg

    with dg.DagsterInstance.get() as instance:  # the run's log, from Postgres
        event = instance.get_latest_materialization_event(dg.AssetKey(["plan-build", "build"]))
        logs = [e.user_message for e in instance.all_logs(event.run_id)]
    assert f"build: task t2: {gone}" in logs
    assert not [p for p in psutil.process_iter(["cmdline"])
                if "sleep 600" in " ".join(p.info["cmdline"] or [])]
    assert ours(root, str(tmp_path / "workers")) == []
