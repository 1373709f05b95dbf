"""Dagster on a real PostgreSQL server (Debian's package, started here on 127.0.0.1): a delivery
runs end to end with the multiprocess executor; runs, materializations and dynamic partitions
are stored in Postgres."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg2
import pytest

from specops_dag.delivery.store import Store

from ..support.cli import specops
from ..support.processes import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

PG_BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"))


@pytest.fixture
def postgres() -> Iterator[str]:
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


def test_a_delivery_runs_end_to_end_on_postgres_backed_dagster(
        diamond_root: Path, clean_env: dict[str, str], postgres: str) -> None:
    home = Path(clean_env["DAGSTER_HOME"])
    (home / "dagster.yaml").write_text(
        f"storage:\n  postgres:\n    postgres_url: {postgres}\n"
        "telemetry:\n  enabled: false\nnux:\n  enabled: false\n")
    env = {**clean_env, "CALLS": os.devnull}
    assert specops(env, diamond_root, "new", "diamond", "d1", "--request", "x").returncode == 0
    run = specops(env, diamond_root, "run", "d1", "--executor", "multiprocess")
    assert run.returncode == 0, run.stderr
    assert Store(diamond_root).read("d1").status == "completed"
    dsn = postgres.replace("postgresql+psycopg2://", "postgresql://")
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("select pipeline_name, status, partition from runs")
        assert cur.fetchall() == [("diamond_job", "SUCCESS", "d1")]
        cur.execute("select asset_key, partition from event_logs where "
                    "dagster_event_type = 'ASSET_MATERIALIZATION' order by id")
        rows = cur.fetchall()
        assert sorted(k for k, _ in rows) == sorted(
            f'["diamond", "{n}"]' for n in "abcd")
        assert {p for _, p in rows} == {"d1"}
        cur.execute("select partition from dynamic_partitions where partitions_def_name = "
                    "'delivery'")
        assert cur.fetchall() == [("d1",)]
        cur.execute("select count(*) from event_logs where dagster_event_type = "
                    "'ASSET_CHECK_EVALUATION'")
        assert cur.fetchone()[0] >= 8  # validation + handoff_current per node
