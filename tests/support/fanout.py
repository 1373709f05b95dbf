"""The plan -> build fan-out harness several test modules use: a plan node that copies a task
list and a codex build node that fans out over it (tests/execution/test_fanout.py and the Celery
tests), with literal replay agents that change one product file per task."""

from __future__ import annotations

from pathlib import Path

import git

from specops_dag.delivery import lifecycle as ops
from specops_dag.delivery.store import Store
from specops_dag.workflow.catalog import definition_roots, load_catalog

from .cli import specops
from .git import WHO
from .harness import write_tree

TASKS = """\
kind: task-list
tasks:
  - {id: t1, title: First part, paths: [src/t1.txt], tests: [App.Tests.T1.Works]}
  - {id: t2, title: Second part, paths: [src/t2.txt], tests: [App.Tests.T2.Works]}
  - {id: t3, title: Builds on the first, needs: [t1], paths: [src/t3.txt], tests: [App.Tests.T3.Works]}
  - {id: t4, title: Fourth part, paths: [src/t4.txt], tests: [App.Tests.T4.Works]}
"""

BUILD = """\
kind: phase
id: p-build
input: {ports: {plan: {contract: plan}}}
execution:
  goal: Build what the plan's tasks say.
  executor: {kind: codex}
  timeout_s: 90
  idle_timeout_s: 30
  skills:
    - {id: build-skill, path: skills/build-skill/SKILL.md, load: entry, required: true}
  fan_out: {tasks: {input: plan, artifact: tasks}, max_parallel: 2}
output:
  ports: {built: {contract: built}}
  artifacts:
    - {id: changes, path: changes.md, required: true}
validation: none
"""

PLAN = """\
kind: phase
id: p-plan
input: {ports: {request: {contract: req}}}
execution:
  goal: Copy the task list.
  executor: {kind: command, argv: [sh, -c, 'cp plan/tasks.yaml "$SPECOPS_NODE_DIR/tasks.yaml"'], timeout_s: 30}
output:
  ports: {plan: {contract: plan}}
  artifacts:
    - {id: tasks, path: tasks.yaml, required: true}
validation: none
"""

WORKFLOW = """\
kind: workflow
id: plan-build
inputs: {request: {contract: req}}
nodes:
  - {id: plan, phase: p-plan, inputs: {request: {input: request}}}
  - {id: build, phase: p-build, needs: [plan], inputs: {plan: {node: plan, output: plan}}}
"""


def harness(tmp_path: Path, tasks: str = TASKS, env: dict[str, str] | None = None,
            workflow: str = "plan-build", files: dict[str, str] | None = None) -> Store:
    """The plan -> build harness root (a git repository; `files` added to it) with delivery d1
    of `workflow` (made by `specops new` when `env` is given, so its Dagster partition
    exists)."""
    root = write_tree(tmp_path / "harness", {
        "workflow_defs/workflows/plan-build.yaml": WORKFLOW,
        "workflow_defs/phases/p-plan.yaml": PLAN, "workflow_defs/phases/p-build.yaml": BUILD,
        "workflow_defs/skills/build-skill/SKILL.md": "---\nname: build-skill\n---\nBuild it.\n",
        "plan/tasks.yaml": tasks, "README.md": "# product\n", ".gitignore": ".dagster_home/\n",
        **(files or {})})
    repo = git.Repo.init(root, initial_branch="main")
    repo.git.add(A=True)
    repo.index.commit("initial", author=WHO, committer=WHO)
    store = Store(root)
    if env is not None:
        made = specops(env, root, "new", workflow, "d1", "--request", "Build four parts.")
        assert made.returncode == 0, made.stderr
        return store
    ops.new_delivery(store, load_catalog(definition_roots(root), display_base=root),
                     workflow, "d1", "Build the four parts.")
    return store


def writes(task: str) -> dict:
    """A literal task agent that changes the product file its task names, then writes WRITE."""
    return {"literal": {"before": [{"shell": f"mkdir -p src && echo {task} > src/{task}.txt"}],
                        "files": {"changes.md": f"Changed src/{task}.txt.\n"}}}


NOTHING = {"literal": {}}  # writes its WRITE files but never touches the product


TWO = """\
kind: task-list
tasks:
  - {id: t1, title: First part, paths: [src/t1.txt], tests: [App.Tests.T1.Works]}
  - {id: t2, title: Second part, paths: [src/t2.txt], tests: [App.Tests.T2.Works]}
"""
