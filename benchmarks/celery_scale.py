"""Steps on Celery workers against the multiprocess executor (issue #45), side by side in one run.

A workflow of 8 independent nodes (no needs between them), each a `command` phase that sleeps
~10 s and records when it began and ended (`ran.json` in its node folder), on a plain-folder
target (no git: no worktrees or merges, so both sides pay only the executor and the step). Both
runs use one Dagster instance whose storage is a private Postgres server, and both are launched
with `dagster job execute`:

  A. the Celery code location (`-m specops_dag.dagster_adapter.celery`) with Debian's
     `redis-server` as broker and backend and 2 `specops worker` processes of concurrency 1,
     started once before the first round and warm for every round after it;
  B. the default code location (`-m specops_dag.definitions`) with its multiprocess executor
     capped at 2 steps at once (`multiprocess: {max_concurrent: 2}`, steps forked warm).

Rounds alternate A, B then B, A (BENCH_ROUNDS, default 2). For each run it prints the run's wall
time (RUN_START → RUN_SUCCESS from the instance) and the whole command's, and with
  t     = the node's own time: the mean of the 8 nodes' ran.json end − start,
  ideal = ceil(8 / 2) × t, the ideal split over 2 slots,
  o     = (wall − ideal) / (8 / 2), the engine's overhead per step (all of the run's overhead
          beyond its nodes' own time, the run's start and end included, spread over the 4 steps
          each slot runs),
it prints per round, with o_B the multiprocess run's per-step overhead of the same round,
  ratio = wall_A / (ideal_A + (8 / 2) × o_B)
(the issue's "wall ÷ (the ideal split + the engine's overhead)", the engine being one machine's
multiprocess executor: 1.0 when a Celery step costs what a multiprocess one does, target
≤ 1.2), and o_A / o_B, the Celery executor's per-step overhead over the multiprocess
executor's. BENCH_NAP sets the nap (default 10 s). Every process it starts (the workers' whole
trees, redis-server, Postgres) is ended by pid before it returns. Not a test: nothing asserts a
time.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


from benchmarks import compile_package  # noqa: E402
from tests.support.broker import celery_workers, kill_trees, redis_server  # noqa: E402
from tests.support.postgres import postgres_server, use_postgres  # noqa: E402

NODES, SLOTS = 8, 2
PER_SLOT = math.ceil(NODES / SLOTS)
NAP_S = float(os.environ.get("BENCH_NAP", "10"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "2"))
READY_S = 120.0
BIN = Path(sys.executable).parent
NAP = ("[python3, -c, \"import os,pathlib,time,json; t=time.time(); time.sleep(%s); "
       "d=os.environ['SPECOPS_NODE_DIR']; pathlib.Path(d,'ran.json').write_text("
       "json.dumps([t, time.time()])); pathlib.Path(d,'out.txt').write_text('x')\"]")
LOCATIONS = {"celery": "specops_dag.dagster_adapter.celery",
             "multiprocess": "specops_dag.definitions"}


@dataclass(frozen=True)
class Run:
    """One run's times (seconds) and where its steps ran."""

    wall: float  # RUN_START → RUN_SUCCESS
    command: float  # the whole `dagster job execute`
    node: float  # the mean of the nodes' own times
    first: float  # from RUN_START to the first node's start
    last: float  # from the last node's end to RUN_SUCCESS
    at_once: int  # the most nodes running at one time
    places: dict[str, int]  # steps per Celery worker, or per step process's pid

    @property
    def ideal(self) -> float:
        return PER_SLOT * self.node

    @property
    def overhead(self) -> float:
        return (self.wall - self.ideal) / PER_SLOT


def harness(root: Path) -> None:
    nodes = "".join(f"  - {{id: n{i}, phase: p-nap, inputs: {{request: {{input: request}}}}}}\n"
                    for i in range(1, NODES + 1))
    files = {
        "workflow_defs/workflows/spread.yaml": "kind: workflow\nid: spread\n"
        "inputs: {request: {contract: req}}\nnodes:\n" + nodes,
        "workflow_defs/phases/p-nap.yaml": "kind: phase\nid: p-nap\n"
        "input: {ports: {request: {contract: req}}}\nexecution:\n  goal: Nap.\n"
        f"  executor: {{kind: command, argv: {NAP % NAP_S}, timeout_s: {NAP_S + 120:.0f}}}\n"
        "output:\n  ports: {out: {contract: napped}}\n  artifacts:\n"
        "    - {id: result, path: out.txt, required: true}\nvalidation: none\n"}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def execute(env: dict[str, str], root: Path, executor: str, delivery: str, work: Path,
            broker: str) -> float:
    """`specops new`, then the timed `dagster job execute`; the command's wall time."""
    subprocess.run([str(BIN / "specops"), "new", "spread", delivery, "--request", "bench"],
                   env=env, check=True, capture_output=True, stdin=subprocess.DEVNULL)
    config = work / f"{executor}.yaml"
    config.write_text(
        f"execution:\n  config:\n    broker: {broker}/0\n    backend: {broker}/1\n"
        if executor == "celery" else
        f"execution:\n  config:\n    multiprocess: {{max_concurrent: {SLOTS}}}\n")
    started = time.monotonic()
    proc = subprocess.Popen(
        [str(BIN / "dagster"), "job", "execute", "-m", LOCATIONS[executor], "-j", "spread_job",
         "-c", str(config), "--tags", json.dumps({"dagster/partition": delivery})],
        env=env, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=NAP_S * NODES + 600)
    finally:
        kill_trees([proc])
    assert proc.returncode == 0, f"{executor} run {delivery} failed:\n{(out + err)[-3000:]}"
    return time.monotonic() - started


def measure(root: Path, delivery: str, command: float) -> Run:
    import dagster as dg

    with dg.DagsterInstance.get() as instance:
        (record,) = instance.get_run_records(dg.RunsFilter(tags={"dagster/partition": delivery}))
    folder = root / "phases" / delivery
    state = json.loads((folder / "index.json").read_text())
    ran = [json.loads((folder / s["name"] / "ran.json").read_text()) for s in state["steps"]]
    places: dict[str, int] = {}
    for step in state["steps"]:
        where = step["ran_on"]["worker"] or str(step["ran_on"]["pid"])
        places[where] = places.get(where, 0) + 1
    at_once = max(sum(b <= t < e for b, e in ran) for t, _ in ran)
    return Run(wall=record.end_time - record.start_time, command=command,
               node=statistics.mean(e - b for b, e in ran),
               first=min(b for b, _ in ran) - record.start_time,
               last=record.end_time - max(e for _, e in ran), at_once=at_once, places=places)


def show(executor: str, run: Run) -> None:
    where = (", ".join(f"{k} {v}" for k, v in sorted(run.places.items()))
             if executor == "celery" else f"{len(run.places)} step processes")
    print(f"  {executor:12} run {run.wall:5.1f} s (command {run.command:5.1f} s), node "
          f"{run.node:.2f} s, ideal {run.ideal:5.1f} s, wall/ideal {run.wall / run.ideal:.3f}, "
          f"per step {run.overhead:.2f} s; first node +{run.first:.2f} s, last node "
          f"-{run.last:.2f} s; at most {run.at_once} at once; steps: {where}")


def compare(runs: dict[str, Run]) -> tuple[float, float]:
    """(wall_A / (ideal_A + PER_SLOT x o_B), o_A / o_B) of one round."""
    a, b = runs["celery"], runs["multiprocess"]
    return a.wall / (a.ideal + PER_SLOT * b.overhead), a.overhead / b.overhead


def rounds(env: dict[str, str], root: Path, work: Path, broker: str) -> list[dict[str, Run]]:
    done = []
    for n in range(1, ROUNDS + 1):
        order = ("celery", "multiprocess") if n % 2 else ("multiprocess", "celery")
        print(f"round {n} ({', then '.join(order)}):")
        runs = {}
        for executor in order:
            delivery = f"{executor[0]}{n}"
            runs[executor] = measure(root, delivery,
                                     execute(env, root, executor, delivery, work, broker))
            show(executor, runs[executor])
        ratio, over = compare(runs)
        print(f"  ratio {ratio:.3f} (target <= 1.2); per-step overhead celery/multiprocess "
              f"{over:.2f}")
        done.append(runs)
    return done


def summary(done: list[dict[str, Run]]) -> None:
    a = [r["celery"] for r in done]
    b = [r["multiprocess"] for r in done]
    ratio, over = (statistics.mean(c) for c in zip(*map(compare, done), strict=True))
    print(f"{NODES} independent nodes of ~{NAP_S:g} s on {SLOTS} slots, over {len(done)} rounds "
          f"(mean): celery run {statistics.mean(x.wall for x in a):.1f} s, multiprocess run "
          f"{statistics.mean(y.wall for y in b):.1f} s; per-step overhead celery "
          f"{statistics.mean(x.overhead for x in a):.2f} s, multiprocess "
          f"{statistics.mean(y.overhead for y in b):.2f} s\n"
          f"  ratio wall_celery / (ideal + {PER_SLOT} x multiprocess per-step overhead) "
          f"{ratio:.3f} (target <= 1.2); per-step overhead celery/multiprocess "
          f"{over:.2f}; whole command celery "
          f"{statistics.mean(x.command for x in a):.1f} s, multiprocess "
          f"{statistics.mean(y.command for y in b):.1f} s")


def main() -> None:
    compile_package()
    work = Path(tempfile.mkdtemp(prefix="specops-celery-bench-"))
    try:
        root = work / "harness"
        harness(root)
        home = work / "dh"
        home.mkdir()
        env = {**os.environ, "DAGSTER_HOME": str(home), "SPECOPS_ROOT": str(root),
               "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["DAGSTER_HOME"] = str(home)
        with postgres_server() as url, redis_server(work / "redis") as redis:
            use_postgres(home, url)
            broker = redis.url
            with celery_workers(BIN / "specops", env, root, broker, {
                    f"w{i}": work / "workers" / f"w{i}" for i in range(1, SLOTS + 1)},
                    "--concurrency", "1", "--no-dotnet", ready_s=READY_S):
                summary(rounds(env, root, work, broker))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
