"""A private PostgreSQL server from Debian's binaries, started on 127.0.0.1 for one test and
stopped after it, and a DAGSTER_HOME whose dagster.yaml stores everything in it."""

from __future__ import annotations

import glob
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .processes import free_port

PG_BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"))


@contextmanager
def postgres_server() -> Iterator[str]:
    """A private cluster owned by the postgres user; yields a postgresql+psycopg2:// URL."""
    assert PG_BIN, "PostgreSQL server binaries are missing: apt-get install -y postgresql"
    bin_dir = Path(PG_BIN[-1])
    base = Path(tempfile.mkdtemp(prefix="specops-pg-", dir="/tmp"))
    base.chmod(0o755)
    shutil.chown(base, "postgres", "postgres")
    data, port = base / "data", free_port()
    as_pg = ["runuser", "-u", "postgres", "--"]
    subprocess.run([*as_pg, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres",
                    "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8"],
                   check=True, capture_output=True, timeout=120)
    subprocess.run([*as_pg, str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(base / "log"),
                    "-o", f"-p {port} -k {base} -c listen_addresses=127.0.0.1", "-w", "start"],
                   check=True, capture_output=True, timeout=120)
    try:
        subprocess.run([*as_pg, str(bin_dir / "psql"), "-h", str(base), "-p", str(port), "-U",
                        "postgres", "-v", "ON_ERROR_STOP=1",
                        "-c", "CREATE ROLE dagster LOGIN PASSWORD 'dagster_pw'",
                        "-c", "CREATE DATABASE dagster OWNER dagster"],
                       check=True, capture_output=True, timeout=60)
        yield f"postgresql+psycopg2://dagster:dagster_pw@127.0.0.1:{port}/dagster"
    finally:
        subprocess.run([*as_pg, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w",
                        "stop"], capture_output=True, timeout=120)
        shutil.rmtree(base, ignore_errors=True)


def use_postgres(home: Path, url: str) -> None:
    """Point the instance at DAGSTER_HOME `home` to the server at `url` for all its storage."""
    (home / "dagster.yaml").write_text(
        f"storage:\n  postgres:\n    postgres_url: {url}\n"
        "telemetry:\n  enabled: false\nnux:\n  enabled: false\n")
