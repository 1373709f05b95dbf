"""Exclusive `flock`s on files under the harness root, and who owns what: standard library only,
so a command takes its lock before it imports anything heavy and a losing second writer answers
at once.

Taking a lock never writes a state file: the lock file is created once, empty, and a command that
fails under it leaves the state byte-identical. A lock that marks ownership (a delivery's run
lock; a step's running claim) also has an owner record in `.owners/` beside it: host, pid, boot
id, the pid's start time and a lease its holder renews. `owner_alive` alone judges such a record:
on this host by its pid, on another by its lease.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from specops_dag.errors import StateError, WriteConflict
from specops_dag.files import write_json_atomic

LEASE_S = 60.0  # an owner on another host is alive while its lease is younger than this
RENEW_S = 15.0  # how often the holder renews it: three renewals may fail before it lapses
OWNERS = ".owners"  # in a delivery's folder: one record per run lock and per running step
# A pid's start time is whole clock ticks after a boot time counted in whole seconds: two
# readers may place it up to a second apart.
START_SLACK_S = 1.0


@dataclass(frozen=True)
class OwnerRecord:
    """A process that holds a lock or a claim, as another process judges it."""

    host: str
    pid: int
    boot_id: str | None  # /proc/sys/kernel/random/boot_id: the same host name rebooted differs
    started: float | None  # the pid's start time (epoch seconds): a reused pid differs
    lease_until: float | None = None  # epoch seconds; the holder moves it on every RENEW_S

    def same_process(self, other: OwnerRecord) -> bool:
        return (self.host, self.pid, self.boot_id, self.started) == (
            other.host, other.pid, other.boot_id, other.started)

    def named(self) -> str:
        """`pid N`, with `on host H` when H is not this host."""
        return f"pid {self.pid}" + ("" if self.host == socket.gethostname()
                                    else f" on host {self.host}")


@functools.cache
def boot_id() -> str | None:
    """This machine's boot id (new on every boot), None where Linux does not give one."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


@functools.cache
def boot_time() -> float:
    """When this machine booted (epoch seconds), as /proc/stat says and psutil reads it."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    raise OSError("/proc/stat has no btime line")


def process_started(pid: int) -> float | None:
    """When `pid` started (epoch seconds, as psutil's `create_time`); None when no such process
    runs here (a zombie has ended: only its exit status is left) or there is no /proc to ask."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        fields = stat[stat.rindex(b")") + 2:].split()  # the command name may hold spaces
        if fields[0] == b"Z":
            return None
        return boot_time() + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def pid_alive(pid: int, started: float | None) -> bool:
    """Is `pid` running on this host and, when `started` is known, still the process that
    started then (not a later one given the same pid)?"""
    now = process_started(pid)
    if now is None and not Path("/proc/self/stat").exists():  # not Linux: by the pid alone
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True
    return now is not None and (started is None or abs(now - started) < START_SLACK_S)


def this_process() -> OwnerRecord:
    """The calling process as an owner record, its lease not yet set."""
    pid = os.getpid()
    return OwnerRecord(socket.gethostname(), pid, boot_id(), process_started(pid))


def owner_alive(record: OwnerRecord | None, now: float) -> bool:
    """Is the owner `record` names still running? On this host (same name, same boot id) by its
    pid and that pid's start time; on this host name with another boot id, no (it rebooted); on
    another host, while its lease runs (`now` and the lease are epoch seconds: the hosts' clocks
    must agree to well within LEASE_S - RENEW_S)."""
    if record is None:
        return False
    if record.host != socket.gethostname():
        return record.lease_until is not None and now < record.lease_until
    if record.boot_id is not None and boot_id() is not None and record.boot_id != boot_id():
        return False
    return pid_alive(record.pid, record.started)


def read_owner(path: Path) -> OwnerRecord | None:
    """The owner record at `path`, or None when there is none. Records are written whole (temp
    file and rename), so one that does not parse was not written by specops: it names no one."""
    try:
        record = OwnerRecord(**json.loads(path.read_bytes()))
    except (OSError, ValueError, TypeError):
        return None
    times = (record.started, record.lease_until)
    if not (isinstance(record.host, str) and type(record.pid) is int
            and isinstance(record.boot_id, str | None)
            and all(isinstance(t, int | float | None) for t in times)):
        return None
    return record


class Lease:
    """This process's owner record at `path`, written now and renewed every RENEW_S by a daemon
    thread until `end`, which removes it. A renewal that finds the record names someone else
    stops: the claim was taken over (its owner was judged dead) and is not ours to extend."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.record = this_process()
        self.stop = threading.Event()
        self.renew()
        self.thread = threading.Thread(target=self.keep, name=f"lease {path}", daemon=True)
        self.thread.start()

    def renew(self) -> None:
        lease = dataclasses.replace(self.record, lease_until=time.time() + LEASE_S)
        write_json_atomic(self.path, dataclasses.asdict(lease))

    def keep(self) -> None:
        while not self.stop.wait(RENEW_S):
            current = read_owner(self.path)
            if current is None or not current.same_process(self.record):
                return
            with contextlib.suppress(OSError):  # a file system hiccup: the next round retries
                self.renew()

    def end(self) -> None:
        self.stop.set()
        self.thread.join()
        current = read_owner(self.path)
        if current is not None and current.same_process(self.record):
            self.path.unlink(missing_ok=True)


def owner_path(lock: Path) -> Path:
    """Where the owner record of the lock file `lock` goes: `.owners/<its name>.json`."""
    return lock.parent / OWNERS / f"{lock.name.lstrip('.')}.json"


@contextlib.contextmanager
def held(path: Path, what: str, timeout_s: float, root: Path,
         owned: bool = False) -> Iterator[Callable[[], None]]:
    """Hold an exclusive flock on `path` (waiting up to `timeout_s`), or raise WriteConflict
    naming `what` and the holder; a folder where the lock file belongs is a StateError.

    `owned`: the lock marks ownership (a run lock). Its owner record (`owner_path`) is kept while
    it is held and names the holder to a loser on another host, where /proc/locks cannot. A live
    record of another host found once the flock is ours is a conflict too: that host holds the
    lock through a file system whose flock does not reach here. The record is written when the
    holder calls what this yields (once it knows the command will go on), so a command refused
    under the lock still leaves the tree byte-identical."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    except IsADirectoryError:
        rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
        raise StateError(f"{rel} is a folder, not the lock file specops takes; if no specops "
                         f"command is running, remove it (`rm -r {path}`) and retry; nothing "
                         "was changed") from None
    lease: Lease | None = None

    def claim() -> None:
        nonlocal lease
        if owned and lease is None:
            lease = Lease(owner_path(path))

    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise conflict(what, holder(fd, path, owned)) from None
                time.sleep(0.05)
        if owned:
            other = read_owner(owner_path(path))
            if other is not None and other.host != socket.gethostname() and owner_alive(
                    other, time.time()):
                raise conflict(what, other.named())
        yield claim
    finally:
        if lease is not None:
            lease.end()  # before the flock goes: the next holder's record is never removed
        os.close(fd)  # closing the descriptor releases the flock


def conflict(what: str, who: str) -> WriteConflict:
    return WriteConflict(f"write conflict: {what} is being written by another process ({who}); "
                         "nothing was changed, retry when it finishes")


def holder(fd: int, path: Path, owned: bool) -> str:
    """Who holds the flock on `fd`: a pid of this host from /proc/locks, else the owner record's
    holder (another host's, whose locks this host's kernel does not list), else `pid ?`."""
    pid = lock_holder(fd)
    if pid is not None:
        return f"pid {pid}"
    other = read_owner(owner_path(path)) if owned else None
    return other.named() if other is not None else "pid ?"


def lock_holder(fd: int) -> int | None:
    """The pid holding a flock on the open file `fd`, from Linux's /proc/locks; None elsewhere
    or when no one holds it."""
    st = os.fstat(fd)
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > 5 and fields[1:3] == ["FLOCK", "ADVISORY"] and fields[5] == device:
            return int(fields[4])
    return None
