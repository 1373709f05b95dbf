from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from specops_dag import process
from specops_dag.errors import ToolMissing
from specops_dag.process import run_process

from .support.processes import SPAWNER


def test_output_goes_to_files_and_the_exit_code_is_kept(tmp_path: Path) -> None:
    result = run_process([sys.executable, "-c", "import sys; print('x' * 300000); "
                          "print('err', file=sys.stderr); sys.exit(3)"],
                         cwd=tmp_path, deadline_s=30, stdout_path=tmp_path / "out.log",
                         stderr_path=tmp_path / "err.log")
    assert (result.exit_code, result.timed_out, result.ok) == (3, False, False)
    assert len(result.stdout) == 300001 and result.stderr == "err\n"
    assert (tmp_path / "out.log").stat().st_size == 300001


@pytest.mark.e2e
def test_a_deadline_kills_the_whole_tree_including_a_grandchild_in_its_own_session(
        tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    started = time.monotonic()
    result = run_process([sys.executable, "-c", SPAWNER, str(pid_file)], cwd=tmp_path,
                         deadline_s=2)
    assert result.timed_out and result.exit_code is None
    assert result.stdout == "spawned\n"
    assert time.monotonic() - started < 15
    assert gone(int(pid_file.read_text()), within_s=0)


def test_a_childs_exit_wakes_the_runner_through_its_pidfd_never_a_sleeping_wait(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    timeouts = []
    wait = subprocess.Popen.wait

    def spy(self, timeout=None):
        timeouts.append(timeout)
        return wait(self, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", spy)
    result = run_process(["sleep", "0.3"], cwd=tmp_path, deadline_s=30)
    assert (result.exit_code, result.ok) == (0, True)
    assert timeouts == [None]  # reaped once the pidfd said it ended; Popen never slept for it


def test_without_a_pidfd_the_exit_code_and_the_deadline_still_hold(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pidfd(pid: int, flags: int = 0) -> int:
        raise OSError(errno.ENOSYS, "Function not implemented")

    # the runner's `os` only: psutil, which kills the tree, keeps the real one
    monkeypatch.setattr(process, "os", SimpleNamespace(**{**vars(os), "pidfd_open": no_pidfd}))
    exited = run_process([sys.executable, "-c", "import sys; sys.exit(3)"], cwd=tmp_path,
                         deadline_s=30)
    assert (exited.exit_code, exited.timed_out) == (3, False)
    stuck = run_process(["sleep", "30"], cwd=tmp_path, deadline_s=1)
    assert (stuck.exit_code, stuck.timed_out) == (None, True)


def test_an_idle_child_is_killed_by_the_idle_watchdog(tmp_path: Path) -> None:
    result = run_process([sys.executable, "-c", "import time; print('hi', flush=True); "
                          "time.sleep(60)"], cwd=tmp_path, deadline_s=60, idle_timeout_s=1)
    assert (result.idle_timed_out, result.timed_out, result.exit_code) == (True, False, None)


def test_stdin_is_fed_then_closed(tmp_path: Path) -> None:
    result = run_process([sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"],
                         cwd=tmp_path, deadline_s=30, stdin_data=b"prompt")
    assert result.stdout == "PROMPT\n"


def test_a_missing_program_is_an_environment_error(tmp_path: Path) -> None:
    with pytest.raises(ToolMissing) as info:
        run_process(["no-such-tool-xyz", "--version"], cwd=tmp_path, deadline_s=5)
    assert info.value.message == (f"`no-such-tool-xyz` not found (cwd {tmp_path}); install it "
                                  "or fix the command")
    assert info.value.exit_code == 3


def test_a_working_folder_that_does_not_exist_is_named_not_taken_for_a_missing_program(
        tmp_path: Path) -> None:
    with pytest.raises(ToolMissing) as info:
        run_process(["git", "status"], cwd=tmp_path / "gone", deadline_s=5)
    assert info.value.message == (f"cannot run `git` in {tmp_path / 'gone'}: that folder does "
                                  "not exist")


@pytest.mark.e2e
def test_a_busy_child_is_not_killed_as_idle_and_its_exit_code_is_kept(tmp_path: Path) -> None:
    result = run_process([sys.executable, "-c", "import sys, time; print('start', flush=True); "
                          "time.sleep(2.5); sys.exit(4)"], cwd=tmp_path, deadline_s=30,
                         idle_timeout_s=0.5, busy=lambda: 0.0, busy_timeout_s=60)
    assert (result.exit_code, result.idle_timed_out, result.busy_timed_out) == (4, False, False)
    assert result.duration_s >= 2.5


@pytest.mark.e2e
def test_the_idle_timer_restarts_when_the_child_stops_being_busy(tmp_path: Path) -> None:
    flag = tmp_path / "busy"
    child = ("import pathlib, sys, time; flag = pathlib.Path(sys.argv[1]); flag.touch(); "
             "print('busy', flush=True); time.sleep(2); flag.unlink(); time.sleep(60)")
    result = run_process([sys.executable, "-c", child, str(flag)], cwd=tmp_path, deadline_s=30,
                         idle_timeout_s=1, busy=lambda: 0.0 if flag.exists() else None)
    assert (result.idle_timed_out, result.timed_out, result.exit_code) == (True, False, None)
    # 2 s busy without output, then 1 s idle counted from the last poll that saw it busy (a poll
    # is 0.1 s, so the kill may come up to one poll before 3 s)
    assert 2.8 <= result.duration_s < 10


@pytest.mark.e2e
def test_a_busy_child_is_still_killed_at_the_wall_deadline(tmp_path: Path) -> None:
    result = run_process([sys.executable, "-c", "import time; time.sleep(60)"], cwd=tmp_path,
                         deadline_s=2, idle_timeout_s=0.5, busy=lambda: 0.0, busy_timeout_s=60)
    assert (result.timed_out, result.idle_timed_out, result.busy_timed_out) == (True, False, False)
    assert result.exit_code is None and result.duration_s < 10


@pytest.mark.e2e
def test_a_child_busy_past_busy_timeout_s_is_killed_with_its_whole_tree(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    started = time.monotonic()
    result = run_process([sys.executable, "-c", SPAWNER, str(pid_file)], cwd=tmp_path,
                         deadline_s=60, idle_timeout_s=0.5,
                         busy=lambda: time.monotonic() - started, busy_timeout_s=1.5)
    assert (result.busy_timed_out, result.idle_timed_out, result.timed_out) == (True, False, False)
    assert (result.exit_code, result.ok, result.stopped) == (None, False, None)
    assert result.duration_s < 10
    assert gone(int(pid_file.read_text()), within_s=0)


def test_a_program_that_cannot_start_leaves_no_process_and_nothing_registered(
        tmp_path: Path) -> None:
    me = psutil.Process()
    process.REAPER_OF_PROCESS.ready()
    before = {c.pid for c in me.children(recursive=True)}
    with pytest.raises(ToolMissing):
        run_process([str(tmp_path / "no-such-tool")], cwd=tmp_path, deadline_s=5)
    left = [c for c in me.children(recursive=True) if c.pid not in before
            and c.status() != psutil.STATUS_ZOMBIE]
    assert (left, process.REAPER_OF_PROCESS.live) == ([], set())


def test_one_reaper_serves_every_child_of_a_process(tmp_path: Path) -> None:
    process.REAPER_OF_PROCESS.ready()
    reaper = process.REAPER_OF_PROCESS.proc.pid
    for _ in range(5):
        assert run_process(["true"], cwd=tmp_path, deadline_s=10).exit_code == 0
    reapers = [c.pid for c in psutil.Process().children()
               if c.status() != psutil.STATUS_ZOMBIE and "-I" in c.cmdline()]
    assert (reapers, process.REAPER_OF_PROCESS.live) == ([reaper], set())
    assert psutil.Process(reaper).environ() == {}  # no secret, no run's SPECOPS_ROOT


def test_what_a_child_left_in_its_session_is_ended_once_it_exited(tmp_path: Path) -> None:
    result = run_process(["sh", "-c", "sleep 60 & echo $!"], cwd=tmp_path, deadline_s=10)
    assert result.exit_code == 0
    assert gone(int(result.stdout), within_s=10)


# A process that starts two children the way a step worker does, forks a child of its own that
# outlives it, then waits to be killed: the first child's reaper died before the second started.
PARENT = """
import os, sys, time
from pathlib import Path
from specops_dag import process
out = Path(sys.argv[1])
first = process.Background(["sleep", "120"], cwd=out, deadline_s=120,
                           stdout_path=out / "a.out", stderr_path=out / "a.err")
process.REAPER_OF_PROCESS.proc.kill()
process.REAPER_OF_PROCESS.proc.wait()
second = process.Background(["sleep", "120"], cwd=out, deadline_s=120,
                            stdout_path=out / "b.out", stderr_path=out / "b.err")
forked = os.fork()
if forked == 0:
    time.sleep(120)
    os._exit(0)
(out / "pids").write_text(f"{first.pid} {second.pid} {forked}")
time.sleep(120)
"""


def test_a_killed_process_takes_its_children_along_though_its_reaper_was_replaced_and_it_forked(
        tmp_path: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path)],
                              stdin=subprocess.DEVNULL, start_new_session=True)
    until = time.monotonic() + 30
    while not (tmp_path / "pids").exists() and time.monotonic() < until:
        time.sleep(0.05)
    first, second, forked = map(int, (tmp_path / "pids").read_text().split())
    try:
        parent.kill()
        parent.wait()
        # the fork does not hold the pipe open; the new reaper was told of the first child too
        assert (gone(first, within_s=10), gone(second, within_s=10)) == (True, True)
        assert not gone(forked, within_s=0)
    finally:
        os.kill(forked, 9)


def gone(pid: int, within_s: float) -> bool:
    """Whether process `pid` has ended (or is a zombie) within `within_s` seconds."""
    until = time.monotonic() + within_s
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= until:
            return False
        time.sleep(0.05)


def test_a_child_is_spawned_without_a_preexec_hook_so_python_can_use_vfork(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    seen = []
    real = subprocess.Popen.__init__

    def record(self, *args, **kwargs):
        seen.append(kwargs.get("preexec_fn"))
        real(self, *args, **kwargs)

    process.REAPER_OF_PROCESS.ready()  # started with an earlier child, or now
    monkeypatch.setattr(subprocess.Popen, "__init__", record)
    assert run_process([sys.executable, "-c", "pass"], cwd=tmp_path, deadline_s=10).exit_code == 0
    assert seen == [None]  # the child (the reaper was already running)
