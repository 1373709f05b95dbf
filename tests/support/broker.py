"""A Celery broker for one test: Debian's `redis-server` on a free port of 127.0.0.1, without
persistence, killed by its pid after the test."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .processes import free_port

REDIS_SERVER = Path("/usr/bin/redis-server")
START_S = 30.0


@contextmanager
def redis_server(folder: Path) -> Iterator[str]:
    """Yields the server's URL without a database number (`redis://127.0.0.1:P`); its log is
    `folder/redis.log`."""
    assert REDIS_SERVER.exists(), "redis-server is missing: apt-get install -y redis-server"
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    with (folder / "redis.log").open("wb") as log:
        proc = subprocess.Popen([str(REDIS_SERVER), "--port", str(port), "--bind", "127.0.0.1",
                                 "--save", "", "--appendonly", "no", "--daemonize", "no",
                                 "--dir", str(folder)], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + START_S
        while True:
            assert proc.poll() is None, (folder / "redis.log").read_text()
            assert time.monotonic() < deadline, f"redis-server did not listen on {port} in time"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(timeout=10)
