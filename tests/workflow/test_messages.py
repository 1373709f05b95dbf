"""A model's own errors as the author reads them: an unknown key with the keys allowed, a value
error without pydantic's prefix."""

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

NODES = "  - {id: a, phase: p-a, inputs: {request: {input: request}}}\n"

BAD = [
    pytest.param(
        {WF: diamond_with("  - {id: a, phase: p-a, nedds: [], inputs: {request: {input: request}}}\n")},
        [f"{WF}: nodes[0].nedds: unknown key `nedds`; remove it or fix the spelling (allowed: "
         "id, phase, needs, inputs, gates, review, context_files)"],
        id="unknown-key"),
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
    pytest.param(
        {WF: diamond_with(NODES).replace("nodes:", "budget: {usd: 0}\nnodes:")},
        [f"{WF}: budget.usd: Input should be greater than 0"],
        id="workflow-usd-budget-zero"),
    pytest.param(
        {WF: diamond_with(NODES).replace("nodes:", "budget: {tokens: 10, usd: '5'}\nnodes:")},
        [f"{WF}: budget.usd: Input should be a valid number, got text `5`; fix the value"],
        id="workflow-usd-budget-as-text"),
    pytest.param(
        {"workflow_defs/phases/p-a.yaml": command_phase(
            "p-a", WRITE_OUT, {"request": "req"}, {"out": "a-out"},
            extra="  budget: {usd: -0.5}\n")},
        ["workflow_defs/phases/p-a.yaml: execution.budget.usd: Input should be greater than 0",
         f"{WF}: nodes[0].phase: unknown phase `p-a` (known: p-b, p-c, p-d); add "
         "workflow_defs/phases/p-a.yaml or fix the id"],
        id="phase-usd-budget-negative"),
]


@pytest.mark.parametrize(("files", "expected"), BAD)
def test_a_bad_definition_is_reported_with_file_yaml_path_and_fix(
        tmp_path: Path, files: dict[str, str], expected: list[str]) -> None:
    root = write_tree(tmp_path, {**DIAMOND, **files})
    assert load_problems(root) == expected
