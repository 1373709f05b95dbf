"""Exclusive `flock`s on files under the harness root, standard library only: a command takes
its lock before it imports anything heavy, so a losing second writer answers at once.

Taking a lock never writes: the lock file is created once, empty, and a command that fails
under it leaves the tree byte-identical.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from specops_dag.errors import StateError, WriteConflict


@contextlib.contextmanager
def held(path: Path, what: str, timeout_s: float, root: Path) -> Iterator[None]:
    """Hold an exclusive flock on `path` (waiting up to `timeout_s`), or raise WriteConflict
    naming `what` and the holder's pid; a folder where the lock file belongs is a StateError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    except IsADirectoryError:
        rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
        raise StateError(f"{rel} is a folder, not the lock file specops takes; if no specops "
                         f"command is running, remove it (`rm -r {path}`) and retry; nothing "
                         "was changed") from None
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise WriteConflict(
                        f"write conflict: {what} is being written by another process (pid "
                        f"{lock_holder(fd) or '?'}); nothing was changed, retry when it "
                        "finishes") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


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
