from __future__ import annotations

from pathlib import Path

import pytest

from specops_dag.builtin import BUILTIN_DEFS
from specops_dag.errors import DefinitionError
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.harness import DIAMOND, WF, WRITE_OUT, command_phase, load_problems, write_tree

WFF = "workflows/diamond.yaml"


def diamond_with(nodes: str, inputs: str = "{request: {contract: req}}") -> str:
    return f"kind: workflow\nid: diamond\ninputs: {inputs}\nnodes:\n{nodes}"


CODEX_PHASE = """
kind: phase
id: p-x
execution:
  goal: Think.
  executor: {{kind: codex}}
  skills:
{skills}
output: {{ports: {{out: {{contract: x-out}}}}}}
"""

BAD = [
    pytest.param(
        {WF: diamond_with("  - {id: a, phase: p-a, inputs: {request: {input: request}}}\n"
                          "  - {id: a, phase: p-a, inputs: {request: {input: request}}}\n")},
        [f"{WF}: nodes[1].id: duplicate node id `a` (first at nodes[0]); give each node a "
         "unique id"],
        id="duplicate-node-id"),
    pytest.param(
        {WF: diamond_with("  - {id: a, phase: p-a, inputs: {request: {input: request}}}\n"
                          "  - {id: b, phase: p-b, needs: [spec], inputs: {up: {node: a, output: out}}}\n")},
        [f"{WF}: nodes[1].needs[0]: unknown node `spec` (known: a, b)",
         f"{WF}: nodes[1].inputs.up.node: `a` is not upstream of `b` (upstream: none); add `a` "
         "to nodes[1].needs or take the input from an upstream node"],
        id="unknown-needs"),
    pytest.param(
        {WF: diamond_with("  - {id: a, phase: p-b, needs: [c], inputs: {up: {node: c, output: out}}}\n"
                          "  - {id: b, phase: p-b, needs: [a], inputs: {up: {node: a, output: out}}}\n"
                          "  - {id: c, phase: p-b, needs: [b], inputs: {up: {node: b, output: out}}}\n")},
        [f"{WF}: nodes: cycle a -> c -> b -> a; remove one of these needs"],
        id="cycle"),
    pytest.param(
        {WF: diamond_with("  - {id: a, phase: p-a, inputs: {request: {input: request}}}\n"
                          "  - {id: b, phase: p-b, needs: [a], inputs: {up: {node: a, output: out}}}\n"
                          "  - {id: c, phase: p-c, needs: [a], inputs: {up: {node: b, output: out}}}\n")},
        [f"{WF}: nodes[2].inputs.up.node: `b` is not upstream of `c` (upstream: a); add `b` to "
         "nodes[2].needs or take the input from an upstream node"],
        id="input-not-upstream"),
    pytest.param(
        {WF: diamond_with("  - {id: a, phase: p-a, inputs: {request: {input: request}}}\n"
                          "  - {id: b, phase: p-d, needs: [a], inputs: {left: {node: a, output: out}, right: {node: a, output: out}}}\n")},
        [f"{WF}: nodes[1].inputs.left: contract mismatch: node `a` output `out` is `a-out`, phase "
         "`p-d` port `left` expects `b-out`; make the contracts match",
         f"{WF}: nodes[1].inputs.right: contract mismatch: node `a` output `out` is `a-out`, "
         "phase `p-d` port `right` expects `c-out`; make the contracts match"],
        id="contract-mismatch"),
    pytest.param(
        {WF: diamond_with("  - {id: a, phase: p-a, inputs: {}}\n")},
        [f"{WF}: nodes[0].inputs: missing input `request` required by phase `p-a`; add "
         "`request: {node: <upstream>, output: <port>}`"],
        id="missing-port"),
    pytest.param(
        {WF: diamond_with("  - {id: a, phase: p-a, inputs: {request: {input: request}}}\n"
                          "  - {id: b, phase: p-b, needs: [a], inputs: {up: {node: a, output: nope}}}\n")},
        [f"{WF}: nodes[1].inputs.up.output: node `a` (phase `p-a`) has no output port `nope` "
         "(has: out)"],
        id="unknown-output-port"),
    pytest.param(
        {"workflow_defs/phases/p-x.yaml": CODEX_PHASE.format(
            skills="    - {id: helper, path: skills/helper/SKILL.md, load: on-demand}"),
         "workflow_defs/skills/helper/SKILL.md": "# helper\n"},
        ["workflow_defs/phases/p-x.yaml: execution.skills: no entry skill; add exactly one skill "
         "with `load: entry` (the phase's main skill)"],
        id="missing-entry-skill"),
    pytest.param(
        {"workflow_defs/phases/p-x.yaml": CODEX_PHASE.format(
            skills="    - {id: one, path: skills/one/SKILL.md, load: entry, required: true}\n"
                   "    - {id: two, path: skills/two/SKILL.md, load: entry, required: true}"),
         "workflow_defs/skills/one/SKILL.md": "# one\n", "workflow_defs/skills/two/SKILL.md": "# two\n"},
        ["workflow_defs/phases/p-x.yaml: execution.skills[1].load: second entry skill `two` "
         "(first: `one` at execution.skills[0]); a phase has exactly one entry skill, make the "
         "others `load: on-demand`"],
        id="duplicate-entry-skill"),
    pytest.param(
        {"workflow_defs/phases/p-x.yaml": CODEX_PHASE.format(
            skills="    - {id: one, path: skills/one/SKILL.md, load: entry, required: true}"),
         "workflow_defs/skills/one/SKILL.md": "# one\n",
         "workflow_defs/skills/graph.yaml": "edges:\n  - {from: one, to: ghost, type: dynamic_load, reason: r}\n"},
        ["workflow_defs/skills/graph.yaml: edges[0].to: skill `ghost` is not bound by any phase "
         "(bound: one); bind it in a phase's execution.skills or remove the edge"],
        id="graph-edge-to-unbound-skill"),
    pytest.param(
        {"workflow_defs/phases/p-x.yaml": CODEX_PHASE.format(
            skills="    - {id: one, path: skills/one/SKILL.md, load: entry, required: true}")},
        ["workflow_defs/phases/p-x.yaml: execution.skills[0].path: skill file not found: "
         "workflow_defs/skills/one/SKILL.md; create it or fix the path"],
        id="missing-skill-file"),
    pytest.param(
        {"workflow_defs/phases/p-a.yaml": command_phase(
            "p-a", WRITE_OUT, {"request": "req"}, {"out": "a-out"}, artifact="../../escape.md")},
        ["workflow_defs/phases/p-a.yaml: output.artifacts[0].path: `../../escape.md` escapes the "
         "phase folder; use a path relative to the node folder phases/<delivery>/<node>/"],
        id="artifact-escapes"),
    pytest.param(
        {"workflow_defs/phases/p-a.yaml": command_phase(
            "p-a", WRITE_OUT, {"request": "req"}, {"out": "a-out"}, artifact="/etc/passwd")},
        ["workflow_defs/phases/p-a.yaml: output.artifacts[0].path: `/etc/passwd` is absolute; "
         "use a path relative to the node folder phases/<delivery>/<node>/"],
        id="artifact-absolute"),
    pytest.param(
        {WF: diamond_with("  - {id: a, phase: p-a, nedds: [], inputs: {request: {input: request}}}\n")},
        [f"{WF}: nodes[0].nedds: unknown key `nedds`; remove it or fix the spelling (allowed: "
         "id, phase, needs, inputs, gates, review, context_files)"],
        id="unknown-key"),
    pytest.param(
        {WF: diamond_with("  - {id: a, phase: p-zz, inputs: {request: {input: request}}}\n")},
        [f"{WF}: nodes[0].phase: unknown phase `p-zz` (known: p-a, p-b, p-c, p-d); add "
         "workflow_defs/phases/p-zz.yaml or fix the id"],
        id="unknown-phase"),
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
    pytest.param(
        {WF: diamond_with("  - {id: a, phase: p-a, inputs: {request: {input: request}}}\n"
                          "  - {id: b, phase: p-b, needs: [a], inputs: {up: {node: a}}}\n")},
        [f"{WF}: nodes[1].inputs.up: give either `input: <workflow input>` or `node: <id>, "
         "output: <port>`"],
        id="half-input-ref"),
    pytest.param(
        {"workflow_defs/phases/p-a.yaml": "kind: phase\nid: p-a\nexecution:\n  goal: g\n"
                                          "  executor: {kind: command}\n"},
        ["workflow_defs/phases/p-a.yaml: execution.executor: a command executor needs `argv`: a "
         "non-empty list of strings",
         f"{WF}: nodes[0].phase: unknown phase `p-a` (known: p-b, p-c, p-d); add "
         "workflow_defs/phases/p-a.yaml or fix the id"],
        id="command-without-argv"),
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
    assert full == ["requirements", "design", "develop", "verify", "delivery"]
    assert quick == ["develop", "verify", "delivery"]
    for phase in catalog.phases.values():
        entry = [s for s in phase.execution.skills if s.load == "entry"]
        assert len(entry) == 1, phase.id
        assert len((BUILTIN_DEFS / entry[0].path).read_text().splitlines()) >= 25


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


def test_a_command_phase_with_skills_is_refused(tmp_path: Path) -> None:
    phase = command_phase("p-a", WRITE_OUT, {"request": "req"}, {"out": "a-out"},
                          extra="  skills:\n    - {id: s, path: skills/s/SKILL.md, load: entry}\n")
    root = write_tree(tmp_path, {**DIAMOND, "workflow_defs/phases/p-a.yaml": phase,
                                 "workflow_defs/skills/s/SKILL.md": "# s\n"})
    assert load_problems(root) == [
        "workflow_defs/phases/p-a.yaml: execution.skills: a command phase loads no skills; "
        "remove them or use `executor: {kind: codex}`"]
