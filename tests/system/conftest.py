"""Servers the system tests start for themselves: PostgreSQL and Redis (Debian's packages)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..support.broker import redis_server
from ..support.postgres import postgres_server


@pytest.fixture
def postgres() -> Iterator[str]:
    """A private PostgreSQL cluster on 127.0.0.1: its postgresql+psycopg2:// URL."""
    with postgres_server() as url:
        yield url


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[str]:
    """A private redis-server on 127.0.0.1: `redis://127.0.0.1:P` (add `/0`, `/1` for a db)."""
    with redis_server(tmp_path / "redis") as server:
        yield server.url
