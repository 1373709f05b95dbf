"""A fan-out step that can offer its tasks to other processes (on a Celery worker: the other
workers, issue #45 item 1) runs one task itself and offers the rest; whichever process claims a
task in the delivery state runs it and is recorded as where it ran. A task whose process is
killed mid-session is pending again with that session spent, and an offer no process takes runs
in the step's own process. Here the "other process" is a plain Python process started per
offer; tests/system/test_celery.py does the same with real Celery workers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from specops_dag.agent.codex import AgentSettings
from specops_dag.delivery.queries import render_status, status_report
from specops_dag.execution import fanout
from specops_dag.execution.fanout import run_offered_task
from specops_dag.execution.step import run_step

from ..support.agents import attempts, replay
from ..support.broker import kill_trees
from ..support.fanout import TWO, harness, writes

pytestmark = pytest.mark.e2e

TAKE = ("import sys; from specops_dag.agent.codex import AgentSettings; "
        "from specops_dag.delivery.store import Store; "
        "from specops_dag.execution.fanout import run_offered_task; "
        "print(run_offered_task(Store(sys.argv[1]), *sys.argv[2:5], "
        "AgentSettings(replay_url=sys.argv[5], codex_home=sys.argv[6]), print), flush=True)")


class Takers:
    """`dispatch` for a test: each offer starts one Python process that takes the task
    (`run_offered_task`), its output in `<tmp>/taker-<n>.log`."""

    def __init__(self, root: Path, settings: AgentSettings, logs: Path) -> None:
        self.root, self.settings, self.logs = root, settings, logs
        self.procs: list[subprocess.Popen] = []

    def __call__(self, delivery: str, node: str, task: str) -> None:
        with (self.logs / f"taker-{len(self.procs) + 1}.log").open("wb") as log:
            self.procs.append(subprocess.Popen(
                [sys.executable, "-c", TAKE, str(self.root), delivery, node, task,
                 str(self.settings.replay_url), str(self.settings.codex_home)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))

    def output(self, n: int) -> str:
        return (self.logs / f"taker-{n}.log").read_text()

    def end(self) -> None:
        kill_trees(self.procs)


def sleeping(pid: int) -> bool:
    """Is a `sleep 600` (the hanging session's command) in the process tree of `pid`?"""
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if "sleep 600" in " ".join(child.cmdline()):
                return True
        except psutil.Error:  # ended (or a zombie) while we looked
            pass
    return False


def settings_for(server: object, tmp_path: Path) -> AgentSettings:
    return AgentSettings(replay_url=server.url,  # type: ignore[attr-defined]
                         codex_home=str(tmp_path / "codex-home"))


def test_a_fan_out_step_runs_one_task_itself_and_another_process_takes_the_one_it_offers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fanout, "GRACE_S", 120.0)  # the taker has all the time it needs
    store = harness(tmp_path, TWO)
    assert run_step(store, "d1", "plan").status == "completed"
    events: list[str] = []
    with replay(tmp_path, {"build.t1": [writes("t1")], "build.t2": [writes("t2")]}) as server:
        settings = settings_for(server, tmp_path)
        takers = Takers(store.root, settings, tmp_path)
        try:
            outcome = run_step(store, "d1", "build", settings=settings, progress=events.append,
                               dispatch=takers)
        finally:
            takers.end()
    assert outcome.status == "completed", outcome.message
    [taker] = takers.procs
    build = store.read("d1").get_step("build")
    host = socket.gethostname()
    assert [(t.id, t.status, t.attempts, t.owner) for t in build.tasks] == [
        ("t1", "merged", 1, None), ("t2", "merged", 1, None)]
    assert [(t.ran_on.host, t.ran_on.pid, t.ran_on.worker) for t in build.tasks] == [
        (host, os.getpid(), None), (host, taker.pid, None)]
    assert "build: task t2: offered to the other workers" in events
    assert f"build: task t2: taken by process {taker.pid} on host {host}" in events
    assert "build: task t2: merged" in " ".join(events)
    assert takers.output(1).splitlines()[-1] == "task `t2` of `build` in `d1`: built"
    assert [len(attempts(tmp_path, f"build.{t}")) for t in ("t1", "t2")] == [1, 1]
    report = status_report(store.root, store.read("d1"))
    assert [t["ran_on"] for t in report["tasks"]["build"]] == [
        {"host": host, "pid": os.getpid(), "worker": None},
        {"host": host, "pid": taker.pid, "worker": None}]
    # an offer that comes late (a broker's copy, say) runs nothing
    assert run_offered_task(store, "d1", "build", "t2", settings, events.append) == (
        "task `t2` of `build` in `d1` not run here: node `build` is `completed`")


def test_a_task_whose_process_is_killed_mid_session_runs_again_with_that_session_spent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fanout, "GRACE_S", 120.0)
    store = harness(tmp_path, TWO)
    assert run_step(store, "d1", "plan").status == "completed"
    hang = [{"shell": "sleep 600", "sleep_s": 0}, {"hang": True}]
    events: list[str] = []
    with replay(tmp_path, {"build.t1": [writes("t1")],
                           "build.t2": [hang, writes("t2")]}) as server:
        settings = settings_for(server, tmp_path)
        takers = Takers(store.root, settings, tmp_path)
        killed: list[int] = []

        def kill_the_first_taker_mid_session() -> None:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                tasks = store.read("d1").get_step("build").tasks
                if tasks and tasks[1].status == "running" and takers.procs and sleeping(
                        takers.procs[0].pid):
                    killed.append(takers.procs[0].pid)
                    kill_trees(takers.procs[:1])
                    return
                time.sleep(0.2)

        killer = threading.Thread(target=kill_the_first_taker_mid_session)
        killer.start()
        try:
            outcome = run_step(store, "d1", "build", settings=settings, progress=events.append,
                               dispatch=takers)
        finally:
            killer.join()
            takers.end()
    assert outcome.status == "completed", outcome.message
    [first] = killed
    assert takers.procs[0].pid == first
    state = store.read("d1")
    build = state.get_step("build")
    host = socket.gethostname()
    assert [(t.id, t.status, t.attempts) for t in build.tasks] == [
        ("t1", "merged", 1), ("t2", "merged", 2)]
    # the second session ran in the step's process, or in a process of a second offer
    assert build.tasks[1].ran_on.pid in {os.getpid(), *(p.pid for p in takers.procs[1:])}
    gone = f" (process {first} on host {host} is gone)"
    assert f"build: task t2: its session was interrupted{gone}; the call is spent" in events
    assert [e.detail for e in state.history if e.event == "task interrupted"] == [
        f"t2 attempt 1{gone}"]
    prompt = (store.delivery_dir("d1") / "build/tasks/t2/session2-prompt.md").read_text()
    assert f"# Previous attempt failed\n\nthe session was interrupted{gone}" in prompt
    assert len(attempts(tmp_path, "build.t2")) == 2
    assert not [p for p in psutil.process_iter(["cmdline"])
                if "sleep 600" in " ".join(p.info["cmdline"] or [])]
    shown = render_status(state, status_report(store.root, state))
    assert "         t2               merged   attempt 2" in shown


def test_an_offered_task_no_process_takes_runs_in_the_step_process_after_the_grace_period(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fanout, "GRACE_S", 1.0)
    store = harness(tmp_path, TWO)
    assert run_step(store, "d1", "plan").status == "completed"
    offers: list[tuple[str, str, str]] = []
    events: list[str] = []
    with replay(tmp_path, {"build.t1": [writes("t1")], "build.t2": [writes("t2")]}) as server:
        outcome = run_step(store, "d1", "build", settings=settings_for(server, tmp_path),
                           progress=events.append,
                           dispatch=lambda *offer: offers.append(offer))
    assert outcome.status == "completed", outcome.message
    assert offers == [("d1", "build", "t2")]
    assert ("build: task t2: no worker took it in 1 s; it runs in the step's own process"
            in events)
    build = store.read("d1").get_step("build")
    assert [(t.id, t.status, t.ran_on.pid) for t in build.tasks] == [
        ("t1", "merged", os.getpid()), ("t2", "merged", os.getpid())]
