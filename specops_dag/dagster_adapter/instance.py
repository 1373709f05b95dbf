"""Where the CLI meets a Dagster instance: the DAGSTER_HOME default, the delivery partition, and
`dagster job execute` as a child process (so CLI runs show in the UI like any other run).

Only `register_delivery` imports dagster, lazily: the rest stays importable by fast commands.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from specops_dag.process import ProcessResult, run_process

PARTITIONS = "delivery"
DAGSTER_YAML = """\
# Written by specops. Default storage: sqlite under this folder (Postgres: docs/operations.md).
telemetry:
  enabled: false
nux:
  enabled: false
"""


def resolve_dagster_home(root: Path, env: dict[str, str] | None = None) -> Path:
    """DAGSTER_HOME if set, else `<harness root>/.dagster_home`; created with a dagster.yaml."""
    env = os.environ if env is None else env
    home = Path(env.get("DAGSTER_HOME") or root / ".dagster_home").resolve()
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text(DAGSTER_YAML, encoding="utf-8")
    return home


def register_delivery(home: Path, delivery: str) -> None:
    """Add the delivery as a dynamic partition of the instance at `home` (idempotent)."""
    import dagster as dg

    os.environ["DAGSTER_HOME"] = str(home)
    with dg.DagsterInstance.get() as instance:
        if not instance.has_dynamic_partition(PARTITIONS, delivery):
            instance.add_dynamic_partitions(PARTITIONS, [delivery])


HOST_TAG = "specops/host"


def fail_orphaned_runs(home: Path, delivery: str) -> list[str]:
    """Mark failed the delivery's runs that Dagster still shows NOT_STARTED, STARTING or STARTED
    although the process that ran them is gone (a killed `dagster job execute` or run worker
    never reports its end). Called by `specops run` under the delivery's run lock. A run is
    judged by the pid of its first event, on this host: runs tagged with another host are left
    alone, and so are untagged runs of a non-SQLite instance (which may run anywhere) and
    untagged NOT_STARTED ones (another process may be about to start them). Returns the ids."""
    import socket

    import dagster as dg
    import psutil

    os.environ["DAGSTER_HOME"] = str(home)
    host = socket.gethostname()
    failed = []
    with dg.DagsterInstance.get() as instance:
        local = type(instance.run_storage).__name__.startswith("Sqlite")
        runs = instance.get_runs(filters=dg.RunsFilter(
            tags={"dagster/partition": delivery},
            statuses=[dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
                      dg.DagsterRunStatus.STARTED]))
        for run in runs:
            tagged = run.tags.get(HOST_TAG)
            if tagged != host and (tagged is not None or not local):
                continue
            if run.status == dg.DagsterRunStatus.NOT_STARTED and tagged != host:
                continue  # killed before it started: only our own runs (under the run lock)
            events = instance.all_logs(run.run_id)
            pids = [(e.dagster_event.pid, e.timestamp) for e in events
                    if e.dagster_event is not None and e.dagster_event.pid]
            if pids and _alive_since(*pids[0], psutil):
                continue
            instance.report_run_failed(run, f"specops: the process that ran this run "
                                       f"(pid {pids[0][0] if pids else 'unknown'}) is gone; "
                                       f"marked failed by the next `specops run {delivery}`")
            failed.append(run.run_id)
    return failed


def _alive_since(pid: int, stamp: float, psutil) -> bool:
    """Whether `pid` is a live process started no later than `stamp` (not a reused pid)."""
    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE and proc.create_time() <= stamp + 1
    except psutil.NoSuchProcess:
        return False


def report_reopened(home: Path, workflow: str, delivery: str, nodes: list[str],
                    reason: str) -> None:
    """A runless failed `handoff_current` check per reopened (asset, partition), so the UI shows
    what was invalidated and why (OSS Dagster cannot wipe a single partition)."""
    import dagster as dg

    os.environ["DAGSTER_HOME"] = str(home)
    with dg.DagsterInstance.get() as instance:
        for node in nodes:
            forget_runless_check(instance, dg.AssetKey([workflow, node]), "handoff_current",
                                 delivery)
            instance.report_runless_asset_event(dg.AssetCheckEvaluation(
                asset_key=dg.AssetKey([workflow, node]), check_name="handoff_current",
                passed=False, partition=delivery, severity=dg.AssetCheckSeverity.WARN,
                description=f"reopened: {reason}",
                metadata={"reason": reason, "delivery": delivery, "reopened": True}))


def forget_runless_check(instance, key, check: str, partition: str) -> None:
    """Drop the execution row of an earlier runless evaluation of `check` on `key`'s `partition`.
    Dagster (1.13) keeps one row per (asset, check, run, partition) and a runless evaluation's run
    is "": a second one for the same partition — a node reopened again after its re-run — fails
    with an IntegrityError after its event is stored. Without the old row the new evaluation is
    the check's latest; the earlier one stays in the event log."""
    from dagster._core.storage.event_log.schema import AssetCheckExecutionsTable

    connect = getattr(instance.event_log_storage, "index_connection", None)
    if connect is None:  # not a SQL event log: nothing of this kind to forget
        return
    table = AssetCheckExecutionsTable.c
    with connect() as conn:
        conn.execute(AssetCheckExecutionsTable.delete()  # each `where` is ANDed to the others
                     .where(table.asset_key == key.to_string()).where(table.check_name == check)
                     .where(table.run_id == "").where(table.partition == partition))


def job_name(workflow: str) -> str:
    return f"{workflow.replace('-', '_')}_job"


def job_execute_argv(workflow: str, delivery: str, config: Path | None = None) -> list[str]:
    import socket

    tags = {"dagster/partition": delivery, HOST_TAG: socket.gethostname()}
    argv = [str(Path(sys.executable).parent / "dagster"), "job", "execute",
            "-m", "specops_dag.definitions", "-j", job_name(workflow),
            "--tags", json.dumps(tags)]
    return argv + (["-c", str(config)] if config else [])


def execute_job(root: Path, home: Path, workflow: str, delivery: str, executor: str,
                deadline_s: float, log_dir: Path) -> ProcessResult:
    """Run the workflow's job for one delivery through the real `dagster job execute`."""
    log_dir.mkdir(parents=True, exist_ok=True)
    config = log_dir / "run_config.yaml"
    config.write_text(f"execution:\n  config:\n    {executor}: {{}}\n", encoding="utf-8")
    env = {**os.environ, "DAGSTER_HOME": str(home), "SPECOPS_ROOT": str(root.resolve()),
           "SPECOPS_SNAPSHOT_OF": delivery}  # the run's code is the delivery's snapshot
    return run_process(job_execute_argv(workflow, delivery, config), cwd=root, env=env,
                       deadline_s=deadline_s, stdout_path=log_dir / "dagster-run.out",
                       stderr_path=log_dir / "dagster-run.err")
