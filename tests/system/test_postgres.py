"""Dagster on a real PostgreSQL server (Debian's package, started here on 127.0.0.1): a delivery
runs end to end with the multiprocess executor; runs, materializations and dynamic partitions
are stored in Postgres."""

from __future__ import annotations

import os
from pathlib import Path

import psycopg2
import pytest

from specops_dag.delivery.store import Store

from ..support.cli import specops
from ..support.postgres import use_postgres

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


def test_a_delivery_runs_end_to_end_on_postgres_backed_dagster(
        diamond_root: Path, clean_env: dict[str, str], postgres: str) -> None:
    use_postgres(Path(clean_env["DAGSTER_HOME"]), postgres)
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
