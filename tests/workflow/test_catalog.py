"""Loading: roots walked, files read and validated, definitions collected; a file that cannot be
read or does not match its name is one problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from specops_dag.builtin import BUILTIN_DEFS
from specops_dag.errors import DefinitionError
from specops_dag.workflow.catalog import definition_roots, load_catalog
from specops_dag.workflow.model import Budget

from ..support.harness import (
    DIAMOND,
    WF,
    WRITE_OUT,
    command_phase,
    diamond_with,
    load_problems,
    write_tree,
)

BAD = [
    pytest.param(
        {"workflow_defs/workflows/other.yaml": diamond_with(
            "  - {id: a, phase: p-a, inputs: {request: {input: request}}}\n")},
        ["workflow_defs/workflows/other.yaml: id: `diamond` does not match the file name `other`; "
         "change the id to `other`"],
        id="id-not-file-stem"),
    pytest.param(
        {WF: "kind: workflow\nid: diamond\nnodes: [\n"},
        [f"{WF}: invalid YAML at line 4, column 1: expected the node content, but found '<stream end>'; fix the syntax"],
        id="invalid-yaml"),
]


@pytest.mark.parametrize(("files", "expected"), BAD)
def test_a_bad_definition_is_reported_with_file_yaml_path_and_fix(
        tmp_path: Path, files: dict[str, str], expected: list[str]) -> None:
    root = write_tree(tmp_path, {**DIAMOND, **files})
    assert load_problems(root) == expected


def test_the_diamond_fixture_loads_without_problems(diamond_root: Path) -> None:
    catalog = load_catalog([diamond_root / "workflow_defs"], display_base=diamond_root)
    assert sorted(catalog.workflows) == ["diamond"]
    assert sorted(catalog.phases) == ["p-a", "p-b", "p-c", "p-d"]


def test_the_built_in_definitions_load_with_both_delivery_workflows() -> None:
    catalog = load_catalog([BUILTIN_DEFS])
    assert {"full-delivery", "quick-delivery"} <= set(catalog.workflows)
    full = [n.id for n in catalog.workflows["full-delivery"].nodes]
    quick = [n.id for n in catalog.workflows["quick-delivery"].nodes]
    assert full == ["requirements", "design", "develop", "integrate", "verify", "delivery"]
    assert quick == ["develop", "verify", "delivery"]
    for phase in catalog.phases.values():
        entry = [s for s in phase.execution.skills if s.load == "entry"]
        assert len(entry) == 1, phase.id
        assert len((BUILTIN_DEFS / entry[0].path).read_text().splitlines()) >= 25


def test_no_built_in_definition_names_a_dotnet_8_version() -> None:
    # Issue 42: the frozen target is named once, by the prompt's TARGET line; the work rules,
    # phases, skills and workflows refer to it, so a net10.0 repository is never told net8.0.
    found = [f"{path.relative_to(BUILTIN_DEFS.parent)}:{n}: {version}"
             for path in sorted(BUILTIN_DEFS.rglob("*")) if path.is_file()
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             for version in ("net8.0", ".NET 8", "8.0.x") if version in line]
    assert found == []


def test_a_harness_root_workflow_clashing_with_a_built_in_id_is_an_error(tmp_path: Path) -> None:
    write_tree(tmp_path, {"workflow_defs/workflows/quick-delivery.yaml": diamond_with(
        "  - {id: a, phase: p-a, inputs: {request: {input: request}}}\n").replace(
        "id: diamond", "id: quick-delivery"),
        "workflow_defs/phases/p-a.yaml": DIAMOND["workflow_defs/phases/p-a.yaml"]})
    with pytest.raises(DefinitionError) as info:
        load_catalog(definition_roots(tmp_path), display_base=tmp_path)
    assert info.value.problems == [
        "workflow_defs/workflows/quick-delivery.yaml: id: duplicate workflow id `quick-delivery` "
        "(also defined in built-in:workflow_defs/workflows/quick-delivery.yaml); rename one of them"]


def test_the_harness_roots_own_definitions_load_beside_the_built_in_ones(
        diamond_root: Path) -> None:
    catalog = load_catalog(definition_roots(diamond_root), display_base=diamond_root)
    assert {"diamond", "quick-delivery", "full-delivery"} <= set(catalog.workflows)


def test_a_budget_gives_usd_beside_tokens_on_a_phase_and_a_workflow(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {
        **DIAMOND, WF: DIAMOND[WF].replace("nodes:", "budget: {usd: 12}\n        nodes:"),
        "workflow_defs/phases/p-a.yaml": command_phase(
            "p-a", WRITE_OUT, {"request": "req"}, {"out": "a-out"},
            extra="  budget: {tokens: 5000, usd: 0.25}\n")})
    catalog = load_catalog([root / "workflow_defs"], display_base=root)
    assert catalog.workflows["diamond"].budget == Budget(usd=12.0)
    assert catalog.phases["p-a"].execution.budget == Budget(tokens=5000, usd=0.25)
    assert catalog.phases["p-b"].execution.budget == Budget()
