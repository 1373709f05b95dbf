"""The graph walks (issue #19, item 4): find_cycle, topological_order and transitive_needs give the
order and messages they always gave, and none of them recurses, so a 10,000-node chain loads,
`specops check` names a cycle through it and `specops new` creates its delivery."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from specops_dag.builtin import BUILTIN_DEFS
from specops_dag.delivery.lifecycle import downstream_of, reopen
from specops_dag.delivery.queries import runnable_steps
from specops_dag.delivery.store import Store
from specops_dag.graph import find_cycle, topological_order, transitive_needs
from specops_dag.validation.dotnet import validate_full
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.harness import REPO, VENV_BIN, WRITE_OUT, command_phase, write_tree

N = 10_000  # ten times Python's recursion limit
CHAIN = {f"n{i}": [f"n{i - 1}"] if i else [] for i in range(N)}
DONE = "error: 1 problem(s) in the definitions; nothing was changed\n"
STANDIN = REPO / "tests" / "dotnet_standin"


def chain_root(root: Path, back_edge: bool = False) -> Path:
    """A harness whose workflow `long` is the chain n0 <- n1 <- ... <- n9999 of command nodes;
    n9999 takes its input from n0, the far end. With `back_edge`, n0 also needs n9999. Only
    n0 and n9999 have inputs: 10,000 nodes with one each would pass the 100,000 YAML-node cap."""
    back = f", needs: [n{N - 1}]" if back_edge else ""
    lines = [f"  - {{id: n0, phase: p-first{back}, inputs: {{request: {{input: request}}}}}}",
             *(f"  - {{id: n{i}, phase: p-link, needs: [n{i - 1}]}}" for i in range(1, N - 1)),
             f"  - {{id: n{N - 1}, phase: p-last, needs: [n{N - 2}], inputs: {{up: {{node: n0, "
             "output: out}}}"]
    return write_tree(root, {
        "workflow_defs/phases/p-first.yaml": command_phase(
            "p-first", WRITE_OUT, {"request": "req"}, {"out": "link"}),
        "workflow_defs/phases/p-link.yaml": command_phase("p-link", WRITE_OUT, {}, {"out": "link"}),
        "workflow_defs/phases/p-last.yaml": command_phase(
            "p-last", WRITE_OUT, {"up": "link"}, {"out": "link"}),
        "workflow_defs/workflows/long.yaml": (
            "kind: workflow\nid: long\ninputs: {request: {contract: req}}\nnodes:\n"
            + "\n".join(lines) + "\n")})


def specops(root: Path, *args: str, env: dict[str, str] | None = None
            ) -> tuple[subprocess.CompletedProcess, float]:
    """The real console script, stdin closed; its result and wall-clock seconds."""
    start = time.monotonic()
    result = subprocess.run([str(VENV_BIN / "specops"), "--root", str(root), *args], env=env,
                            capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    return result, time.monotonic() - start


def test_find_cycle_follows_the_mapping_order_then_each_nodes_needs_in_order() -> None:
    assert find_cycle({"a": ["b"], "b": ["a"]}) == ["a", "b", "a"]
    assert find_cycle({"a": ["c"], "b": ["a"], "c": ["b"]}) == ["a", "c", "b", "a"]
    assert find_cycle({"a": ["b", "c"], "b": [], "c": ["d"], "d": ["c"]}) == ["c", "d", "c"]
    assert find_cycle({"a": [], "b": ["c"], "c": ["b"]}) == ["b", "c", "b"]
    assert find_cycle({"a": ["a"]}) == ["a", "a"]


def test_find_cycle_ignores_needs_naming_no_node_and_finds_none_in_a_diamond() -> None:
    assert find_cycle({"a": ["zz"], "b": ["a", "zz"]}) is None
    assert find_cycle({"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}) is None
    assert find_cycle({}) is None


def test_find_cycle_names_a_project_reference_cycle_by_path() -> None:
    a, b, c = Path("/r/A.csproj"), Path("/r/B.csproj"), Path("/r/C.csproj")
    assert find_cycle({a: [b], b: [c], c: [a]}) == [a, b, c, a]
    assert find_cycle({a: [b], b: [c], c: []}) is None


def test_topological_order_puts_the_first_ready_node_of_the_mapping_next() -> None:
    graph = {"d": ["b", "c"], "c": ["a"], "b": ["a"], "a": [], "e": []}
    assert topological_order(graph) == ["a", "c", "b", "d", "e"]
    assert topological_order({"b": ["a", "zz"], "a": []}) == ["a", "b"]


def test_topological_order_of_a_cycle_raises_naming_the_nodes_left_waiting() -> None:
    with pytest.raises(ValueError) as info:
        topological_order({"a": [], "b": ["c"], "c": ["b"], "d": ["b"], "e": ["a"]})
    assert str(info.value) == "needs cycle among ['b', 'c', 'd']"


def test_transitive_needs_are_every_node_reached_through_needs_in_the_graphs_order() -> None:
    needs = transitive_needs({"d": ["b", "c"], "c": ["a"], "b": ["a"], "a": [], "e": ["zz"]})
    assert {k: list(v) for k, v in needs.items()} == {
        "d": ["c", "b", "a"], "c": ["a"], "b": ["a"], "a": [], "e": []}
    assert needs["d"] == {"a", "b", "c"} and {"a", "b", "c"} == needs["d"]
    assert ("a" in needs["d"], "d" in needs["d"], "zz" in needs["e"], len(needs["d"])) == (
        True, False, False, 3)
    assert sorted(needs["d"]) == ["a", "b", "c"]


def test_transitive_needs_of_a_cycle_raises() -> None:
    with pytest.raises(ValueError) as info:
        transitive_needs({"a": ["b"], "b": ["a"]})
    assert str(info.value) == "needs cycle among ['a', 'b']"


def test_the_three_walks_take_a_ten_thousand_node_chain() -> None:
    assert topological_order(dict(reversed(CHAIN.items()))) == list(CHAIN)
    needs = transitive_needs(CHAIN)
    assert needs[f"n{N - 1}"] == set(CHAIN) - {f"n{N - 1}"} and not needs["n0"]
    assert find_cycle(CHAIN) is None
    assert find_cycle({**CHAIN, "n0": [f"n{N - 1}"]}) == [
        "n0", *(f"n{i}" for i in range(N - 1, 0, -1)), "n0"]


def test_a_ten_thousand_project_reference_chain_with_a_back_edge_has_its_cycle_named() -> None:
    projects = [Path(f"/r/P{i}/P{i}.csproj") for i in range(N)]
    graph = {p: [projects[i + 1]] if i + 1 < N else [] for i, p in enumerate(projects)}
    assert find_cycle(graph) is None
    graph[projects[-1]] = [projects[0]]
    assert find_cycle(graph) == [*projects, projects[0]]


def test_specops_check_accepts_a_ten_thousand_node_chain(tmp_path: Path) -> None:
    root = chain_root(tmp_path / "harness")
    result, seconds = specops(root, "check")
    builtin = load_catalog([BUILTIN_DEFS])
    skills = sum(1 for kind, _ in builtin.sources if kind == "skill")
    roots = ", ".join(str(r) for r in definition_roots(root.resolve()))
    assert (result.returncode, result.stderr, result.stdout) == (
        0, "", f"ok: {len(builtin.workflows) + 1} workflows, {len(builtin.phases) + 3} phases, "
               f"{skills} skills from {roots}\n")
    assert seconds < 60


def test_specops_check_names_the_cycle_a_back_edge_closes_through_the_chain(
        tmp_path: Path) -> None:
    root = chain_root(tmp_path / "harness", back_edge=True)
    result, seconds = specops(root, "check")
    cycle = " -> ".join(["n0", *(f"n{i}" for i in range(N - 1, 0, -1)), "n0"])
    assert (result.returncode, result.stdout, result.stderr) == (
        2, "", f"workflow_defs/workflows/long.yaml: nodes: cycle {cycle}; remove one of these "
               f"needs\n{DONE}")
    assert seconds < 60


def test_specops_new_creates_a_ten_thousand_step_delivery_whose_state_walks_work(
        tmp_path: Path, clean_env: dict[str, str]) -> None:
    root = chain_root(tmp_path / "harness")
    result, seconds = specops(root, "new", "long", "d1", "--request", "x", env=clean_env)
    assert (result.returncode, result.stderr, result.stdout) == (
        0, "", "created delivery d1 (long, 10000 steps) in phases/d1/; run it with "
               "`specops run d1`\n")
    assert seconds < 60
    store = Store(root)
    state = store.read("d1")
    assert [s.name for s in state.steps] == list(CHAIN)
    assert runnable_steps(state) == ["n0"]
    assert downstream_of(state, f"n{N - 2}") == [f"n{N - 2}", f"n{N - 1}"]
    with store.transaction("d1") as state:
        for step in state.steps:
            step.status = "completed"
    start = time.monotonic()
    assert reopen(store, "d1", "n0") == list(CHAIN)
    assert time.monotonic() - start < 30
    assert {s.status for s in store.read("d1").steps} == {"pending"}


def test_full_validation_names_a_project_reference_cycle_relative_to_the_repository(
        tmp_path: Path) -> None:
    # all-pass, except that Calc also references Calc.Tests (which references Calc)
    root = tmp_path / "repo"
    shutil.copytree(REPO / "dotnet_fixtures" / "all-pass", root)
    calc, tests = "src/Calc/Calc.csproj", "tests/Calc.Tests/Calc.Tests.csproj"
    item = {"Identity": f"../../{tests}", "FullPath": f"{{root}}/{tests}", "RootDir": "/",
            "Filename": "Calc.Tests", "Extension": ".csproj",
            "RelativeDir": "../../tests/Calc.Tests/",
            "Directory": "{root_unrooted}/tests/Calc.Tests/", "RecursiveDir": "",
            "ModifiedTime": "2024-11-20 10:14:05.3180412",
            "CreatedTime": "2024-11-20 10:14:05.3180412",
            "AccessedTime": "2024-11-20 10:15:38.7709451",
            "DefiningProjectFullPath": f"{{root}}/{calc}",
            "DefiningProjectDirectory": "{root}/src/Calc/",
            "DefiningProjectName": "Calc", "DefiningProjectExtension": ".csproj"}
    evaluation = {"Properties": {"TargetFramework": "net8.0", "TargetFrameworks": "",
                                 "IsRoslynComponent": ""}, "Items": {"ProjectReference": [item]}}
    answers = tmp_path / "answers.yaml"
    answers.write_text(json.dumps({
        "extends": str(STANDIN / "answers" / "all-pass.yaml"),
        "answers": [{"argv": ["msbuild", f"{{root}}/{calc}", "-nologo", "-nodeReuse:false",
                              "-p:Configuration=Release", "-getProperty:TargetFramework",
                              "-getProperty:TargetFrameworks", "-getProperty:IsRoslynComponent",
                              "-getItem:ProjectReference"],
                     "stdout": json.dumps(evaluation, indent=2) + "\n", "exit": 0}]}))
    env = {**os.environ, "PATH": f"{STANDIN}:{os.environ['PATH']}",
           "DOTNET_STANDIN_ANSWERS": str(answers)}
    report = validate_full(root, tmp_path / "logs", env=env)
    assert (report.passed, report.stage, report.message) == (
        False, "evaluation", f"ProjectReference cycle: {calc} -> {tests} -> {calc}")
