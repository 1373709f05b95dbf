"""Task fan-out (issue #20), printed as ratios of one run:

  A. a node fanning out into 4 independent tasks whose agents (the real codex CLI against the
     literal replay agent) think ~10 s each, `max_parallel: 4`, `codex` pool limit 4, launched with
     `dagster job execute` and the multiprocess executor: the node's wall time (its step record,
     start to completion) / (the longest task's sessions + every merge with its validation, as the
     task records time them) — target <= 1.3;
  B. the same fan-out killed (SIGKILL of `dagster job execute`) once two tasks are merged while two
     still think, then run again: agent calls redone = sessions of the tasks finished before the
     kill beyond their first (target 0).
Not a test: nothing asserts a time.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
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
TASKS = "kind: task-list\ntasks:\n" + "".join(
    f"  - {{id: t{i}, title: Part {i}, paths: [src/t{i}.txt], tests: [App.Tests.T{i}.Works]}}\n"
    for i in range(1, 5))
PLAN = """kind: phase
id: p-plan
input: {ports: {request: {contract: req}}}
execution:
  goal: Copy the task list.
  executor: {kind: command, argv: [sh, -c, 'cp plan/tasks.yaml "$SPECOPS_NODE_DIR/tasks.yaml"']}
output:
  ports: {plan: {contract: plan}}
  artifacts:
    - {id: tasks, path: tasks.yaml, required: true}
validation: none
"""
BUILD = """kind: phase
id: p-build
input: {ports: {plan: {contract: plan}}}
execution:
  goal: Build the task.
  executor: {kind: codex}
  skills:
    - {id: build, path: skills/build/SKILL.md, load: entry, required: true}
  fan_out: {tasks: {input: plan, artifact: tasks}, max_parallel: 4}
output:
  ports: {built: {contract: built}}
  artifacts:
    - {id: changes, path: changes.md, required: true}
validation: none
"""
WORKFLOW = """kind: workflow
id: fan
inputs: {request: {contract: req}}
nodes:
  - {id: plan, phase: p-plan, inputs: {request: {input: request}}}
  - {id: build, phase: p-build, needs: [plan], inputs: {plan: {node: plan, output: plan}}}
"""


def harness(root: Path) -> None:
    files = {"workflow_defs/workflows/fan.yaml": WORKFLOW,
             "workflow_defs/phases/p-plan.yaml": PLAN, "workflow_defs/phases/p-build.yaml": BUILD,
             "workflow_defs/skills/build/SKILL.md": "Build the task.\n", "plan/tasks.yaml": TASKS,
             "README.md": "# product\n", ".gitignore": ".dagster_home/\n"}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.com"}
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"],
                 ["git", "commit", "-q", "-m", "initial"]):
        subprocess.run(argv, cwd=root, env=env, check=True, stdin=subprocess.DEVNULL)


def task(i: int, nap_s: float) -> dict:
    """A literal task agent: thinks `nap_s` before its first tool call, then changes its file."""
    return {"literal": {"before": [{"shell": f"mkdir -p src && echo t{i} > src/t{i}.txt",
                                    "sleep_s": nap_s}],
                        "files": {"changes.md": f"Changed src/t{i}.txt.\n"}}}


def launch(env: dict[str, str], root: Path, delivery: str, work: Path,
           new: bool = True) -> subprocess.Popen:
    bin_dir = Path(sys.executable).parent
    made = None if not new else subprocess.run([str(bin_dir / "specops"), "new", "fan", delivery,
                                                "--request", "bench"], env=env,
                                               capture_output=True, text=True,
                                               stdin=subprocess.DEVNULL)
    assert made is None or made.returncode == 0, made.stderr
    config = work / "multiprocess.yaml"
    config.write_text("execution:\n  config:\n    multiprocess: {}\n")
    return subprocess.Popen(
        [str(bin_dir / "dagster"), "job", "execute", "-m", "specops_dag.definitions", "-j",
         "fan_job", "-c", str(config), "--tags", json.dumps({"dagster/partition": delivery})],
        env=env, cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)


def build_step(root: Path, delivery: str) -> dict:
    state = json.loads((root / "phases" / delivery / "index.json").read_text())
    return next(s for s in state["steps"] if s["name"] == "build")


def threads(log: Path, delivery: str, node: str) -> int:
    if not log.is_file():
        return 0
    return len({r["thread"] for r in map(json.loads, log.read_text().splitlines())
                if r["node"] == node and r.get("delivery", delivery) == delivery})


def main() -> None:
    compile_package()
    work = Path(tempfile.mkdtemp(prefix="specops-fan-bench-"))
    try:
        root = work / "harness"
        root.mkdir()
        harness(root)
        (work / "dh").mkdir()
        (work / "dh/dagster.yaml").write_text(
            "telemetry:\n  enabled: false\nconcurrency:\n  pools:\n    default_limit: 4\n")
        nodes = {f"f1/build.t{i}": [task(i, NAP_S)] for i in range(1, 5)}
        naps = {1: 1.0, 2: 2.0, 3: 30.0, 4: 30.0}  # the kill comes while t3 and t4 think
        nodes |= {f"f2/build.t{i}": [task(i, naps[i]), task(i, 1.0)] for i in range(1, 5)}
        log = work / "requests.jsonl"
        server = ReplayServer(Scenario.model_validate({"nodes": nodes}), log_path=log).start()
        env = {**os.environ, "DAGSTER_HOME": str(work / "dh"), "SPECOPS_ROOT": str(root),
               "SPECOPS_REPLAY_URL": server.url, "SPECOPS_CODEX_HOME": str(work / "codex")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        assert launch(env, root, "f1", work).wait(timeout=600) == 0, "the fan-out run failed"
        step = build_step(root, "f1")
        wall = (dt.datetime.fromisoformat(step["completed_at"])
                - dt.datetime.fromisoformat(step["started_at"])).total_seconds()
        longest = max(t["duration_s"] for t in step["tasks"])
        merges = sum(t["merge_s"] for t in step["tasks"])

        proc = launch(env, root, "f2", work)
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, "no kill point"
            try:
                done = [t["id"] for t in build_step(root, "f2")["tasks"]
                        if t["status"] == "merged"]
            except (OSError, ValueError, StopIteration, KeyError):
                done = []
            if len(done) >= 2:
                break
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        time.sleep(2)
        again = launch(env, root, "f2", work, new=False)
        again_code = again.wait(timeout=600)
        server.stop()
        redone = sum(threads(log, "f2", f"build.{t}") - 1 for t in done)
        status = build_step(root, "f2")["status"]
        print(f"fan-out of 4 independent tasks, agents ~{NAP_S:.0f} s, max_parallel 4, "
              f"multiprocess: node {wall:.1f} s / (longest task {longest:.1f} s + merges and "
              f"validations {merges:.1f} s) = {wall / (longest + merges):.2f} (target <= 1.3)")
        print(f"killed after {len(done)} tasks merged ({', '.join(done)}), then run again "
              f"(exit {again_code}, build {status}): agent calls redone {redone} (target 0)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
