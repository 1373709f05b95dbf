"""The one place child processes start (STYLE: one subprocess choke point).

`run_process` takes argv as a list (never a shell), a wall deadline, an optional idle deadline
(suspended while the child reports an operation running) with a cap per operation, writes output
to files (never pipes that can fill up) and kills the whole process tree on expiry: descendants
are snapshotted first because tools may start their own sessions. `Background` starts a child
the same way for a caller that talks to it while it runs (an application under QA).

No child outlives us however we end (issue #22): each child starts in its own session, and the
process's one reaper (`REAPER`, a small process in a session of its own, started with the first
child and kept) is told of each child's session as soon as it exists, and again when it ended.
The reaper ends what a child left in its session once the child ended, and every session still
running once we exit or are killed (its pipe closes). Children start without a `preexec_fn`
(so Python spawns them with vfork, not fork: a fork copies the page tables of a step worker that
grows along a long run and makes each page it writes next fault once). A Dagster multiprocess
step worker also ends itself when the run process that started it is gone (`end_with_run`).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from specops_dag.errors import ToolMissing

KILL_GRACE_S = 2.0
POLL_S = 0.1  # how often a running child's limits are looked at


# Run by `python -I -S -c REAPER <fd> <grace>`, once per process that starts children (`Reaper`):
# it reads lines from a pipe only that process writes to — `+<sid>` when a child started in
# session <sid>, `-<sid>` when it ended — and ends what is left of a session when its child ended:
# SIGTERM to every process of the session and their descendants, SIGKILL after the grace to
# whatever is still there. When the pipe closes (the process exited or was killed: the kernel
# closes its end) it ends every session still registered the same way, then exits.
REAPER = r"""
import os, select, signal, sys, time
fd, grace = int(sys.argv[1]), float(sys.argv[2])
live, ending, pending = set(), {}, b""

def members(sids):
    parents, found = {}, set()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == b"Z":
            continue
        parents[int(name)] = int(fields[1])
        if int(fields[3]) in sids:
            found.add(int(name))
    grew = True
    while grew:
        more = {p for p, pp in parents.items() if pp in found} - found
        found |= more
        grew = bool(more)
    return found

def send(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass

watcher = select.poll()
watcher.register(fd, select.POLLIN)
while True:
    due = min(ending.values(), default=None)
    if not due or watcher.poll(max(0.0, due - time.monotonic()) * 1000):
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            chunk = b""
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            if not line[1:].isdigit():
                continue
            sid = int(line[1:])
            if line[:1] == b"+":
                live.add(sid)
                ending.pop(sid, None)
            elif line[:1] == b"-" and sid in live:
                live.discard(sid)
                victims = members({sid})
                if victims:
                    send(victims, signal.SIGTERM)
                    ending[sid] = time.monotonic() + grace
    now = time.monotonic()
    for sid in [s for s, t in ending.items() if t <= now]:
        del ending[sid]
        send(members({sid}), signal.SIGKILL)
sids = live | set(ending)
for sig in (signal.SIGTERM, signal.SIGKILL):
    victims = members(sids) if sids else set()
    if not victims:
        break
    send(victims, sig)
    until = time.monotonic() + grace
    while members(sids) and time.monotonic() < until:
        time.sleep(0.05)
"""


class Reaper:
    """This process's one reaper (`REAPER`), started with its first child and kept while the
    process lives: telling it of a child is a write to a pipe, not a process start. It runs in a
    session of its own, so a kill of our group does not reach it before it has done its work. A
    forked child of this process (a Dagster step worker) never keeps our end of the pipe, which
    would keep the reaper from seeing our death: `os.register_at_fork` closes it there, and the
    child starts its own reaper with its own first child. A reaper that died is replaced and
    told again of every child still running."""

    def __init__(self) -> None:
        import threading

        self.lock = threading.Lock()
        self.fd: int | None = None
        self.proc: subprocess.Popen | None = None
        self.live: set[int] = set()

    def ready(self) -> None:
        """Start the reaper unless it runs: before a child is started, so none runs unwatched."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self._start()

    def watch(self, sid: int) -> None:
        """The child that leads session `sid` started: its session ends with us."""
        with self.lock:
            self.live.add(sid)
            self._send(b"+%d\n" % sid)

    def release(self, sid: int) -> None:
        """The child that led session `sid` ended: what it left in its session ends now."""
        with self.lock:
            if sid in self.live:
                self.live.discard(sid)
                self._send(b"-%d\n" % sid)

    def _send(self, line: bytes) -> None:
        for _ in range(2):
            if self.fd is not None and self.proc is not None and self.proc.poll() is None:
                try:
                    os.write(self.fd, line)
                    return
                except BrokenPipeError:
                    pass
            self._start()  # it died: a new one, told of every child still running
        raise OSError(f"the process reaper of pid {os.getpid()} could not be started")

    def _start(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        read, write = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", REAPER, str(read), str(KILL_GRACE_S)],
                pass_fds=(read,), start_new_session=True, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/",
                env={})  # it needs nothing of ours: not a secret, not a run's SPECOPS_ROOT
        except BaseException:
            os.close(write)
            raise
        finally:
            os.close(read)
        self.fd = write
        if self.live:
            os.write(write, b"".join(b"+%d\n" % sid for sid in sorted(self.live)))

    def forget(self) -> None:
        """In a forked child: our parent's reaper is not ours (its pipe's end closed here)."""
        import threading

        if self.fd is not None:
            os.close(self.fd)
        self.lock = threading.Lock()
        self.fd, self.proc, self.live = None, None, set()


REAPER_OF_PROCESS = Reaper()
os.register_at_fork(after_in_child=REAPER_OF_PROCESS.forget)


def end_with_run() -> None:
    """In a Dagster multiprocess step worker: SIGKILL this worker once the run process that
    started it is gone (a killed `dagster job execute`), so the reapers of its children end
    their trees within seconds. An in-process step needs nothing: it dies with the run."""
    import multiprocessing

    global _WATCHING
    parent = multiprocessing.parent_process()
    if parent is None or _WATCHING:
        return
    import threading

    import psutil

    try:
        run = psutil.Process(parent.pid)
    except psutil.NoSuchProcess:
        os.kill(os.getpid(), signal.SIGKILL)
        return

    def watch() -> None:
        try:
            while run.is_running() and run.status() != psutil.STATUS_ZOMBIE:
                time.sleep(0.5)
        except psutil.NoSuchProcess:
            pass
        os.kill(os.getpid(), signal.SIGKILL)

    _WATCHING = True
    threading.Thread(target=watch, name="specops-end-with-run", daemon=True).start()


_WATCHING = False


def _watched_spawn(argv: list[str], cwd: Path, env: dict[str, str] | None, fout, ferr,
                   piped: bool = False) -> subprocess.Popen:
    """The child started with the process's reaper already running, and registered with it
    (`REAPER_OF_PROCESS.release(proc.pid)` once it ended)."""
    REAPER_OF_PROCESS.ready()
    proc = _spawn(argv, cwd, env, fout, ferr, piped)
    REAPER_OF_PROCESS.watch(proc.pid)
    return proc


@dataclass(frozen=True)
class ProcessResult:
    argv: tuple[str, ...]
    exit_code: int | None
    timed_out: bool
    idle_timed_out: bool
    duration_s: float
    stdout: str
    stderr: str
    stopped: str | None = None  # why a `watch` callback ended the process early
    busy_timed_out: bool = False  # one operation `busy` reported ran past `busy_timeout_s`

    @property
    def ok(self) -> bool:
        return (self.exit_code == 0 and not self.timed_out and not self.idle_timed_out
                and self.stopped is None and not self.busy_timed_out)


@dataclass(frozen=True)
class _Limits:
    deadline_s: float
    idle_timeout_s: float | None
    busy_timeout_s: float | None


def run_process(
    argv: list[str],
    *,
    cwd: Path,
    deadline_s: float,
    env: dict[str, str] | None = None,
    stdin_data: bytes | None = None,
    idle_timeout_s: float | None = None,
    stdout_path: Path | None = None,
    stderr_path: Path | None = None,
    watch: Callable[[], str | None] | None = None,
    busy: Callable[[], float | None] | None = None,
    busy_timeout_s: float | None = None,
    errors: str = "replace",
) -> ProcessResult:
    """Run argv to completion or until a deadline; the tree is killed on expiry.

    `idle_timeout_s` kills it when stdout has not grown for that long; `watch` is called at every
    poll and kills it when it returns a reason (e.g. a tool stuck in a retry loop). `busy` is
    called at every poll and answers how long the child's oldest unfinished operation has been
    running (None: none is), e.g. a command of an agent that prints nothing meanwhile: while one
    runs the idle timer is suspended (it restarts when the last one ends), and one running longer
    than `busy_timeout_s` kills the tree (`busy_timed_out`). The wall deadline always applies.
    `errors`: how output that is not UTF-8 is decoded (`surrogateescape` keeps its bytes)."""
    if not argv or not all(isinstance(a, str) for a in argv):
        raise TypeError("argv must be a non-empty list of strings")
    with tempfile.TemporaryDirectory(prefix="specops-proc-") as scratch:
        out = stdout_path or Path(scratch) / "stdout"
        err = stderr_path or Path(scratch) / "stderr"
        out.parent.mkdir(parents=True, exist_ok=True)
        err.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with open(out, "wb") as fout, open(err, "wb") as ferr:
            proc = _watched_spawn(argv, cwd, env, fout, ferr, piped=stdin_data is not None)
            try:
                if stdin_data is not None:
                    _feed(proc, stdin_data)
                limits = _Limits(deadline_s, idle_timeout_s, busy_timeout_s)
                why, stopped = _wait(proc, started, limits, out, watch, busy)
            finally:
                REAPER_OF_PROCESS.release(proc.pid)  # what it left in its session ends now
        return ProcessResult(
            argv=tuple(argv), exit_code=proc.returncode if why == "exited" else None,
            stopped=stopped, timed_out=why == "deadline", idle_timed_out=why == "idle",
            busy_timed_out=why == "busy",
            duration_s=round(time.monotonic() - started, 3),
            stdout=out.read_text(encoding="utf-8", errors=errors),
            stderr=err.read_text(encoding="utf-8", errors=errors))


def _spawn(argv: list[str], cwd: Path, env: dict[str, str] | None, fout, ferr,
           piped: bool = False) -> subprocess.Popen:
    """The one Popen: argv list, own session, output to files (its reaper ends it with us)."""
    try:
        return subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=fout, stderr=ferr,
            stdin=subprocess.PIPE if piped else subprocess.DEVNULL,
            start_new_session=True)
    except FileNotFoundError as e:
        if not os.path.isdir(cwd):
            raise ToolMissing(f"cannot run `{argv[0]}` in {cwd}: that folder does not exist"
                              ) from e
        raise ToolMissing(f"`{argv[0]}` not found (cwd {cwd}); install it or fix "
                          "the command") from e
    except PermissionError as e:
        raise ToolMissing(f"`{argv[0]}` is not executable: {e}") from e


class Background:
    """A child that runs while the caller talks to it (an application under QA): started like
    every `run_process` child, its output in files, and its whole tree killed by `stop()`, by
    leaving the `with` block, or by its own wall deadline, whichever comes first."""

    def __init__(self, argv: list[str], *, cwd: Path, deadline_s: float, stdout_path: Path,
                 stderr_path: Path, env: dict[str, str] | None = None) -> None:
        import threading

        if not argv or not all(isinstance(a, str) for a in argv):
            raise TypeError("argv must be a non-empty list of strings")
        self.argv, self.deadline_s = tuple(argv), deadline_s
        self.stdout_path, self.stderr_path = stdout_path, stderr_path
        stdout_path.parent.mkdir(parents=True, exist_ok=True)
        stderr_path.parent.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()
        with open(stdout_path, "wb") as fout, open(stderr_path, "wb") as ferr:
            self.proc = _watched_spawn(argv, cwd, env, fout, ferr)
        self.timed_out = False
        self._lock = threading.Lock()
        self._result: ProcessResult | None = None
        self._timer = threading.Timer(deadline_s, self._expire)
        self._timer.daemon = True
        self._timer.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        """The exit code once the child has exited by itself, else None (also once killed:
        the kill reaps it, so no exit code of its own is known)."""
        code = self.proc.poll()
        return None if self.timed_out else code

    def stdout(self) -> str:
        return self.stdout_path.read_text(encoding="utf-8", errors="replace")

    def _expire(self) -> None:
        with self._lock:
            if self.proc.poll() is None:
                self.timed_out = True
                kill_tree(self.proc.pid)
                self.proc.wait()

    def stop(self) -> ProcessResult:
        """Kill the whole tree if it still runs (a server never ends by itself); idempotent."""
        self._timer.cancel()
        with self._lock:
            if self._result is None:
                code = self.poll()
                kill_tree(self.proc.pid)  # descendants too, even when the leader has exited
                self.proc.wait()
                REAPER_OF_PROCESS.release(self.proc.pid)
                self._result = ProcessResult(
                    argv=self.argv, exit_code=code, timed_out=self.timed_out,
                    idle_timed_out=False, duration_s=round(time.monotonic() - self.started, 3),
                    stdout=self.stdout(),
                    stderr=self.stderr_path.read_text(encoding="utf-8", errors="replace"))
            return self._result

    def __enter__(self) -> Background:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _feed(proc: subprocess.Popen, data: bytes) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(data)
    except BrokenPipeError:
        pass
    finally:
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass


def _wait(proc: subprocess.Popen, started: float, limits: _Limits, out: Path,
          watch: Callable[[], str | None] | None, busy: Callable[[], float | None] | None
          ) -> tuple[str, str | None]:
    """Wait until the child exits ("exited") or is killed: "deadline", "busy", "idle", or
    "stopped" with the watch's reason. The limits are looked at every `POLL_S`; the exit is
    seen as it happens (`_Exit`: the child's pidfd wakes `poll`). `Popen.wait(timeout)` sleeps
    in steps that double up to 50 ms: an ended child was seen up to ~35 ms late, and a child a
    few ms slower could cost a step that much more."""
    last_size, last_change = -1, time.monotonic()
    exited = _Exit(proc)
    try:
        while True:
            if exited.within(POLL_S):
                return "exited", None
            now = time.monotonic()
            busy_for = busy() if busy is not None else None
            verdict: tuple[str, str | None] | None = None
            if now - started >= limits.deadline_s:
                verdict = ("deadline", None)
            elif (busy_for is not None and limits.busy_timeout_s is not None
                  and busy_for >= limits.busy_timeout_s):
                verdict = ("busy", None)
            elif limits.idle_timeout_s is not None:
                size = out.stat().st_size if out.exists() else 0
                if size != last_size or busy_for is not None:
                    last_size, last_change = size, now
                elif now - last_change >= limits.idle_timeout_s:
                    verdict = ("idle", None)
            if verdict is None and watch is not None and (reason := watch()):
                verdict = ("stopped", reason)
            if verdict is not None:
                kill_tree(proc.pid)
                proc.wait()
                return verdict
    finally:
        exited.close()


class _Exit:
    """A child's exit as an event: its pidfd, readable once it has ended, polled (not
    `select.select`: a step worker may hold fds past 1024). Where the kernel has no pidfd
    (Linux before 5.3, or a sandbox that forbids `pidfd_open`), `Popen.wait(timeout)` instead:
    the same answer, seen up to ~35 ms late."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc, self.fd = proc, None
        try:
            self.fd = os.pidfd_open(proc.pid)
        except OSError:
            return
        self.poll = select.poll()
        self.poll.register(self.fd, select.POLLIN)

    def within(self, seconds: float) -> bool:
        """Has the child exited (it is then reaped)? Waits up to `seconds` for it."""
        if self.fd is not None:
            if not self.poll.poll(seconds * 1000):
                return False
            self.proc.wait()
            return True
        try:
            self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return False
        return True

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)


def kill_tree(pid: int) -> None:
    """SIGTERM the process, its group and every descendant (snapshotted first), then SIGKILL."""
    import psutil  # loads on first use: the code location and fast commands skip it

    try:
        root = psutil.Process(pid)
        victims = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:  # the leader is gone: what is left of its group goes too
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.2)
        return
    try:
        os.killpg(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    for p in victims:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(victims, timeout=KILL_GRACE_S)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=KILL_GRACE_S)
