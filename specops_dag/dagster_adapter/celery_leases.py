"""Which Celery step tasks started, and whether the worker running one is still there: shared by
the workers' app (`celery_tasks`) and the run that waits on them (`celery`). Both find the files
under the harness root, which every worker shares (docs/operations.md, "Workers on several
machines").

A worker that receives a step task's message writes `<id>.taken` (its main process's owner
record, leased for LEASE_S: the task starts within that, since a worker takes a message only for
an idle slot); a worker that starts a step task creates `<id>.started` once (the task id is then
spent: a copy Celery hands out again after its worker died runs nothing) and keeps a lease
`<id>.json` (the owner record of `locking.Lease`) while the step runs. The run judges that lease
with `locking.owner_alive`, as it judges a delivery's owners: a worker killed mid-step is seen
as gone, and its step fails instead of being waited on for ever."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from specops_dag.locking import LEASE_S, owner_alive, read_owner

TASKS = Path(".specops") / "celery"
# A spent task id is kept longer than a worker's broker keeps an unacknowledged message
# (cli/worker.py VISIBILITY_S, 7 days): until then a redelivered copy must find it.
KEEP_S = 8 * 24 * 3600.0


def started_path(root: Path, task_id: str) -> Path:
    return root / TASKS / f"{task_id}.started"


def lease_path(root: Path, task_id: str) -> Path:
    return root / TASKS / f"{task_id}.json"


def taken_path(root: Path, task_id: str) -> Path:
    return root / TASKS / f"{task_id}.taken"


def worker_gone(root: Path, task_id: str, now: float) -> str | None:
    """Why the worker that took or started task `task_id` cannot finish it, or None while it
    may: the task is queued, taken by a live worker, runs under a live lease, or has just ended
    (the worker touches `<id>.started` and drops the lease a moment before Celery stores the
    result: no lease and no result for longer than LEASE_S after that means the worker died in
    between)."""
    lease = read_owner(lease_path(root, task_id))
    if lease is not None:
        if owner_alive(lease, now):
            return None
        if lease.lease_until is not None and lease.host != socket.gethostname():
            return (f"its lease ({lease.named()}) ran out {now - lease.lease_until:.0f} s ago")
        return f"its process ({lease.named()}) has ended"
    try:
        since = started_path(root, task_id).stat().st_mtime
    except FileNotFoundError:
        taker = read_owner(taken_path(root, task_id))
        if taker is None or owner_alive(taker, now):
            return None  # queued, or on its way to the worker's pool
        return f"the worker that took it ({taker.named()}) ended before it started the step"
    if now - since > LEASE_S and not lease_path(root, task_id).exists():
        return f"its step ended {now - since:.0f} s ago and no result was stored"
    return None


def prune(root: Path, now: float | None = None) -> None:
    """Forget task ids spent more than KEEP_S ago (and leases no one renewed for as long)."""
    now = time.time() if now is None else now
    folder = root / TASKS
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        try:
            if now - path.stat().st_mtime > KEEP_S:
                path.unlink()
        except FileNotFoundError:
            pass

