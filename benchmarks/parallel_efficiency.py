"""Parallel efficiency (issue #8): a diamond whose two middle nodes each run the real codex CLI
against the replay agent for ~10 s, launched with `dagster job execute` once with the multiprocess
executor and once in-process. Prints the diamond's wall time (the run, RUN_START → RUN_SUCCESS, as
Dagster reports its duration) / the critical path of agent time (target ≤ 1.3), the same for the
whole `dagster job execute` command (which adds the CLI's ~2 s start-up: interpreter, Dagster,
code location, run creation), and the speed-up over the in-process executor.
Not a test: nothing asserts a time."""

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
from specops_dag.agent.replay import ReplayServer, Scenario  # noqa: E402

NAP_S = 10.0
NEEDS = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}


def phase(node: str) -> str:
    ports = ", ".join(f"{n}: {{contract: c-{n}}}" for n in NEEDS[node]) or "req: {contract: req}"
    return (f"kind: phase\nid: q-{node}\ninput: {{ports: {{{ports}}}}}\nexecution:\n"
            f"  goal: Node {node}.\n  executor: {{kind: codex}}\n  skills:\n"
            "    - {id: diamond, path: skills/diamond/SKILL.md, load: entry, required: true}\n"
            f"output:\n  ports: {{out: {{contract: c-{node}}}}}\n  artifacts:\n"
            "    - {id: out, path: out.md, required: true}\nvalidation: none\n")


def harness(root: Path) -> None:
    defs = root / "workflow_defs"
    for folder in ("phases", "workflows", "skills/diamond"):
        (defs / folder).mkdir(parents=True)
    (defs / "skills/diamond/SKILL.md").write_text("Write out.md.\n")
    nodes = []
    for node, needs in NEEDS.items():
        (defs / f"phases/q-{node}.yaml").write_text(phase(node))
        inputs = ", ".join(f"{n}: {{node: {n}, output: out}}" for n in needs) or (
            "req: {input: request}")
        nodes.append(f"  - {{id: {node}, phase: q-{node}, needs: [{', '.join(needs)}], "
                     f"inputs: {{{inputs}}}}}")
    (defs / "workflows/quad.yaml").write_text(
        "kind: workflow\nid: quad\ninputs: {request: {contract: req}}\nnodes:\n"
        + "\n".join(nodes) + "\n")


def run(env: dict[str, str], root: Path, delivery: str, executor: str,
        work: Path) -> tuple[float, float]:
    """(wall time of the whole command, wall time of the run as Dagster recorded it)."""
    bin_dir = Path(sys.executable).parent
    subprocess.run([str(bin_dir / "specops"), "new", "quad", delivery, "--request", "bench"],
                   env=env, check=True, capture_output=True, stdin=subprocess.DEVNULL)
    config = work / f"{executor}.yaml"
    config.write_text(f"execution:\n  config:\n    {executor}: {{}}\n")
    started = time.monotonic()
    subprocess.run([str(bin_dir / "dagster"), "job", "execute", "-m", "specops_dag.definitions",
                    "-j", "quad_job", "-c", str(config), "--tags",
                    json.dumps({"dagster/partition": delivery})], env=env, check=True,
                   capture_output=True, stdin=subprocess.DEVNULL, cwd=root)
    command = time.monotonic() - started
    os.environ["DAGSTER_HOME"] = env["DAGSTER_HOME"]
    import dagster as dg

    with dg.DagsterInstance.get() as instance:
        (record,) = instance.get_run_records(
            dg.RunsFilter(tags={"dagster/partition": delivery}))
        return command, record.end_time - record.start_time


def agent_seconds(root: Path, delivery: str) -> dict[str, float]:
    state = json.loads((root / "phases" / delivery / "index.json").read_text())
    return {s["name"]: json.loads((root / "phases" / delivery / s["name"] /
                                   f"step{s['step']}-output.json").read_text())["duration_s"]
            for s in state["steps"]}


def main() -> None:
    compile_package()
    work = Path(tempfile.mkdtemp(prefix="specops-par-bench-"))
    try:
        root = work / "harness"
        harness(root)
        # The literal agent; b and c think ~NAP_S before their first tool call.
        nap = {"before": [{"shell": "true", "sleep_s": NAP_S}]}
        turns = {n: [{"literal": nap if n in "bc" else {}}] * 2 for n in NEEDS}
        server = ReplayServer(Scenario.model_validate({"nodes": turns})).start()
        (work / "dh").mkdir()
        (work / "dh/dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        env = {**os.environ, "DAGSTER_HOME": str(work / "dh"), "SPECOPS_ROOT": str(root),
               "SPECOPS_REPLAY_URL": server.url, "SPECOPS_CODEX_HOME": str(work / "codex")}
        multi_cmd, multi = run(env, root, "p-multi", "multiprocess", work)
        single_cmd, single = run(env, root, "p-single", "in_process", work)
        server.stop()
        t = agent_seconds(root, "p-multi")
        critical = t["a"] + max(t["b"], t["c"]) + t["d"]
        print(f"diamond, middle agents ~{NAP_S:.0f} s, critical path of agent time "
              f"{critical:.1f} s (a {t['a']:.1f} + max(b {t['b']:.1f}, c {t['c']:.1f}) + "
              f"d {t['d']:.1f})\n"
              f"  multiprocess run {multi:.1f} s: ratio {multi / critical:.2f} (target <= 1.3); "
              f"in_process run {single:.1f} s: speed-up {single / multi:.2f}x\n"
              f"  whole `dagster job execute`: multiprocess {multi_cmd:.1f} s, ratio "
              f"{multi_cmd / critical:.2f}; in_process {single_cmd:.1f} s, speed-up "
              f"{single_cmd / multi_cmd:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
