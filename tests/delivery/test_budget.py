from __future__ import annotations

import json
from pathlib import Path

import pytest

from specops_dag.delivery.lifecycle import new_delivery
from specops_dag.delivery.store import Store
from specops_dag.execution.step import run_step
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.agents import agentic_root, replay, settings_for
from ..support.cli import specops_at

pytestmark = pytest.mark.e2e

# An attempt that reads its inputs and writes its step record and handoff but not the required
# notes.md, in three model requests of 300 + 100 tokens: 1200 tokens per attempt.
FORGETFUL = {"literal": {"skip": ["notes.md"], "usage": {"input_tokens": 300,
                                                          "output_tokens": 100}}}


def requests_made(tmp_path: Path) -> int:
    return len((tmp_path / "requests.jsonl").read_text().splitlines())


def test_a_spent_phase_budget_blocks_the_step_before_another_call(tmp_path: Path) -> None:
    root = agentic_root(tmp_path)
    phase = root / "workflow_defs/phases/c-write.yaml"
    phase.write_text(phase.read_text().replace("  idle_timeout_s: 30",
                                               "  idle_timeout_s: 30\n  budget: {tokens: 2000}"))
    store = Store(root)
    new_delivery(store, load_catalog(definition_roots(root), display_base=root), "agentic", "d1",
                 "x")
    with replay(tmp_path, {"write": [FORGETFUL] * 3}) as server:
        outcomes = [run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
                    for _ in range(3)]
    assert [o.status for o in outcomes] == ["failed", "failed", "blocked"]
    assert outcomes[0].message == ("attempt 1/3 failed: exit 0 but required artifacts are "
                                   "missing: `notes` (phases/d1/write/notes.md)")
    assert outcomes[2].message == ("budget: step `write` used 2400 of its 2000 tokens (phase "
                                   "`c-write` budget.tokens); no further codex call is made")
    assert requests_made(tmp_path) == 6  # two attempts of three requests, none for the third
    step = store.read("d1").get_step("write")
    assert (step.status, step.blocked_reason) == ("blocked", outcomes[2].message)


def test_a_spent_delivery_budget_blocks_every_further_call(tmp_path: Path) -> None:
    root = agentic_root(tmp_path)
    store = Store(root)
    new_delivery(store, load_catalog(definition_roots(root), display_base=root), "agentic", "d1",
                 "x", budget_tokens=1000)
    with replay(tmp_path, {"write": [FORGETFUL] * 2}) as server:
        first = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
        second = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert (first.status, second.status) == ("failed", "blocked")
    assert second.message == ("budget: delivery `d1` used 1200 of its 1000 tokens; no further "
                              "codex call is made")
    assert requests_made(tmp_path) == 3  # the first attempt's three, none for the second
    status = json.loads(specops_at(root, "status", "d1", "--json").stdout)
    assert status["tokens"] == {"delivery": 1200, "budget": 1000, "cached_input": 0,
                                "per_node": {"write": 1200, "review": 0}}
    text = specops_at(root, "status", "d1").stdout.splitlines()
    assert text[2].startswith("  ■  0 write            blocked    [1200 tokens] budget: ")
    assert "tokens: 1200 of 1000" in text
