"""Orchestration overhead of a 20-node codex chain (issue #3).

Runs, side by side in one process tree:
  A. `dagster job execute` (in-process executor) of a delivery whose 20 chained nodes each run the
     real `codex exec` against the replay agent (which answers at once);
  B. a plain sequential loop calling `codex exec` 20 times with the same prompts and argv.
Prints both wall times and the ratio A / B (target ≤ 1.5). Then (issue #21) the same chain with
`validation: full` on a git target (the all-pass .NET fixture, the `dotnet` stand-in of tests/),
where the test-integrity guard and the evidence record run for every node. A benchmark-only
`sitecustomize` in the run's processes times each call of the two (`attempt.guard_tests`,
`step.write_evidence`) into a file, so one run gives both numbers: the per-node orchestration
overhead with them (the run's time over the plain codex loop's, per node) and without them (that
less their own time). The ratio with / without is printed (target ≤ 1.05).
Not a test: nothing asserts a time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import compile_package  # noqa: E402
from specops_dag.agent.codex import AgentSettings, codex_argv, find_codex  # noqa: E402
from specops_dag.agent.replay import ReplayServer, Scenario  # noqa: E402
from specops_dag.process import run_process  # noqa: E402

N = 20


STANDIN = REPO / "tests" / "dotnet_standin"
FIXTURE = REPO / "dotnet_fixtures" / "all-pass"
TIMERS = """
import os, time
import specops_dag.execution.attempt as attempt
import specops_dag.execution.step as step

def timed(fn):
    def call(*args, **kwargs):
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            with open(os.environ["BENCH_TIMINGS"], "a") as out:
                out.write(f"{fn.__name__} {time.perf_counter() - started}\\n")
    return call

attempt.guard_tests = timed(attempt.guard_tests)
step.write_evidence = timed(step.write_evidence)
"""


def phase(i: int, validation: str = "none") -> str:
    port = f"input: {{ports: {{previous: {{contract: c{i - 1}}}}}}}" if i else (
        "input: {ports: {request: {contract: req}}}")
    return (f"kind: phase\nid: n{i}\n{port}\nexecution:\n  goal: Step {i}.\n"
            "  executor: {kind: codex}\n  skills:\n"
            "    - {id: chain, path: skills/chain/SKILL.md, load: entry, required: true}\n"
            f"output:\n  ports: {{out: {{contract: c{i}}}}}\n  artifacts:\n"
            f"    - {{id: out, path: out.md, required: true}}\nvalidation: {validation}\n")


def harness(root: Path, validation: str = "none") -> None:
    defs = root / "workflow_defs"
    (defs / "phases").mkdir(parents=True)
    (defs / "workflows").mkdir()
    (defs / "skills/chain").mkdir(parents=True)
    (defs / "skills/chain/SKILL.md").write_text("Write out.md.\n")
    nodes = []
    for i in range(N):
        (defs / f"phases/n{i}.yaml").write_text(phase(i, validation))
        inputs = "{request: {input: request}}" if i == 0 else (
            f"{{previous: {{node: n{i - 1}, output: out}}}}")
        needs = f"[n{i - 1}]" if i else "[]"
        nodes.append(f"  - {{id: n{i}, phase: n{i}, needs: {needs}, inputs: {inputs}}}")
    (defs / "workflows/chain.yaml").write_text(
        "kind: workflow\nid: chain\ninputs: {request: {contract: req}}\nnodes:\n"
        + "\n".join(nodes) + "\n")


def run_chain(work: Path, name: str, validation: str, extra_env: dict[str, str]
              ) -> tuple[float, float]:
    """(dagster job execute's wall time, the plain codex loop's) of one 20-node chain."""
    root = work / name
    if validation == "full":
        shutil.copytree(FIXTURE, root)
    harness(root, validation)
    if validation == "full":
        for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                     ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "initial"]):
            subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    # The literal agent: it writes what the prompt's WRITE names, nothing else.
    scenario = Scenario.model_validate({"nodes": {f"n{i}": [{"literal": {}}] * 2
                                                  for i in range(N)}})
    server = ReplayServer(scenario).start()
    try:
        home = work / f"{name}-dagster_home"
        home.mkdir()
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        env = {**os.environ, "DAGSTER_HOME": str(home), "SPECOPS_ROOT": str(root),
               "SPECOPS_REPLAY_URL": server.url, "SPECOPS_CODEX_HOME": str(work / "codex-home"),
               **extra_env}
        bin_dir = Path(sys.executable).parent
        subprocess.run([str(bin_dir / "specops"), "new", "chain", "b1", "--request", "bench"],
                       env=env, check=True, capture_output=True, stdin=subprocess.DEVNULL)
        config = work / "in_process.yaml"
        config.write_text("execution:\n  config:\n    in_process: {}\n")
        started = time.monotonic()
        subprocess.run([str(bin_dir / "dagster"), "job", "execute", "-m", "specops_dag.definitions",
                        "-j", "chain_job", "-c", str(config), "--tags",
                        json.dumps({"dagster/partition": "b1"})], env=env, check=True,
                       capture_output=True, stdin=subprocess.DEVNULL, cwd=root)
        dagster_s = time.monotonic() - started
        settings = AgentSettings(replay_url=server.url, codex_home=str(work / "codex-home"))
        codex = find_codex(settings, REPO)
        cwd = root / ".specops/worktrees/b1" if validation == "full" else root
        started = time.monotonic()
        for i in range(N):
            node_dir = root / "phases/b1" / f"n{i}"
            prompt = (node_dir / "prompt.md").read_text()
            argv = codex_argv(codex, sandbox="workspace-write", workdir=cwd,
                              last_message=work / "last.txt", settings=settings,
                              delivery="b1", node=f"n{i}", idle_timeout_s=600,
                              add_dirs=(root / "phases",) if validation == "full" else ())
            result = run_process(argv, cwd=cwd, env=env, stdin_data=prompt.encode(),
                                 deadline_s=600)
            assert result.exit_code == 0, result.stderr
        return dagster_s, time.monotonic() - started
    finally:
        server.stop()


def main() -> None:
    compile_package()
    work = Path(tempfile.mkdtemp(prefix="specops-bench-"))
    try:
        dagster_s, plain_s = run_chain(work, "harness", "none", {})
        print(f"20-node codex chain: dagster job execute (in_process) {dagster_s:.2f} s, "
              f"plain codex loop {plain_s:.2f} s, ratio {dagster_s / plain_s:.2f} (target <= 1.5)")
        timers = work / "timers"
        timers.mkdir()
        (timers / "sitecustomize.py").write_text(TIMERS)
        timings = work / "timings.txt"
        dotnet = {"PATH": f"{STANDIN}:{os.environ['PATH']}",
                  "DOTNET_STANDIN_ANSWERS": str(STANDIN / "answers" / "all-pass.yaml"),
                  "PYTHONPATH": os.pathsep.join([str(timers), str(REPO)]),
                  "BENCH_TIMINGS": str(timings)}
        took, plain = run_chain(work, "full", "full", dotnet)
        calls = [line.split() for line in timings.read_text().splitlines()]
        spent = {name: sum(float(t) for n, t in calls if n == name) for name, _ in calls}
        assert {n: sum(1 for c in calls if c[0] == n) for n in spent} == {
            "guard_tests": N, "write_evidence": N}, calls  # each ran once per node
        with_them = (took - plain) / N
        without = with_them - sum(spent.values()) / N
        print(f"20-node full-validation chain on git: dagster {took:.2f} s, plain codex loop "
              f"{plain:.2f} s; per node: overhead {with_them * 1000:.0f} ms, of it the guard "
              f"{spent['guard_tests'] / N * 1000:.1f} ms and the evidence record "
              f"{spent['write_evidence'] / N * 1000:.1f} ms")
        print(f"guard + evidence: per-node overhead with / without {with_them / without:.3f} "
              "(target <= 1.05)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
