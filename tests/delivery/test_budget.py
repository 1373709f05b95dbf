"""Token and USD budgets per phase and per delivery: the codex runs they stop (tokens, end to
end) and `budget_spent`'s verdicts on a delivery's state, a price table and a model (USD)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specops_dag.delivery.budget import budget_spent
from specops_dag.delivery.lifecycle import new_delivery
from specops_dag.delivery.model import Delivery, Usage
from specops_dag.delivery.pricing import Price, PriceTable
from specops_dag.delivery.store import Store
from specops_dag.execution.step import run_step
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.agents import agentic_root, replay, settings_for
from ..support.cli import specops_at
from ..support.harness import DIAMOND, WF, make_delivery, write_tree

# An attempt that reads its inputs and writes its step record and handoff but not the required
# notes.md, in three model requests of 300 + 100 tokens: 1200 tokens per attempt.
FORGETFUL = {"literal": {"skip": ["notes.md"], "usage": {"input_tokens": 300,
                                                          "output_tokens": 100}}}


def requests_made(tmp_path: Path) -> int:
    return len((tmp_path / "requests.jsonl").read_text().splitlines())


@pytest.mark.e2e
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


@pytest.mark.e2e
def test_a_spent_phase_usd_budget_blocks_a_real_run_before_another_call(tmp_path: Path) -> None:
    root = agentic_root(tmp_path)
    phase = root / "workflow_defs/phases/c-write.yaml"
    phase.write_text(phase.read_text().replace("  idle_timeout_s: 30",
                                               "  idle_timeout_s: 30\n  budget: {usd: 0.005}"))
    store = Store(root)
    new_delivery(store, load_catalog(definition_roots(root), display_base=root), "agentic", "d1",
                 "x")
    with replay(tmp_path, {"write": [FORGETFUL] * 3}) as server:
        outcomes = [run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
                    for _ in range(3)]
    # each attempt: 900 input and 300 output tokens of gpt-5.5 (the replay agent's model) at
    # $1.25 and $10 per 1M: $0.004125
    assert [o.status for o in outcomes] == ["failed", "failed", "blocked"]
    assert outcomes[2].message == ("budget: step `write` spent $0.00825 of its $0.005 (phase "
                                   "`c-write` budget.usd); no further codex call is made")
    assert requests_made(tmp_path) == 6
    assert [u.model for u in store.read("d1").get_step("write").usage] == ["gpt-5.5"] * 2


@pytest.mark.e2e
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
    # 900 input and 300 output tokens of gpt-5.5 at $1.25 and $10 per 1M
    assert text[2].startswith("  ■  0 write            blocked    [1200 tokens, $0.004125] "
                              "budget: ")
    assert "tokens: 1200 of 1000" in text
    assert ("cost: $0.004125 (prices as of 2026-12-01, built-in; cached input priced as cached)"
            in text)


# $10 per 1M output tokens: 1,230 output tokens cost $0.0123.
PRICES = PriceTable(as_of="2026-11-01", prices={"m": Price(input=1.0, cached_input=0.1,
                                                           output=10.0)})


def spent_state(root: Path, **outputs: int) -> Delivery:
    """The diamond delivery `d1` with one generator session per node of `outputs` tokens."""
    state = make_delivery(root).read("d1")
    for node, output in outputs.items():
        state.get_step(node).usage.append(Usage(attempt=1, output_tokens=output))
    return state


def test_a_spent_phase_usd_budget_stops_the_step(diamond_root: Path) -> None:
    state = spent_state(diamond_root, a=1_230)
    assert budget_spent(state, state.get_step("a"), None, phase_usd=0.01, prices=PRICES,
                        model="m") == ("budget: step `a` spent $0.0123 of its $0.01 (phase `p-a` "
                                       "budget.usd); no further codex call is made")
    assert budget_spent(state, state.get_step("a"), None, phase_usd=0.0123, prices=PRICES,
                        model="m") is not None  # spent = budget is spent
    assert budget_spent(state, state.get_step("a"), None, phase_usd=0.02, prices=PRICES,
                        model="m") is None


def test_review_rounds_spend_the_evaluator_phases_usd_budget_only(diamond_root: Path) -> None:
    state = spent_state(diamond_root, a=5_000)  # the generator's $0.05
    step = state.get_step("a")
    step.usage.append(Usage(attempt=1, output_tokens=1_230, role="evaluator"))
    assert budget_spent(state, step, None, "p-eval", "evaluator", phase_usd=0.01, prices=PRICES,
                        model="m") == ("budget: the review rounds of step `a` spent $0.0123 of "
                                       "its $0.01 (phase `p-eval` budget.usd); no further codex "
                                       "call is made")
    assert budget_spent(state, step, None, phase_usd=0.06, prices=PRICES, model="m") is None


def test_a_spent_delivery_usd_budget_stops_every_step(diamond_root: Path) -> None:
    state = spent_state(diamond_root, a=1_230, b=1_230)
    state.budget_usd = 0.02
    expected = "budget: delivery `d1` spent $0.0246 of its $0.02; no further codex call is made"
    assert budget_spent(state, state.get_step("c"), None, prices=PRICES, model="m") == expected
    assert budget_spent(state, state.get_step("d"), None, phase_usd=1.0, prices=PRICES,
                        model="m") == expected
    state.budget_usd = 0.03
    assert budget_spent(state, state.get_step("c"), None, prices=PRICES, model="m") is None


def test_a_usd_budget_with_a_model_that_has_no_price_stops_before_the_first_call(
        diamond_root: Path) -> None:
    state = spent_state(diamond_root)
    step = state.get_step("a")
    assert budget_spent(state, step, None, phase_usd=5.0, prices=PRICES, model="gpt-9") == (
        "budget: phase `p-a` budget.usd is set but model `gpt-9` has no price; add it to "
        "prices.yaml; no codex call is made until then")
    state.budget_usd = 5.0
    assert budget_spent(state, step, None, prices=PRICES, model=None) == (
        "budget: delivery `d1` budget.usd is set but no model is named (codex runs its "
        "configured default) and the price table has no `default_model`; name the model or set "
        "`default_model` in prices.yaml; no codex call is made until then")
    assert budget_spent(state, step, None) == (
        "budget: delivery `d1` budget.usd is set but no price table was given to count it with "
        "(a defect: report it); no codex call is made")


def test_without_a_usd_budget_no_price_is_needed_and_tokens_are_checked_first(
        diamond_root: Path) -> None:
    state = spent_state(diamond_root, a=1_230)
    step = state.get_step("a")
    assert budget_spent(state, step, 2_000) is None
    assert budget_spent(state, step, 2_000, model="gpt-9") is None
    assert budget_spent(state, step, 1_000, phase_usd=0.01, model="gpt-9") == (
        "budget: step `a` used 1230 of its 1000 tokens (phase `p-a` budget.tokens); no further "
        "codex call is made")


def test_a_delivery_takes_its_usd_budget_from_new_or_else_from_its_workflow(
        tmp_path: Path) -> None:
    root = write_tree(tmp_path, {**DIAMOND, WF: DIAMOND[WF].replace(
        "inputs: {request: {contract: req}}",
        "inputs: {request: {contract: req}}\n        budget: {usd: 2.5}")})
    store = Store(root)
    catalog = load_catalog(definition_roots(root), display_base=root)
    new_delivery(store, catalog, "diamond", "d1", "x")
    new_delivery(store, catalog, "diamond", "d2", "x", budget_usd=0.75)
    assert (store.read("d1").budget_usd, store.read("d2").budget_usd) == (2.5, 0.75)


def test_new_refuses_a_usd_budget_of_zero_and_creates_nothing(diamond_root: Path) -> None:
    result = specops_at(diamond_root, "new", "diamond", "d1", "--request", "x", "--budget-usd",
                        "0")
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == ("Error: Invalid value for '--budget-usd': 0.0 is "
                                              "not in the range x>0.")
    assert not (diamond_root / "phases").exists()


@pytest.mark.parametrize("usd", ["nan", "inf", "1e400"])
def test_new_refuses_a_usd_budget_that_is_not_a_finite_number_and_creates_nothing(
        diamond_root: Path, usd: str) -> None:
    result = specops_at(diamond_root, "new", "diamond", "d1", "--request", "x", "--budget-usd",
                        usd)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (f"Error: Invalid value for '--budget-usd': {usd} is "
                                              "not a finite number greater than 0.")
    assert not (diamond_root / "phases").exists()
