"""A node with `execution.fan_out` runs one fresh codex session per task of its upstream task list,
each in its own worktree with its own budget; tasks are merged one at a time in task order with
the node's validation after each merge, and a failing task blocks only the tasks that need it
(issue #20 item 2). The agents are the literal replay agent: they know only their prompt."""

from __future__ import annotations

import os
import socket
import textwrap
from pathlib import Path

import git
import pytest

from specops_dag.agent.codex import AgentSettings
from specops_dag.delivery import lifecycle as ops
from specops_dag.delivery.queries import render_status, status_report, tokens
from specops_dag.delivery.store import Store
from specops_dag.execution.step import run_step
from specops_dag.files import sha256_file

from ..support.agents import attempts, replay
from ..support.cli import job_execute
from ..support.fanout import NOTHING, PLAN, TWO, harness, writes
from ..support.git import commit_paths
from ..support.processes import kill_when, start_run, survivors


@pytest.mark.e2e
def test_a_fan_out_merges_independent_tasks_and_a_failing_task_blocks_only_its_dependent(
        tmp_path: Path) -> None:
    store = harness(tmp_path)
    assert run_step(store, "d1", "plan").status == "completed"
    nodes = {"build.t1": [NOTHING] * 3, "build.t2": [writes("t2")], "build.t4": [writes("t4")],
             "build.t3": [writes("t3")]}
    events: list[str] = []
    with replay(tmp_path, nodes) as server:
        settings = AgentSettings(replay_url=server.url, codex_home=str(tmp_path / "codex-home"))
        outcome = run_step(store, "d1", "build", settings=settings, progress=events.append)
    assert outcome.status == "environment"
    state = store.read("d1")
    build = state.get_step("build")
    assert [(t.id, t.status, t.attempts) for t in build.tasks] == [
        ("t1", "failed", 3), ("t2", "merged", 1), ("t3", "blocked", 0), ("t4", "merged", 1)]
    assert build.tasks[2].error == "needs `t1`, which did not merge"
    assert build.tasks[0].error == (
        "budget spent: 3 of 3 sessions failed: exit 0 but the product did not change: a task "
        "changes the product (expected paths: src/t1.txt)")
    assert outcome.message == (
        "blocked: fan-out: 2 of 4 tasks merged; `t1` failed: " + build.tasks[0].error
        + "; `t3` blocked: needs `t1`, which did not merge; fix the cause, then `specops "
        "resume d1 build` (merged tasks are kept)")
    assert attempts(tmp_path, "build.t3") == []  # never ran
    assert [len(attempts(tmp_path, f"build.{t}")) for t in ("t1", "t2", "t4")] == [3, 1, 1]
    # each task's session is fresh, in its own worktree, and told its task and failure
    prompt = (store.delivery_dir("d1") / "build/tasks/t1/session2-prompt.md").read_text()
    assert "task `t1` (1 of 4)" in prompt and "attempt 2 of 3" in prompt
    assert "acceptance tests (each must exist, run and pass): App.Tests.T1.Works" in prompt
    assert "# Previous attempt failed\n\nexit 0 but the product did not change" in prompt
    repo = git.Repo(store.root)
    t2 = build.tasks[1]
    assert t2.branch == "feat-d1+build+t2"
    assert commit_paths(repo, t2.commits["product"]) == ["src/t2.txt"]
    tree = store.root / ".specops/worktrees/d1"
    assert sorted(p.name for p in (tree / "src").iterdir()) == ["t2.txt", "t4.txt"]
    merges = [c.summary for c in repo.iter_commits("feat-d1", max_count=2)]
    assert merges == ["[d1] build: merge task t4 (feat-d1+build+t4)",
                      "[d1] build: merge task t2 (feat-d1+build+t2)"]
    assert "build: task t2: merged" in " ".join(events)
    status = render_status(state, status_report(store.root, state)).splitlines()
    at = status.index("       tasks: 2 of 4 merged")
    spent = [sum(tokens(u) for u in t.usage) for t in build.tasks]
    assert spent[0] > 0 and spent[1] > 0 and spent[2] == 0  # each session's own tokens
    assert status[at + 1:at + 5] == [
        f"         t1               failed   attempt 3 [{spent[0]} tokens] "
        + build.tasks[0].error[:100],
        f"         t2               merged   attempt 1 [{spent[1]} tokens]",
        "         t3               blocked  attempt 0 needs `t1`, which did not merge",
        f"         t4               merged   attempt 1 [{spent[3]} tokens]"]
    assert status_report(store.root, state)["tasks"]["build"][1] == {
        "id": "t2", "status": "merged", "attempts": 1, "tokens": spent[1],
        "commits": build.tasks[1].commits, "error": None, "ran_on": {
            "host": socket.gethostname(), "pid": os.getpid(), "worker": None}}
    assert "Working directory: " + str((store.root / ".specops/worktrees/d1+build+t1")
                                       .resolve()) in prompt
    # tokens of every task session are the node's too
    assert sum(len(t.usage) for t in build.tasks) == len(build.usage) == 5

    # the person fixes the cause (here: t1's agent) and resumes: merged tasks are not redone
    ops.resume(store, "d1", "build")
    (tmp_path / "again").mkdir()
    nodes = {"build.t1": [writes("t1")], "build.t3": [writes("t3")]}
    with replay(tmp_path / "again", nodes) as server:
        settings = AgentSettings(replay_url=server.url, codex_home=str(tmp_path / "codex-home"))
        outcome = run_step(store, "d1", "build", settings=settings)
    assert outcome.status == "completed", outcome.message
    build = store.read("d1").get_step("build")
    assert [(t.id, t.status) for t in build.tasks] == [(t, "merged") for t in
                                                       ("t1", "t2", "t3", "t4")]
    assert [len(attempts(tmp_path / "again", f"build.{t}")) for t in ("t1", "t3")] == [1, 1]
    assert sorted(p.name for p in (tree / "src").iterdir()) == [f"t{i}.txt" for i in (1, 2, 3, 4)]
    changes = (store.delivery_dir("d1") / "build/changes.md").read_text()
    assert changes.startswith("## Task t1: First part\n\nChanged src/t1.txt.\n")
    assert [line for line in changes.splitlines() if line.startswith("## Task")] == [
        "## Task t1: First part", "## Task t2: Second part", "## Task t3: Builds on the first",
        "## Task t4: Fourth part"]
    assert build.handoff["changes"].path == "phases/d1/build/changes.md"
    assert not [p for p in (store.root / ".specops/worktrees").iterdir() if "+" in p.name]


@pytest.mark.e2e
def test_a_task_agent_raises_a_risk_through_its_prompts_risk_line_and_the_delivery_waits(
        tmp_path: Path) -> None:
    store = harness(tmp_path)
    assert run_step(store, "d1", "plan").status == "completed"
    risky = writes("t2")
    risky["literal"]["risk"] = "# Risk: t2 is not covered by a test that fails first\n"
    nodes = {"build.t1": [writes("t1")], "build.t2": [risky], "build.t3": [writes("t3")],
             "build.t4": [writes("t4")]}
    with replay(tmp_path, nodes) as server:
        settings = AgentSettings(replay_url=server.url, codex_home=str(tmp_path / "codex-home"))
        outcome = run_step(store, "d1", "build", settings=settings)
    assert outcome.status == "completed", outcome.message
    folder = store.delivery_dir("d1") / "build/tasks/t2"
    assert f"\nRISK: {folder.resolve() / 'risk.md'} — " in (folder / "session1-prompt.md").read_text()
    state = store.read("d1")
    assert [(r.node, r.path) for r in state.risks] == [
        ("build", "phases/d1/build/tasks/t2/risk.md")]
    assert state.status == "blocked"  # every step completed, a risk still open
    assert not (store.delivery_dir("d1") / "build/risk.md").exists()


BAD = textwrap.dedent("""\
    kind: task-list
    tasks:
      - {id: t1, title: First part, paths: [src/t1.txt], tests: [App.Tests.T1.Works]}
      - id: t2
        title: Second part
        needs: [t9]
        paths: [src/t2.txt]
        tests: [App.Tests.T2.Works]
    """)


@pytest.mark.e2e
def test_a_bad_task_list_blocks_the_node_with_file_line_and_fix_before_any_agent_call(
        tmp_path: Path) -> None:
    store = harness(tmp_path, BAD)
    assert run_step(store, "d1", "plan").status == "completed"
    with replay(tmp_path, {}) as server:
        settings = AgentSettings(replay_url=server.url, codex_home=str(tmp_path / "codex-home"))
        outcome = run_step(store, "d1", "build", settings=settings)
    assert (outcome.status, outcome.message) == ("blocked", (
        "bad task list: phases/d1/plan/tasks.yaml:6: tasks[1].needs: unknown task `t9`; name one "
        "of the task ids (t1, t2) or remove it; no agent call was made: fix the list (or "
        "`specops reopen d1 <the node that writes it>`), then `specops resume d1 build`"))
    assert not (tmp_path / "requests.jsonl").exists() or not (
        tmp_path / "requests.jsonl").read_text().strip()
    state = store.read("d1")
    assert (state.get_step("build").status, state.get_step("build").attempts) == ("blocked", 0)


INDEPENDENT = """\
kind: task-list
tasks:
  - {id: t1, title: First part, paths: [src/t1.txt], tests: [App.Tests.T1.Works]}
  - {id: t2, title: Second part, paths: [src/t2.txt], tests: [App.Tests.T2.Works]}
  - {id: t3, title: Third part, paths: [src/t3.txt], tests: [App.Tests.T3.Works]}
  - {id: t4, title: Fourth part, paths: [src/t4.txt], tests: [App.Tests.T4.Works]}
"""


@pytest.mark.e2e
def test_a_run_killed_in_the_middle_of_a_fan_out_redoes_no_finished_task(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    store = harness(tmp_path, INDEPENDENT, clean_env)
    root = store.root
    hang = [{"shell": "sleep 600", "sleep_s": 0}, {"hang": True}]
    nodes = {"build.t1": [writes("t1")], "build.t2": [writes("t2")],
             "build.t3": [hang, writes("t3")], "build.t4": [writes("t4")]}
    with replay(tmp_path, nodes) as server:
        env = {**clean_env, "SPECOPS_REPLAY_URL": server.url,
               "SPECOPS_CODEX_HOME": str(tmp_path / "codex-home")}
        proc = start_run(env, root, "plan_build_job")

        def t4_built_and_t3_running() -> bool:
            try:
                tasks = {t.id: t.status for t in Store(root).read("d1").get_step("build").tasks}
            except Exception:  # noqa: BLE001 — not written yet
                return False
            return tasks == {"t1": "merged", "t2": "merged", "t3": "running", "t4": "built"}

        kill_when(proc, t4_built_and_t3_running, limit_s=120)
        assert survivors(str(root)) == []  # no codex session outlives the killed run
        run = job_execute(env, root, "plan_build_job", "d1")
    assert run.returncode == 0, run.stderr[-3000:]
    build = Store(root).read("d1").get_step("build")
    assert (build.status, [(t.id, t.status, t.attempts) for t in build.tasks]) == (
        "completed", [("t1", "merged", 1), ("t2", "merged", 1), ("t3", "merged", 2),
                      ("t4", "merged", 1)])
    # agent calls redone after the kill: none (t3's interrupted session was never finished)
    assert [len(attempts(tmp_path, f"build.{t}")) for t in ("t1", "t2", "t3", "t4")] == [
        1, 1, 2, 1]
    tip = git.Repo(root).commit("feat-d1").tree
    assert [(tip / f"src/t{i}.txt").data_stream.read() for i in (1, 2, 3, 4)] == [
        b"t1\n", b"t2\n", b"t3\n", b"t4\n"]
    # the tasks are in the node's materialization metadata and their events in the run's log
    import dagster as dg

    with dg.DagsterInstance.get() as instance:
        key = dg.AssetKey(["plan-build", "build"])
        event = instance.get_latest_materialization_event(key)
        meta = event.asset_materialization.metadata
        assert meta["tasks_merged"].value == 4
        assert [(t["id"], t["status"], t["attempts"]) for t in meta["tasks"].value] == [
            ("t1", "merged", 1), ("t2", "merged", 1), ("t3", "merged", 2), ("t4", "merged", 1)]
        logs = [e.user_message for e in instance.all_logs(event.run_id)]
        assert "build: task t3: merged" in " ".join(logs)
        assert "build: fan-out of 4 tasks, at most 2 at once" in logs


VERIFY = """\
kind: phase
id: p-verify
input: {ports: {built: {contract: built}}}
execution:
  goal: Check what was built.
  executor: {kind: codex}
  timeout_s: 90
  idle_timeout_s: 30
  skills:
    - {id: verify-skill, path: skills/verify-skill/SKILL.md, load: entry, required: true}
output:
  ports: {report: {contract: report}}
  artifacts:
    - {id: report, path: report.md, required: true}
validation: none
"""

PLAN_BUILD_VERIFY = {
    "workflow_defs/workflows/plan-build-verify.yaml": """\
kind: workflow
id: plan-build-verify
inputs: {request: {contract: req}}
nodes:
  - {id: plan, phase: p-plan, inputs: {request: {input: request}}}
  - {id: build, phase: p-build, needs: [plan], inputs: {plan: {node: plan, output: plan}}}
  - {id: verify, phase: p-verify, needs: [build], inputs: {built: {node: build, output: built}}}
""",
    # the design node leaves its own section of the delivery handoff
    "workflow_defs/phases/p-plan.yaml": PLAN.replace(
        """'cp plan/tasks.yaml "$SPECOPS_NODE_DIR/tasks.yaml"'""",
        """'cp plan/tasks.yaml "$SPECOPS_NODE_DIR/tasks.yaml" && mkdir -p docs/phase/d1 && """
        """printf "## plan\\n\\nThe task list: phases/d1/plan/tasks.yaml\\n" """
        """> docs/phase/d1/handoff.md'"""),
    "workflow_defs/phases/p-verify.yaml": VERIFY,
    "workflow_defs/skills/verify-skill/SKILL.md": "---\nname: verify-skill\n---\nCheck it.\n",
}

BUILD_HANDOFF = """\
## plan

The task list: phases/d1/plan/tasks.yaml

## build

Written by the executor: the node's 2 tasks ran in sessions of their own and were merged into \
its tree in task order; the node's validation passed on the merged tree.

Tasks:
- `t1` First part: merged; task record docs/phase/d1/build-t1.md
- `t2` Second part: merged; task record docs/phase/d1/build-t2.md

Artifacts (every task's, put together in task order):
- `changes`: phases/d1/build/changes.md
"""


def everything(root: Path, task: str) -> dict:
    """A literal task agent that changes its task's product file, edits the shared handoff.md
    as the skills used to tell a task to (its WRITE does not name it), keeps a note in the task
    folder its prompt names ("put any other file this task produces under it"), then writes
    exactly what its WRITE names."""
    folder = (root / "phases/d1/build/tasks" / task).resolve()
    return {"literal": {
        "before": [{"shell": f"mkdir -p src && echo {task} > src/{task}.txt && printf "
                             f"'## build\\n\\n{task} was here\\n' >> docs/phase/d1/handoff.md"},
                   {"shell": f'echo {task} > "{folder}/notes.txt"'}],
        "files": {"changes.md": f"Changed src/{task}.txt.\n",
                  f"build-{task}.md": f"# Task {task}\n\nWrote src/{task}.txt.\n"}}}


@pytest.mark.e2e
def test_parallel_tasks_write_their_named_files_merge_and_the_next_step_gets_the_nodes_handoff(
        tmp_path: Path) -> None:
    store = harness(tmp_path, TWO, workflow="plan-build-verify", files=PLAN_BUILD_VERIFY)
    root = store.root
    assert run_step(store, "d1", "plan").status == "completed"
    nodes = {"build.t1": [everything(root, "t1")], "build.t2": [everything(root, "t2")],
             "verify": [NOTHING]}
    with replay(tmp_path, nodes) as server:
        settings = AgentSettings(replay_url=server.url, codex_home=str(tmp_path / "codex-home"))
        outcome = run_step(store, "d1", "build", settings=settings)
        assert outcome.status == "completed", outcome.message
        build = store.read("d1").get_step("build")
        assert [(t.id, t.status, t.attempts) for t in build.tasks] == [
            ("t1", "merged", 1), ("t2", "merged", 1)]
        tree = store.root / ".specops/worktrees/d1"
        handoff = tree / "docs/phase/d1/handoff.md"
        assert handoff.read_text() == BUILD_HANDOFF  # neither task's own edit got in
        plan_sha = store.read("d1").get_step("plan").delivery_handoff
        assert build.delivery_handoff == sha256_file(handoff) != plan_sha
        assert run_step(store, "d1", "verify", settings=settings).status == "completed"
    # each session wrote every path its WRITE names, all of them writable there
    for task in ("t1", "t2"):
        folder = (root / "phases/d1/build/tasks" / task).resolve()
        write = [f"{folder}/changes.md", f"docs/phase/d1/build-{task}.md"]
        assert (f"WRITE:\n- {write[0]} (required)\n- {write[1]} (task record: "
                in (folder / "session1-prompt.md").read_text())
        [thread] = attempts(tmp_path, f"build.{task}")
        assert thread[-1]["literal"] == {"action": "done", "wrote": write, "skipped": []}
        assert (folder / "changes.md").read_text() == f"Changed src/{task}.txt.\n"
        assert (folder / "notes.txt").read_text() == f"{task}\n"  # its folder, not the node's
    # the task records merged into the node's tree and were committed with its metadata
    tip = git.Repo(root).commit("feat-d1").tree
    assert [(tip / f"docs/phase/d1/build-{t}.md").data_stream.read() for t in ("t1", "t2")] == [
        b"# Task t1\n\nWrote src/t1.txt.\n", b"# Task t2\n\nWrote src/t2.txt.\n"]
    assert [(tip / f"src/{t}.txt").data_stream.read() for t in ("t1", "t2")] == [b"t1\n", b"t2\n"]
    prompt = (root / "phases/d1/verify/prompt.md").read_text()
    assert ("# Delivery handoff docs/phase/d1/handoff.md (as the last completed step left it)"
            "\n\n" + BUILD_HANDOFF) in prompt
    # a reopen moves the tasks' records aside with the node's files: a re-run starts without them
    assert ops.reopen(store, "d1", "build", "again") == ["build", "verify"]
    aside = root / "phases/d1/.revisions/build/1"
    for task in ("t1", "t2"):
        assert not (tree / f"docs/phase/d1/build-{task}.md").exists()
        assert (aside / f"docs/phase/d1/build-{task}.md").read_bytes() == (
            f"# Task {task}\n\nWrote src/{task}.txt.\n".encode())
