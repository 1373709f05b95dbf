"""Who owns a delivery's run lock and a running step when workers are on several machines (issue
#45, item 4): owner records with host, pid and boot id, the lease their holder renews, and the one
judgement of whether an owner is alive. Another host is a record written by hand, or a child
process whose host name is another one; the flock and the file system are this machine's."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from specops_dag import locking
from specops_dag.delivery import lifecycle as ops
from specops_dag.delivery import queries as reading
from specops_dag.delivery.model import Owner
from specops_dag.delivery.store import Store
from specops_dag.errors import WriteConflict
from specops_dag.execution.step import run_step
from specops_dag.locking import OwnerRecord, held, owner_alive, this_process

from ..support.harness import DIAMOND, SLEEP, command_phase, make_delivery, write_tree

BOOT_ID = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
HERE = socket.gethostname()
RUN_LOCK = "delivery `d1` (another `specops run`)"


def elsewhere(lease_s: float | None, pid: int = 4242) -> OwnerRecord:
    """An owner on host `worker-b` whose lease ends `lease_s` from now (None: never leased)."""
    return OwnerRecord("worker-b", pid, "b0075eed-0000-4000-8000-000000000000", 1.0e9,
                       None if lease_s is None else time.time() + lease_s)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_held_run_lock_has_an_owner_record_with_host_pid_boot_id_and_lease(
        tmp_path: Path) -> None:
    lock, record = tmp_path / "phases/d1/.run.lock", tmp_path / "phases/d1/.owners/run.lock.json"
    before = time.time()
    with held(lock, RUN_LOCK, 0, tmp_path, owned=True) as claim:
        assert not record.exists()  # nothing written before the holder goes on
        claim()
        data = json.loads(record.read_text())
        after = time.time()
    assert (data["host"], data["pid"], data["boot_id"]) == (HERE, os.getpid(), BOOT_ID)
    assert abs(data["started"] - psutil.Process().create_time()) < 0.01
    assert before + locking.LEASE_S <= data["lease_until"] <= after + locking.LEASE_S
    assert lock.read_bytes() == b""  # the lock file itself is never written
    assert not record.exists()  # removed before the lock is let go


def test_an_owner_on_this_host_is_judged_by_its_pid_and_the_pids_start_time() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        record = OwnerRecord(HERE, proc.pid, BOOT_ID, locking.process_started(proc.pid))
        assert owner_alive(record, time.time())
        reused = dataclasses.replace(record, started=record.started - 5)  # same pid, other process
        assert not owner_alive(reused, time.time())
    finally:
        proc.kill()
        proc.wait()
    assert not owner_alive(record, time.time())
    # a lease does not keep a process of this host alive: its pid is asked, not its lease
    assert not owner_alive(dataclasses.replace(record, lease_until=time.time() + 60), time.time())


@pytest.mark.parametrize(("lease_s", "alive"), [
    pytest.param(30, True, id="lease-running"),
    pytest.param(-1, False, id="lease-expired"),
    pytest.param(None, False, id="never-leased"),
])
def test_an_owner_on_another_host_is_alive_while_its_lease_runs_whatever_its_pid_is_here(
        lease_s: float | None, alive: bool) -> None:
    # a pid that is dead here must not end a running lease; one that lives here must not
    # revive an expired lease
    for pid in (dead_pid(), os.getpid()):
        assert owner_alive(elsewhere(lease_s, pid), time.time()) is alive


def test_an_owner_on_this_host_name_with_another_boot_id_is_dead_the_host_rebooted() -> None:
    me = dataclasses.replace(this_process(), lease_until=time.time() + 60)
    assert owner_alive(me, time.time())
    rebooted = dataclasses.replace(me, boot_id="00000000-0000-4000-8000-000000000000")
    assert not owner_alive(rebooted, time.time())


def test_the_lease_is_renewed_while_the_lock_is_held_and_not_over_a_new_owners_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(locking, "LEASE_S", 1.0)
    monkeypatch.setattr(locking, "RENEW_S", 0.05)
    record = tmp_path / "phases/d1/.owners/run.lock.json"
    with held(tmp_path / "phases/d1/.run.lock", RUN_LOCK, 0, tmp_path, owned=True) as claim:
        claim()
        first = json.loads(record.read_text())["lease_until"]
        time.sleep(1.3)  # past the first lease
        renewed = json.loads(record.read_text())["lease_until"]
        assert renewed > first and renewed > time.time()
        taker = elsewhere(30)  # judged dead and taken over: the record is no longer ours
        record.write_text(json.dumps(dataclasses.asdict(taker)))
        time.sleep(0.3)
        assert locking.read_owner(record) == taker
    assert locking.read_owner(record) == taker  # nor is it removed as ours


CONTENDER = """
import os, sys, time
from pathlib import Path
from specops_dag.errors import WriteConflict
from specops_dag.locking import held
root, go = Path(sys.argv[1]), Path(sys.argv[2])
(go.parent / f"ready-{os.getpid()}").touch()
while not go.exists():
    time.sleep(0.005)
try:
    with held(root / "phases/d1/.run.lock", sys.argv[3], 0, root, owned=True) as claim:
        claim()
        print("held", flush=True)
        time.sleep(2)
except WriteConflict as err:
    print(err.message, flush=True)
"""


def test_two_processes_taking_the_run_lock_of_one_delivery_give_exactly_one_write_conflict(
        tmp_path: Path) -> None:
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", CONTENDER, str(tmp_path), str(go),
                               RUN_LOCK], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    deadline = time.monotonic() + 30
    while len(list(tmp_path.glob("ready-*"))) < 2:  # both are waiting for `go`
        assert time.monotonic() < deadline
        time.sleep(0.01)
    go.touch()
    outs = {p.pid: p.communicate(timeout=30)[0] for p in procs}
    winners = [pid for pid, out in outs.items() if out == "held\n"]
    assert len(winners) == 1, outs
    [loser] = [out for pid, out in outs.items() if pid not in winners]
    assert loser == (f"write conflict: {RUN_LOCK} is being written by another process (pid "
                     f"{winners[0]}); nothing was changed, retry when it finishes\n")


def test_a_run_lock_whose_record_names_another_host_with_a_live_lease_is_a_conflict(
        tmp_path: Path) -> None:
    # where flock does not reach across hosts, the other host's record still says it holds it
    record = tmp_path / "phases/d1/.owners/run.lock.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps(dataclasses.asdict(elsewhere(30))))
    with pytest.raises(WriteConflict) as info, held(
            tmp_path / "phases/d1/.run.lock", RUN_LOCK, 0, tmp_path, owned=True):
        pass
    assert info.value.message == (f"write conflict: {RUN_LOCK} is being written by another "
                                  "process (pid 4242 on host worker-b); nothing was changed, "
                                  "retry when it finishes")
    record.write_text(json.dumps(dataclasses.asdict(elsewhere(-1))))  # its lease ran out
    with held(tmp_path / "phases/d1/.run.lock", RUN_LOCK, 0, tmp_path, owned=True) as claim:
        claim()
        assert locking.read_owner(record).pid == os.getpid()


def claimed_elsewhere(root: Path, lease_s: float) -> tuple[Store, Path]:
    """Step `a` of d1 marked running by pid 4242 of host worker-b, its lease ending `lease_s`
    from now; the store and the lease's path."""
    store = make_delivery(root)
    lease = (root / "phases/d1/.owners/a.json").absolute()
    owner = elsewhere(lease_s)
    with store.transaction("d1") as state:
        step = state.get_step("a")
        state.start(step, Owner(pid=owner.pid, create_time=owner.started, host=owner.host,
                                boot_id=owner.boot_id, lease=str(lease)))
    lease.parent.mkdir(parents=True, exist_ok=True)
    lease.write_text(json.dumps(dataclasses.asdict(owner)))
    return store, lease


def test_a_step_running_on_another_host_with_a_live_lease_is_not_taken_over(
        diamond_root: Path) -> None:
    store, _ = claimed_elsewhere(diamond_root, 30)
    before = store.index_path("d1").read_bytes()
    assert reading.runnable_steps(store.read("d1")) == []
    outcome = run_step(store, "d1", "a")
    assert (outcome.status, outcome.message) == (
        "blocked", "write conflict: step `a` is already running (pid 4242 on host worker-b)")
    with pytest.raises(WriteConflict) as info:
        ops.reopen(store, "d1", "a")
    assert info.value.message == ("write conflict: step `a` of `d1` is running (pid 4242 on host "
                                  "worker-b); wait for it to finish, then reopen")
    assert store.index_path("d1").read_bytes() == before


def test_a_step_running_on_another_host_whose_lease_expired_is_taken_over(
        diamond_root: Path) -> None:
    store, lease = claimed_elsewhere(diamond_root, -1)
    assert reading.runnable_steps(store.read("d1")) == ["a"]
    outcome = run_step(store, "d1", "a")
    assert (outcome.status, outcome.attempt) == ("completed", 2)
    step = store.read("d1").get_step("a")
    assert (step.status, step.owner, step.attempts) == ("completed", None, 2)
    assert not lease.exists()  # replaced by this process's record, removed when it ended


COPY_OWNER = ("[python3, -c, \"import os,pathlib,shutil; d=pathlib.Path(os.environ['SPECOPS_NODE_DIR']); "
              "shutil.copy(d.parent / '.owners' / 'a.json', d / 'owner.json'); "
              "(d / 'out.txt').write_text('a')\"]")


def test_a_running_step_has_an_owner_record_with_host_pid_and_boot_id_until_it_ends(
        tmp_path: Path) -> None:
    root = write_tree(tmp_path / "harness", {**DIAMOND, "workflow_defs/phases/p-a.yaml":
                                             command_phase("p-a", COPY_OWNER, {"request": "req"},
                                                           {"out": "a-out"})})
    store = make_delivery(root)
    assert run_step(store, "d1", "a").status == "completed"
    seen = json.loads((root / "phases/d1/a/owner.json").read_text())  # as the command saw it
    assert (seen["host"], seen["pid"], seen["boot_id"]) == (HERE, os.getpid(), BOOT_ID)
    assert seen["lease_until"] > time.time()
    assert not (root / "phases/d1/.owners/a.json").exists()


WORKER_B = """
import socket, sys
from pathlib import Path
socket.gethostname = lambda: "worker-b"  # this child plays a worker on another machine
from specops_dag import locking
locking.LEASE_S, locking.RENEW_S = 2.0, 0.1
from specops_dag.delivery.store import Store
from specops_dag.execution.step import run_step
print(run_step(Store(Path(sys.argv[1])), "d1", "a").status, flush=True)
"""


@pytest.mark.e2e
def test_a_step_claimed_by_a_worker_on_another_host_is_left_to_it_until_its_lease_lapses(
        tmp_path: Path) -> None:
    root = write_tree(tmp_path / "harness", {**DIAMOND, "workflow_defs/phases/p-a.yaml":
                                             command_phase("p-a", SLEEP, {"request": "req"},
                                                           {"out": "a-out"})})
    store = make_delivery(root)
    worker = subprocess.Popen([sys.executable, "-c", WORKER_B, str(root)],
                              env={**os.environ, "NAP": "30"}, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while store.read("d1").get_step("a").status != "running":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(2.5)  # longer than its lease: only its renewals keep it alive
        here = run_step(store, "d1", "a")
        assert (here.status, here.message) == (
            "blocked", f"write conflict: step `a` is already running (pid {worker.pid} on host "
            "worker-b)")
    finally:
        worker.kill()  # the worker's machine is gone: nothing renews its lease
        worker.wait()
    time.sleep(2.2)  # its last lease has run out
    taken = run_step(store, "d1", "a")
    assert (taken.status, taken.attempt) == ("completed", 2)
