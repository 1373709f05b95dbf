"""The price table and its money arithmetic: the dated built-in table, `prices.yaml` merged over
it with one exact message per problem, and tokens turned into USD per session, attempt, review
round, task, node and delivery."""

from __future__ import annotations

from pathlib import Path

import pytest

from specops_dag.delivery.model import Delivery, ReviewRecord, ReviewUsage, Step, TaskRecord, Usage
from specops_dag.delivery.pricing import (
    DEFAULT_PRICES,
    Price,
    PriceTable,
    attempt_cost,
    cost_usd,
    delivery_cost,
    load_prices,
    money_totals,
    node_cost,
    round_cost,
    task_cost,
    unpriced_reason,
    usd_text,
)
from specops_dag.errors import DefinitionError

# USD 1, 0.1 and 10 per 1M tokens: a session's cost reads off its token counts.
TABLE = PriceTable(as_of="2026-11-01", prices={"m": Price(input=1.0, cached_input=0.1,
                                                          output=10.0)})


def usage(attempt: int = 1, input_tokens: int = 0, cached: int = 0, output: int = 0,
          reasoning: int = 0, role: str = "generator", task: str | None = None) -> Usage:
    return Usage(attempt=attempt, input_tokens=input_tokens, cached_input_tokens=cached,
                 output_tokens=output, reasoning_output_tokens=reasoning, role=role, task=task)


def delivery(*steps: Step) -> Delivery:
    return Delivery.model_validate({
        "project": "p", "phase": "d1", "workflow": "w", "request": "x", "target": ".",
        "created_at": "2026-11-01T00:00:00Z", "updated_at": "2026-11-01T00:00:00Z",
        "snapshot": {"workflow": "w", "files": []}, "steps": list(steps)})


def write_prices(root: Path, text: str) -> Path:
    (root / "prices.yaml").write_text(text, encoding="utf-8")
    return root


def test_without_a_prices_file_the_dated_built_in_table_prices_the_common_models(
        tmp_path: Path) -> None:
    table = load_prices(tmp_path)
    assert table is DEFAULT_PRICES
    assert (table.as_of, table.source, table.default_model) == ("2026-12-01", "built-in", None)
    assert {"gpt-5.5", "gpt-5", "gpt-5-mini", "gpt-5-codex", "o4-mini", "gpt-4.1"} <= set(
        table.prices)
    assert table.prices["gpt-5"] == Price(input=1.25, cached_input=0.125, output=10.0)


def test_a_prices_file_replaces_the_models_it_names_and_keeps_the_others(tmp_path: Path) -> None:
    write_prices(tmp_path, "as_of: 2026-11-01\ndefault_model: local\nprices:\n"
                           "  gpt-5.5: {input: 2, cached_input: 0.2, output: 16.5}\n"
                           "  local: {input: 0, cached_input: 0, output: 0}\n")
    table = load_prices(tmp_path)
    assert (table.as_of, table.source, table.default_model) == ("2026-11-01", "prices.yaml",
                                                                "local")
    assert table.prices["gpt-5.5"] == Price(input=2.0, cached_input=0.2, output=16.5)
    assert table.prices["local"] == Price(input=0.0, cached_input=0.0, output=0.0)
    assert table.prices["gpt-5"] == DEFAULT_PRICES.prices["gpt-5"]
    assert "local" not in DEFAULT_PRICES.prices  # the built-in table is not changed


def test_a_default_model_may_name_a_built_in_price(tmp_path: Path) -> None:
    write_prices(tmp_path, "as_of: '2026-11-01'\ndefault_model: o4-mini\n")
    table = load_prices(tmp_path)
    assert table.default_model == "o4-mini"
    assert table.prices == DEFAULT_PRICES.prices


PRICE = "as_of: 2026-11-01\nprices:\n  gpt-5.5: {entry}\n"
BAD_FILES = [
    pytest.param(PRICE.format(entry="{input: 1, cached_input: 0.1, output: 8, outptu: 9}"),
                 ["prices.yaml: prices.gpt-5.5.outptu: unknown key `outptu`; remove it or fix "
                  "the spelling (allowed: input, cached_input, output)"], id="unknown-price-key"),
    pytest.param("as_of: 2026-11-01\ncurrency: EUR\n",
                 ["prices.yaml: currency: unknown key `currency`; remove it or fix the spelling "
                  "(allowed: as_of, default_model, prices)"], id="unknown-top-level-key"),
    pytest.param(PRICE.format(entry="{input: 1, cached_input: 0.1, output: -8}"),
                 ["prices.yaml: prices.gpt-5.5.output: Input should be greater than or equal "
                  "to 0; write USD per 1M tokens, 0 or more"], id="negative"),
    pytest.param(PRICE.format(entry="{input: 1, cached_input: .inf, output: 8}"),
                 ["prices.yaml: prices.gpt-5.5.cached_input: Input should be a finite number; "
                  "write USD per 1M tokens, 0 or more"], id="infinite"),
    pytest.param(PRICE.format(entry="{input: '1.25', cached_input: 0.1, output: 8}"),
                 ["prices.yaml: prices.gpt-5.5.input: Input should be a valid number, got text "
                  "`1.25`; fix the value"], id="number-as-text"),
    pytest.param(PRICE.format(entry="{input: 1, cached_input: 0.1, output: true}"),
                 ["prices.yaml: prices.gpt-5.5.output: Input should be a valid number, got "
                  "true/false `True`; fix the value"], id="true-for-a-number"),
    pytest.param(PRICE.format(entry="{input: 1, output: 8}"),
                 ["prices.yaml: prices.gpt-5.5.cached_input: missing required key "
                  "`cached_input`; add it"], id="missing-field"),
    pytest.param(PRICE.format(entry="1.25"),
                 ["prices.yaml: prices.gpt-5.5: Input should be a valid dictionary or instance "
                  "of Price, got a number `1.25`; fix the value"], id="price-not-a-mapping"),
    pytest.param("as_of: 2026-13-01\n",
                 ["prices.yaml: as_of: text `2026-13-01` is not a date; write it as YYYY-MM-DD "
                  "(e.g. 2026-11-01)"], id="bad-date"),
    pytest.param("as_of: 20261101\n",
                 ["prices.yaml: as_of: a number `20261101` is not a date; write it as "
                  "YYYY-MM-DD (e.g. 2026-11-01)"], id="date-as-a-number"),
    pytest.param("as_of: 2026-11-01T10:00:00\n",
                 ["prices.yaml: as_of: text `2026-11-01T10:00:00` is not a date; write it as "
                  "YYYY-MM-DD (e.g. 2026-11-01)"], id="timestamp-not-a-date"),
    pytest.param("prices: {}\n",
                 ["prices.yaml: as_of: missing required key `as_of`; add it"], id="no-date"),
    pytest.param("as_of: 2026-11-01\ndefault_model: gpt-9\n",
                 ["prices.yaml: default_model: `gpt-9` has no price (priced: gpt-4.1, "
                  "gpt-4.1-mini, gpt-5, gpt-5-codex, gpt-5-mini, gpt-5-nano, gpt-5.5, o4-mini); "
                  "add it under `prices` or fix the name"], id="default-model-unpriced"),
    pytest.param("", ["prices.yaml: (top level): expected a mapping of keys, got an empty file; "
                      "start the file with `as_of: YYYY-MM-DD`"], id="empty"),
    pytest.param("- gpt-5\n", ["prices.yaml: (top level): expected a mapping of keys, got a "
                               "list; start the file with `as_of: YYYY-MM-DD`"], id="a-list"),
    pytest.param("as_of: [\n", ["prices.yaml: invalid YAML at line 2, column 1: expected the "
                                "node content, but found '<stream end>'; fix the syntax"],
                 id="invalid-yaml"),
    pytest.param("as_of: 2026-13-01\nprices:\n  m: {input: -1, cached_input: x}\n", [
        "prices.yaml: as_of: text `2026-13-01` is not a date; write it as YYYY-MM-DD "
        "(e.g. 2026-11-01)",
        "prices.yaml: prices.m.input: Input should be greater than or equal to 0; write USD per "
        "1M tokens, 0 or more",
        "prices.yaml: prices.m.cached_input: Input should be a valid number, got text `x`; fix "
        "the value",
        "prices.yaml: prices.m.output: missing required key `output`; add it"],
        id="every-problem-at-once"),
]


@pytest.mark.parametrize(("text", "expected"), BAD_FILES)
def test_a_bad_prices_file_is_refused_with_the_field_and_the_fix(
        tmp_path: Path, text: str, expected: list[str]) -> None:
    write_prices(tmp_path, text)
    with pytest.raises(DefinitionError) as info:
        load_prices(tmp_path)
    assert info.value.problems == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prices.yaml"]
    assert (tmp_path / "prices.yaml").read_text(encoding="utf-8") == text


def test_a_prices_file_past_the_definition_size_cap_is_refused_unread(tmp_path: Path) -> None:
    write_prices(tmp_path, "as_of: 2026-11-01\n" + "#" * (1024 * 1024) + "\n")
    with pytest.raises(DefinitionError) as info:
        load_prices(tmp_path)
    assert info.value.problems == ["prices.yaml: (file): larger than 1 MiB (1,048,576 bytes), "
                                   "the limit for a definition file; shorten it or remove it"]


def test_uncached_input_cached_input_and_output_each_have_their_price() -> None:
    # 600k uncached at $1, 400k cached at $0.10, 50k output at $10
    assert cost_usd(usage(input_tokens=1_000_000, cached=400_000, output=50_000), TABLE,
                    "m") == 1.14
    cached_as_uncached = cost_usd(usage(input_tokens=1_000_000, output=50_000), TABLE, "m")
    assert cached_as_uncached == 1.5


def test_reasoning_tokens_are_billed_inside_output_and_never_twice() -> None:
    # codex's output_tokens already holds the reasoning ones (Responses API's
    # output_tokens_details.reasoning_tokens): 1,000 output of which 800 reasoning cost 1,000.
    with_reasoning = cost_usd(usage(output=1_000, reasoning=800), TABLE, "m")
    assert with_reasoning == cost_usd(usage(output=1_000), TABLE, "m") == 0.01


def test_a_model_without_a_price_gets_no_money_figure_and_says_why() -> None:
    step = Step(step=0, name="a", phase="p", usage=[usage(input_tokens=10, output=10)])
    assert cost_usd(step.usage[0], TABLE, "gpt-9") is None
    assert node_cost(step, TABLE, "gpt-9") is None
    assert delivery_cost(delivery(step), TABLE, "gpt-9") is None
    assert unpriced_reason(TABLE, "gpt-9") == "model `gpt-9` has no price; add it to prices.yaml"
    assert unpriced_reason(TABLE, "m") is None


def test_sessions_run_without_a_named_model_are_priced_with_the_default_model_only() -> None:
    one = usage(output=1_000)
    assert cost_usd(one, TABLE, None) is None
    assert unpriced_reason(TABLE, None) == (
        "no model is named (codex runs its configured default) and the price table has no "
        "`default_model`; name the model or set `default_model` in prices.yaml")
    with_default = PriceTable(as_of=TABLE.as_of, prices=TABLE.prices, default_model="m")
    assert cost_usd(one, with_default, None) == 0.01
    assert unpriced_reason(with_default, None) is None
    assert cost_usd(one, with_default, "gpt-9") is None  # a named model is never guessed


def test_money_is_kept_to_the_micro_dollar_per_session_and_in_every_sum() -> None:
    # 3 tokens of input at $1/1M is $0.000003; 1 token is $0.000001 however often it recurs
    step = Step(step=0, name="a", phase="p", usage=[usage(input_tokens=1)] * 3
                + [usage(input_tokens=2_345_678, output=1)])
    assert [cost_usd(u, TABLE, "m") for u in step.usage] == [1e-06, 1e-06, 1e-06, 2.345688]
    assert node_cost(step, TABLE, "m") == 2.345691


def test_node_attempt_round_task_and_delivery_costs_mirror_the_token_sums() -> None:
    generator = usage(attempt=1, output=1_000)  # $0.01
    evaluator = usage(attempt=1, output=2_000, role="evaluator")  # $0.02
    second = usage(attempt=2, input_tokens=10_000)  # $0.01
    task = usage(attempt=1, output=500, task="t1")  # $0.005, in the task's and the step's list
    build = Step(step=0, name="build", phase="p", usage=[generator, evaluator, second, task],
                 tasks=[TaskRecord(id="t1", title="T", usage=[task])],
                 reviews=[ReviewRecord(round=1, verdict="PASS", reason="ok",
                                       usage=ReviewUsage(output_tokens=2_000)),
                          ReviewRecord(round=2, verdict="BLOCK", reason="QA skipped")])
    spec = Step(step=1, name="spec", phase="p", usage=[usage(output=300)])  # $0.003
    state = delivery(build, spec)
    assert attempt_cost(build, 1, TABLE, "m") == 0.03
    assert attempt_cost(build, 1, TABLE, "m", role="generator") == 0.01
    assert attempt_cost(build, 2, TABLE, "m") == 0.01
    assert [round_cost(r, TABLE, "m") for r in build.reviews] == [0.02, 0.0]
    assert task_cost(build.tasks[0], TABLE, "m") == 0.005
    assert node_cost(build, TABLE, "m") == 0.045
    assert node_cost(build, TABLE, "m", role="generator") == 0.025
    assert node_cost(build, TABLE, "m", role="evaluator") == 0.02
    assert delivery_cost(state, TABLE, "m") == 0.048
    assert money_totals(state, "build", second, TABLE, "m") == {
        "attempt": 0.01, "node": 0.045, "delivery": 0.048}
    assert money_totals(state, "spec", None, TABLE, "m") == {
        "attempt": 0.0, "node": 0.003, "delivery": 0.048}
    assert money_totals(state, "spec", None, TABLE, "gpt-9") == {
        "attempt": 0.0, "node": None, "delivery": None}


@pytest.mark.parametrize(("amount", "text"), [(0.0, "$0.00"), (0.01, "$0.01"),
                                              (0.0123, "$0.0123"), (12.5, "$12.50"),
                                              (1234.000001, "$1,234.000001")])
def test_money_reads_in_dollars_with_cents_and_no_trailing_zeros(amount: float,
                                                                 text: str) -> None:
    assert usd_text(amount) == text
