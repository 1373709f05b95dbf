"""The cross-file rules: nodes, needs and cycles, inputs and contracts, entry skills and skill
files, skill-graph edges, artifact paths; each problem named by file, YAML path and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..support.harness import (
    DIAMOND,
    WF,
    WRITE_OUT,
    command_phase,
    diamond_with,
    load_problems,
    write_tree,
)

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
        {WF: diamond_with("  - {id: a, phase: p-zz, inputs: {request: {input: request}}}\n")},
        [f"{WF}: nodes[0].phase: unknown phase `p-zz` (known: p-a, p-b, p-c, p-d); add "
         "workflow_defs/phases/p-zz.yaml or fix the id"],
        id="unknown-phase"),
]


@pytest.mark.parametrize(("files", "expected"), BAD)
def test_a_bad_definition_is_reported_with_file_yaml_path_and_fix(
        tmp_path: Path, files: dict[str, str], expected: list[str]) -> None:
    root = write_tree(tmp_path, {**DIAMOND, **files})
    assert load_problems(root) == expected


def test_a_command_phase_with_skills_is_refused(tmp_path: Path) -> None:
    phase = command_phase("p-a", WRITE_OUT, {"request": "req"}, {"out": "a-out"},
                          extra="  skills:\n    - {id: s, path: skills/s/SKILL.md, load: entry}\n")
    root = write_tree(tmp_path, {**DIAMOND, "workflow_defs/phases/p-a.yaml": phase,
                                 "workflow_defs/skills/s/SKILL.md": "# s\n"})
    assert load_problems(root) == [
        "workflow_defs/phases/p-a.yaml: execution.skills: a command phase loads no skills; "
        "remove them or use `executor: {kind: codex}`"]


def test_a_sprint_contract_needs_a_codex_phase_an_evaluator_and_full_validation(
        tmp_path: Path) -> None:
    contract = "  contract: {evaluator: p-b}\n"
    files = {"workflow_defs/phases/p-a.yaml": command_phase(
        "p-a", WRITE_OUT, {"request": "req"}, {"out": "a-out"}, extra=contract)}
    root = write_tree(tmp_path, {**DIAMOND, **files})
    assert load_problems(root) == [
        "workflow_defs/phases/p-a.yaml: execution.contract: only a `codex` phase negotiates a "
        "contract; remove it or use `executor: {kind: codex}`",
        "workflow_defs/phases/p-a.yaml: execution.contract: a contract's tests are proven by the "
        "attempt's TRX, which `validation: none` does not run; use `validation: full` or remove "
        "the contract"]
