"""A fan-out node validated `full` honours the packages contract of `dotnet-build-hygiene` as an
ordinary step does (issue 43): the packages its upstream markdown lists under `## Packages` are
restored by the executor once, before its first task's session, outside the sandbox, into the
agent's own package folder, so a task agent's offline `dotnet restore` finds them; a package the
source does not serve is named in the node's preparation and blocks nothing. Real .NET SDK, real
codex CLI, the literal replay agent as each task's agent."""

from __future__ import annotations

import shutil
from pathlib import Path

import git
import pytest

from specops_dag.delivery import lifecycle as ops
from specops_dag.delivery.store import Store
from specops_dag.execution.step import run_step
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.agents import attempts, outputs_seen, replay, settings_for
from ..support.dotnet import FIXTURES
from ..support.fanout import BUILD, PLAN, WORKFLOW
from ..support.git import WHO
from ..support.harness import write_tree

REQUEST = """Use guard clauses in the calculator.

## Packages
- `Ardalis.GuardClauses` `5.0.0` — guard clauses (MIT)
- Specops.Does.Not.Exist 1.0.0 — made up, no source serves it
"""

TASKS = """\
kind: task-list
tasks:
  - {id: t1, title: Reference the guard clauses, paths: [src/Calc/Calc.csproj], tests: [Calc.Tests.CalculatorTests.Add_ReturnsSum]}
  - {id: t2, title: A note, paths: [src/t2.txt], tests: [Calc.Tests.CalculatorTests.Multiply_ReturnsProduct]}
"""

# the build node takes the delivery's request (whose `## Packages` lists them) and the plan's tasks
FILES = {
    "workflow_defs/workflows/plan-build.yaml": WORKFLOW.replace(
        "inputs: {plan: {node: plan, output: plan}}",
        "inputs: {request: {input: request}, plan: {node: plan, output: plan}}"),
    "workflow_defs/phases/p-plan.yaml": PLAN,
    "workflow_defs/phases/p-build.yaml": BUILD.replace(
        "input: {ports: {plan: {contract: plan}}}",
        "input: {ports: {request: {contract: req}, plan: {contract: plan}}}").replace(
        "validation: none", "validation: full"),
    "workflow_defs/skills/build-skill/SKILL.md": "---\nname: build-skill\n---\nBuild it.\n",
    "plan/tasks.yaml": TASKS,
    ".gitignore": ".dagster_home/\n",
}

ADD = ("sed -i 's#</Project>#  <ItemGroup>\\n    <PackageReference Include=\"Ardalis.GuardClauses\""
       " Version=\"5.0.0\" />\\n  </ItemGroup>\\n</Project>#' src/Calc/Calc.csproj")
RESTORE = "dotnet restore src/Calc/Calc.csproj -p:NuGetAudit=false"
NOTE = "echo t2 > src/t2.txt"


def harness(tmp_path: Path) -> Store:
    """The all-pass-net10 fixture as a git harness root with the plan -> build (fan-out,
    `validation: full`) workflow, and delivery d1 of it on REQUEST."""
    root = tmp_path / "harness"
    shutil.copytree(FIXTURES / "all-pass-net10", root)
    write_tree(root, FILES)
    repo = git.Repo.init(root, initial_branch="main")
    repo.git.add(A=True)
    repo.index.commit("initial", author=WHO, committer=WHO)
    store = Store(root)
    ops.new_delivery(store, load_catalog(definition_roots(root), display_base=root), "plan-build",
                     "d1", REQUEST)
    return store


@pytest.mark.dotnet
@pytest.mark.e2e
def test_a_fan_out_node_restores_the_packages_its_plan_lists_once_before_its_tasks_start(
        tmp_path: Path) -> None:
    store = harness(tmp_path)
    root = store.root.resolve()
    assert run_step(store, "d1", "plan").status == "completed"
    nodes = {
        "build.t1": [{"literal": {
            "before": [{"shell": ADD}, {"shell": RESTORE, "yield_time_ms": 240_000}],
            "files": {"changes.md": "Referenced Ardalis.GuardClauses 5.0.0.\n"}}}],
        "build.t2": [{"literal": {"before": [{"shell": NOTE}],
                                  "files": {"changes.md": "Wrote src/t2.txt.\n"}}}]}
    with replay(tmp_path, nodes) as server:
        outcome = run_step(store, "d1", "build", settings=settings_for(server, tmp_path))
    assert outcome.status == "completed", outcome.message
    build = store.read("d1").get_step("build")
    assert [(t.id, t.status, t.attempts) for t in build.tasks] == [
        ("t1", "merged", 1), ("t2", "merged", 1)]
    cache = root / ".specops/cache"
    assert build.preparation is not None and build.preparation.endswith(
        "; the plan's packages (`## Packages` of phases/d1/request.md): restored "
        f"Ardalis.GuardClauses 5.0.0 into {cache}/nuget-packages; the package source does not "
        "serve Specops.Does.Not.Exist (NU1101: no package with this id), so it was not restored "
        "and the agent cannot use it"), build.preparation
    assert (cache / "nuget-packages/ardalis.guardclauses/5.0.0/.nupkg.metadata").is_file()
    # restored once for the node, before any task's session: in the node's folder, not a task's
    assert (root / "phases/d1/build/validation/packages").is_dir()
    assert not list((root / "phases/d1/build/tasks").glob("*/validation/packages"))
    # in t1's sandbox (no network) the agent's own restore finds the package in its folder
    assert [len(attempts(tmp_path, f"build.{t}")) for t in ("t1", "t2")] == [1, 1]
    seen = outputs_seen(tmp_path, "build.t1")
    assert "Process exited with code 0" in seen[ADD], seen[ADD]
    restore = seen[RESTORE]
    assert "Process exited with code 0" in restore, restore
    assert "Restored " in restore and "Calc.csproj" in restore, restore
    for trouble in ("NU1301", "NU1101", "Permission denied", "Read-only file system"):
        assert trouble not in restore, restore
    tip = git.Repo(root).commit("feat-d1").tree
    assert b"Ardalis.GuardClauses" in (tip / "src/Calc/Calc.csproj").data_stream.read()
    assert (tip / "src/t2.txt").data_stream.read() == b"t2\n"
