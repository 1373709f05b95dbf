"""Cost along a long chain on a git target (issue #22 item 6), printed as ratios of one run:

  A. per-node cost of a 200-node chain of command nodes on a git target (each writes a product
     file and its handoff, so every node makes a product and a metadata commit), measured as the
     time between consecutive steps' starts: the mean of the last 20 nodes over the mean of the
     first 20 (target <= 1.1: cost does not grow with position), for five chains run one
     after the other (new deliveries of the same workflow), each printed and their median. The
     starts are the run's STEP_START events (Dagster's float timestamps): the step records'
     `started_at` is whole seconds, up to 1 s / 20 off on a mean of nodes of half a second, and
     is printed beside, and so is the mean of every 20-node window along the chain (a growth
     is a trend; a host that changes speed meanwhile shows as jumps);
  B. `specops run` of the completed delivery over its first run (target <= 5 %);
  C. a losing concurrent `specops run` (another holds the delivery's run lock) over the
     interpreter's own start, `python -c pass` (target <= 10), with no Dagster import.
A's first and last 20 nodes run minutes apart, so a machine that speeds up or slows down meanwhile
(a shared host) moves A by as much as the growth it measures; beside A, the CPU time of the run
worker per node (its own and its children's, sampled from /proc), which tracks A's wall time when
it is the host's speed that changes, and each node's cost cut in two, the step (its STEP_START to
its materialization, `run_step` returned) and Dagster alone (from there to the next STEP_START),
each with the same ratio. The same question at the same time:
  A''. the last 20 nodes of a new chain's first run and the first 20 nodes of another new
     delivery of the same workflow, as two `specops run`s whose windows overlap: the second is
     started once the chain's node N-20-lead has started, and its run stops by itself at node 20
     (the step command fails there when the run's environment says BENCH_STOP_AT=n20, so node
     20 still starts). The mean time between consecutive step starts over nodes N-20..N-1 and
     over nodes 1..20 (node 0 of a new delivery also creates its worktree, a one-time cost that
     is not a growth; leaving it out raises the ratio). Dagster's own cost between steps is in
     it, and so is the contention of two runs on two cores. Five rounds, a new chain each;
     `lead` starts at 28 nodes (how far a chain gets while a `specops run` starts its first
     step, here) and is corrected after each round by how far apart the two windows' middles
     were; each round prints how much of the late window the early one covered. Both are new
     deliveries, not a reopened chain: a reopened chain first walks its completed steps, so the
     other delivery would be far past its first 20 nodes by then, and every reopen adds
     revisions and events to the chain's state.
And how far the host alone moves such a ratio:
  control. one step (node 19 of a delivery, 20 steps completed) run N times in this process, its
     state file put back to the same bytes before each run, so nothing it reads grows: the mean
     of its last 20 runs over the mean of its first 20 (after the first), N runs being about
     half a chain's time (no Dagster around it: how much the host's speed moves a ratio by
     itself).
And in one process:
  A'. one step at the end of the completed chain (node N-1, its state holding N completed steps)
     against one at its start (node 19 of a second delivery of the same workflow, 20 steps
     completed), each reopened and run again with `run_step` in this process, alternately, 7
     times each: the median of the late over the median of the early. It leaves out Dagster's
     own cost between steps, which does not grow along the chain.
Not a test: nothing asserts a time. `BENCH_N=50` shortens the chain.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import compile_package  # noqa: E402

N = int(os.environ.get("BENCH_N", "200"))
# The product file differs at every run of a node (a re-run of a reopened node commits too).
WRITE = ("[python3, -c, \"import os,pathlib,time; n=os.environ['SPECOPS_NODE']; "
         "pathlib.Path('src').mkdir(exist_ok=True); "
         "pathlib.Path('src', n + '.txt').write_text(n + str(time.time()) + chr(10)); "
         "pathlib.Path(os.environ['SPECOPS_NODE_DIR'], 'out.txt').write_text(n); "
         "raise SystemExit(n == os.environ.get('BENCH_STOP_AT'))\"]")


def harness(root: Path) -> None:
    defs = root / "workflow_defs"
    (defs / "phases").mkdir(parents=True)
    (defs / "workflows").mkdir()
    for pid, port in (("first", ""), ("step", "previous: {contract: c}")):
        (defs / f"phases/{pid}.yaml").write_text(
            f"kind: phase\nid: {pid}\ninput: {{ports: {{{port}}}}}\nexecution:\n"
            f"  goal: One step.\n  executor: {{kind: command, argv: {WRITE}, timeout_s: 60}}\n"
            "output:\n  ports: {out: {contract: c}}\n  artifacts:\n"
            "    - {id: out, path: out.txt, required: true}\nvalidation: none\n")
    nodes = ["  - {id: n0, phase: first}"] + [
        f"  - {{id: n{i}, phase: step, needs: [n{i - 1}], inputs: {{previous: {{node: n{i - 1}, "
        "output: out}}}" for i in range(1, N)]
    (defs / "workflows/chain.yaml").write_text(
        "kind: workflow\nid: chain\nnodes:\n" + "\n".join(nodes) + "\n")
    (root / "README.md").write_text("# product\n")
    (root / ".gitignore").write_text(".dagster_home/\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.com"}
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"],
                 ["git", "commit", "-q", "-m", "initial"]):
        subprocess.run(argv, cwd=root, env=env, check=True, stdin=subprocess.DEVNULL)


def step_events(home: Path, delivery: str, kind: str) -> list[float]:
    """When each step of the delivery's last run had its `kind` event (STEP_START,
    ASSET_MATERIALIZATION), in run order: Dagster's float timestamps."""
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home)) as instance:
        run = instance.get_runs(dg.RunsFilter(tags={"dagster/partition": delivery}), limit=1)[0]
        events = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType[kind],
                                              limit=10_000).records
        return [e.event_log_entry.timestamp for e in events]


def step_starts(home: Path, delivery: str = "c1") -> list[float]:
    """When each step of the delivery's last run started, in run order."""
    return step_events(home, delivery, "STEP_START")


def split(starts: list[float], ends: list[float]) -> tuple[list[float], list[float]]:
    """Each node's time from its step start to the next cut in two where its asset's
    materialization was made (the event is stamped as the asset's function yields it, right
    after `run_step` returns): from its STEP_START to there (the step: Dagster setting it up,
    then `run_step` with its git and its command) and from there to the next STEP_START
    (Dagster alone: the node's materialization, checks, outputs and success stored, the next
    step planned). Each part as running sums, which `head_tail` and `windows` take as they take
    the starts (their consecutive differences are the node's part)."""
    assert len(starts) == len(ends), f"{len(starts)} steps started, {len(ends)} materialized"
    own, between = [0.0], [0.0]
    for start, end, following in zip(starts, ends, starts[1:], strict=False):
        own.append(own[-1] + end - start)
        between.append(between[-1] + following - end)
    return own, between


def head_tail(starts: list[float]) -> tuple[float, float]:
    """The mean time between consecutive starts over the first 20 nodes and the last 20."""
    costs = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    return statistics.mean(costs[:20]), statistics.mean(costs[-20:])


def cpu_seconds(pid: int) -> float | None:
    """CPU time of process `pid` and of its children it has waited for (user and system, from
    /proc/<pid>/stat), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def run_worker_cpu(proc: subprocess.Popen, samples: list[tuple[float, float]]) -> None:
    """Sample the CPU time of the `dagster job execute` under `proc` (it runs every step in
    process; git and the step commands are its children, counted once it waits for them) every
    10 ms, as (wall time, CPU seconds), until it ends."""
    import psutil

    def is_worker(child: psutil.Process) -> bool:
        try:
            return "execute" in child.cmdline()
        except psutil.Error:  # a short-lived child (git, a step's command) ended meanwhile
            return False

    worker = None
    while proc.poll() is None:
        if worker is None:
            try:
                worker = next((c.pid for c in psutil.Process(proc.pid).children(recursive=True)
                               if is_worker(c)), None)
            except psutil.NoSuchProcess:  # the run ended meanwhile
                break
        elif (cpu := cpu_seconds(worker)) is not None:
            samples.append((time.time(), cpu))
        time.sleep(0.01)


def cpu_at(samples: list[tuple[float, float]], when: float) -> float:
    """The worker's CPU seconds at wall time `when`, interpolated between samples."""
    for (t0, c0), (t1, c1) in zip(samples, samples[1:], strict=False):
        if t0 <= when <= t1:
            return c0 + (c1 - c0) * (when - t0) / (t1 - t0 or 1)
    raise ValueError(f"no CPU sample around {when}")


def windows(starts: list[float]) -> list[float]:
    """The mean time between consecutive starts in each window of 20 nodes, in chain order: a
    growth shows as a trend, a machine that speeds up or slows down as a jump."""
    costs = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    return [statistics.mean(costs[i:i + 20]) for i in range(0, len(costs), 20)]


def first_20(root: Path, delivery: str):
    """Run nodes 0..19 of the new `delivery` with `run_step` in this process, its collector tuned
    as a run's step worker's is; return the Store (for the in-process measures A' and control)."""
    from specops_dag import collector
    from specops_dag.delivery.store import Store
    from specops_dag.execution.step import run_step

    collector.tune()
    store = Store(root)
    for i in range(20):
        assert run_step(store, delivery, f"n{i}").status == "completed", \
            f"{delivery} n{i} did not complete"
    return store


def side_by_side(root: Path, rounds: int = 7) -> tuple[float, float]:
    """Median seconds of one step at the chain's end and one at its start, run alternately in
    this process (A' above); the process tunes its collector as a run's step worker does."""
    from specops_dag.delivery.lifecycle import reopen
    from specops_dag.execution.step import run_step

    store = first_20(root, "c2")
    late, early = [], []
    for _ in range(rounds):
        for delivery, node, times in (("c1", f"n{N - 1}", late), ("c2", "n19", early)):
            reopen(store, delivery, node)
            started = time.perf_counter()
            assert run_step(store, delivery, node).status == "completed", f"{delivery} {node}"
            times.append(time.perf_counter() - started)
    return statistics.median(late), statistics.median(early)


def control(root: Path, times: int = N) -> tuple[float, float]:
    """A constant workload measured as A is (the host's own drift over ~half a chain's time):
    node 19 of a delivery run `times` times in this process, its state file put back to the same
    bytes (node 19 reopened, 20 steps completed) before each run, so nothing a step reads grows;
    the mean seconds of its first 20 runs (after the first) and of its last 20."""
    from specops_dag.delivery.lifecycle import reopen
    from specops_dag.execution.step import run_step

    store = first_20(root, "k1")
    reopen(store, "k1", "n19")
    path = store.index_path("k1")
    saved, costs = path.read_bytes(), []
    for _ in range(times):
        path.write_bytes(saved)
        started = time.perf_counter()
        assert run_step(store, "k1", "n19").status == "completed", "k1 n19 did not complete"
        costs.append(time.perf_counter() - started)
    return statistics.mean(costs[1:21]), statistics.mean(costs[-20:])


def new_chain(specops: list[str], env: dict[str, str], delivery: str) -> None:
    """`specops new chain <delivery>`, which must succeed."""
    done = subprocess.run([*specops, "new", "chain", delivery, "--request", "bench"], env=env,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"specops new {delivery}: {done.stdout}{done.stderr}"


def start_run(specops: list[str], env: dict[str, str], root: Path, delivery: str
              ) -> subprocess.Popen:
    """`specops run <delivery>` with the in-process executor, started and not waited for."""
    return subprocess.Popen([*specops, "run", delivery, "--executor", "in_process"], env=env,
                            cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def aligned(root: Path, env: dict[str, str], specops: list[str], home: Path, k: int,
            lead: int) -> tuple[float, float, float, int]:
    """A'' above, one round: a new delivery `a<k>` of the chain is run from its start; once its
    node N-20-lead has started (its product file appeared), a new delivery `e<k>` is run, which
    stops by itself at node 20 — so that its nodes 1..20 run while a<k>'s last 20 do. Returns
    the (late, early) mean seconds between consecutive step starts, how much of the late window
    the early one covered, and `lead` corrected by how far apart the two windows' middles were
    (for the next round)."""
    for delivery in (f"a{k}", f"e{k}"):
        new_chain(specops, env, delivery)
    marker = root / ".specops/worktrees" / f"a{k}" / "src" / f"n{N - 20 - lead}.txt"
    chain = start_run(specops, env, root, f"a{k}")
    while not marker.exists() and chain.poll() is None:
        time.sleep(0.005)
    early_run = start_run(specops, {**env, "BENCH_STOP_AT": "n20"}, root, f"e{k}")
    assert early_run.wait() != 0, f"e{k} ran past node 20"
    assert chain.wait() == 0, f"the run of a{k} did not complete"
    late = step_starts(home, f"a{k}")[-20:]  # nodes N-20 .. N-1
    early = step_starts(home, f"e{k}")[1:21]  # nodes 1 .. 20 (node 20 fails, 3 attempts)
    assert len(early) == 20, f"e{k} started {len(early) + 1} steps"
    late_s, early_s = late[-1] - late[0], early[-1] - early[0]
    per_late = late_s / (len(late) - 1)
    overlap = max(0.0, min(late[-1], early[-1]) - max(late[0], early[0]))
    # early's middle after late's: launch it sooner, a node of the chain per `per_late` seconds
    shift = ((early[0] + early[-1]) - (late[0] + late[-1])) / 2
    return (per_late, early_s / (len(early) - 1), overlap / late_s,
            max(0, min(N - 21, round(lead + shift / per_late))))


CHAINS = ("c1", "c3", "c4", "c5", "c6")  # A, one after the other (c2: A', side by side)
ROUNDS = 5  # A'', a chain and an early delivery each


def one_chain(root: Path, env: dict[str, str], specops: list[str], home: Path, delivery: str
              ) -> tuple[float, list[float], list[tuple[float, float]], tuple[float, float],
                         tuple[list[float], list[float]]]:
    """A above for one new delivery of the chain: (seconds of its first run, its step starts,
    the run worker's CPU samples, head and tail means from the step records' whole seconds,
    each node's cost cut in two by `split`)."""
    from specops_dag.delivery.store import Store

    new_chain(specops, env, delivery)
    samples: list[tuple[float, float]] = []
    started = time.monotonic()
    proc = start_run(specops, env, root, delivery)
    run_worker_cpu(proc, samples)
    first_s, code = time.monotonic() - started, proc.wait()
    assert code == 0, f"the first run of {delivery} did not complete"
    steps = Store(root).read(delivery).steps
    whole = head_tail([dt.datetime.fromisoformat(s.started_at).timestamp() for s in steps])
    starts = step_starts(home, delivery)
    return first_s, starts, samples, whole, split(
        starts, step_events(home, delivery, "ASSET_MATERIALIZATION"))


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int]:
    started = time.monotonic()
    result = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, stdin=subprocess.DEVNULL)
    return time.monotonic() - started, result.returncode


def main() -> None:
    compile_package()
    work = Path(tempfile.mkdtemp(prefix="specops-bench-"))
    try:
        root = work / "harness"
        root.mkdir()
        harness(root)
        env = {**os.environ, "DAGSTER_HOME": str(work / "dagster_home")}
        env.pop("SPECOPS_ROOT", None)
        specops = [str(Path(sys.executable).parent / "specops"), "--root", str(root)]
        chains = [one_chain(root, env, specops, work / "dagster_home", d) for d in CHAINS]
        run = [*specops, "run", "c1", "--executor", "in_process"]
        again_s, code = timed(run, env, root)
        assert code == 0, "the re-run did not exit 0"
        lock = os.open(root / "phases/c1/.run.lock", os.O_RDONLY | os.O_CREAT)
        fcntl.flock(lock, fcntl.LOCK_EX)
        losing = [timed(run, env, root) for _ in range(5)]
        os.close(lock)
        assert all(code == 3 for _, code in losing), "the losing run did not exit 3"
        base = statistics.median(timed([sys.executable, "-c", "pass"], env, root)[0]
                                 for _ in range(5))
        lose = statistics.median(s for s, _ in losing)
        pairs, lead = [], min(28, N - 21)  # ~ the nodes a chain runs while a run starts
        for k in range(ROUNDS):
            *pair, lead = aligned(root, env, specops, work / "dagster_home", k, lead)
            pairs.append(pair)
        new_chain(specops, env, "c2")
        late, early = side_by_side(root)
        new_chain(specops, env, "k1")
        still = control(root)
        one = []  # each chain's ratio
        for delivery, (_, starts, samples, whole, parts) in zip(CHAINS, chains, strict=True):
            head, tail = head_tail(starts)
            one.append(tail / head)
            cpu = [cpu_at(samples, t) for t in starts]
            print(f"{N}-node git chain `{delivery}`: per-node cost first 20 {head:.3f} s, last 20 "
                  f"{tail:.3f} s, ratio {tail / head:.2f} (target <= 1.1; from the step records' "
                  f"whole seconds: {whole[0]:.2f} s, {whole[1]:.2f} s, ratio "
                  f"{whole[1] / whole[0]:.2f})")
            print("  per 20-node window: " + ", ".join(f"{w:.3f}" for w in windows(starts))
                  + " s")
            for what, times in (("CPU per node (the run worker and its children)", cpu),
                                ("the step (STEP_START to its materialization)", parts[0]),
                                ("Dagster alone (from there to the next STEP_START)", parts[1])):
                first, last = head_tail(times)
                print(f"  {what}: first 20 {first:.3f} s, last 20 {last:.3f} s, ratio "
                      f"{last / first:.2f}; per 20-node window: "
                      + ", ".join(f"{w:.3f}" for w in windows(times)))
        print(f"one chain, the median of {len(CHAINS)} (one after the other): "
              f"{statistics.median(one):.2f} (target <= 1.1)")
        print(f"control (nothing grows): one step run {N} times, its state put back each "
              f"time, last 20 / first 20 = {still[1]:.3f} s / {still[0]:.3f} s = "
              f"{still[1] / still[0]:.2f} — how far this host alone moves a ratio of A over "
              "about half a chain's time (in this process, without Dagster)")
        first_s = chains[0][0]
        ratios = [late / early for late, early, _ in pairs]
        print(f"at the same time: the last 20 nodes / the first 20 of a new delivery = "
              f"{statistics.median(ratios):.2f}, the median of {len(pairs)} rounds: "
              + ", ".join(f"{late:.3f} s / {early:.3f} s = {late / early:.2f} ({cover:.0%} "
                          "at once)" for late, early, cover in pairs)
              + " (two `specops run`s, each node's cost from step start to step start; the "
              "same target)")
        print(f"side by side: a step at node {N - 1} {late:.3f} s / at node 19 {early:.3f} s = "
              f"{late / early:.2f}, {(late - early) * 1000:.0f} ms more (median of 7 each, "
              "alternating, without Dagster's own cost between steps; the same target)")
        print(f"re-run of the completed delivery {again_s:.2f} s / first run {first_s:.2f} s = "
              f"{again_s / first_s:.1%} (target <= 5 %)")
        print(f"losing concurrent `specops run` {lose * 1000:.0f} ms / `python -c pass` "
              f"{base * 1000:.0f} ms = {lose / base:.1f} (target <= 10)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
