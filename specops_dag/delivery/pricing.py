"""The cost ledger's price table and money arithmetic: a dated built-in table, the harness root's
`prices.yaml` merged over it and validated at load, and tokens turned into USD per session,
attempt, review round, task, node and delivery. Pure arithmetic over recorded usage: it never
guesses a price for a model it does not know, and never writes a file. A delivery is priced
with the copy of `prices.yaml` frozen into its snapshot at `specops new` (`delivery_prices`).

`prices.yaml` (optional, in the harness root), USD per 1M tokens; a model in it replaces the
built-in entry of that name, `as_of` dates the merged table, `default_model` prices the sessions
run without a named model (codex's own default):

    as_of: 2026-11-01
    default_model: gpt-5.5
    prices:
      gpt-5.5: {input: 1.25, cached_input: 0.125, output: 10.0}
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Protocol

from pydantic import Field, ValidationError, field_validator

from specops_dag.delivery.queries import usd_text  # noqa: F401 — money as status shows it
from specops_dag.errors import DefinitionError
from specops_dag.workflow.messages import format_error, yaml_kind
from specops_dag.workflow.strict import Strict

if TYPE_CHECKING:
    from specops_dag.delivery.model import Delivery, ReviewRecord, Step, TaskRecord

PRICES_FILE = "prices.yaml"
PER_TOKENS = 1_000_000  # prices are USD per 1M tokens
MICRO = 6  # money is kept to the micro-dollar, per session and in every sum
DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")

UsdPerMillion = Annotated[float, Field(ge=0, strict=True, allow_inf_nan=False)]


class Price(Strict):
    """USD per 1M tokens. Reasoning tokens are billed as output: they are part of
    `output_tokens` (see `cost_usd`), so there is no separate reasoning price."""

    input: UsdPerMillion
    cached_input: UsdPerMillion
    output: UsdPerMillion


class PricesFile(Strict):
    """The shape of `<harness root>/prices.yaml`."""

    as_of: str
    default_model: str | None = None
    prices: dict[str, Price] = {}

    @field_validator("as_of", mode="before")
    @classmethod
    def _iso_date(cls, value: object) -> str:
        if isinstance(value, str) and DATE_RE.match(value):
            try:
                return date.fromisoformat(value).isoformat()
            except ValueError:
                pass
        raise ValueError(f"{yaml_kind(value)} is not a date; write it as YYYY-MM-DD "
                         "(e.g. 2026-11-01)")


@dataclass(frozen=True)
class PriceTable:
    """Prices per model as of a date; `source` says where the table came from."""

    as_of: str
    prices: dict[str, Price]
    default_model: str | None = None
    source: str = "built-in"


# A dated default, the list prices (USD per 1M tokens) as this table's author last knew them; not
# checked against OpenAI's price page on `as_of` (written without network access) and gpt-5.5
# assumed at gpt-5's rates. A harness root states its own in prices.yaml. No default model: the
# model codex picks when none is named is the user's configuration, not known here.
DEFAULT_PRICES = PriceTable(as_of="2026-12-01", prices={
    "gpt-5.5": Price(input=1.25, cached_input=0.125, output=10.0),
    "gpt-5": Price(input=1.25, cached_input=0.125, output=10.0),
    "gpt-5-codex": Price(input=1.25, cached_input=0.125, output=10.0),
    "gpt-5-mini": Price(input=0.25, cached_input=0.025, output=2.0),
    "gpt-5-nano": Price(input=0.05, cached_input=0.005, output=0.4),
    "o4-mini": Price(input=1.1, cached_input=0.275, output=4.4),
    "gpt-4.1": Price(input=2.0, cached_input=0.5, output=8.0),
    "gpt-4.1-mini": Price(input=0.4, cached_input=0.1, output=1.6),
})


def load_prices(root: Path, base: PriceTable = DEFAULT_PRICES) -> PriceTable:
    """`base` with `<root>/prices.yaml` merged over it (a model there replaces base's entry), or
    `base` when there is no such file. Raises `DefinitionError` with every problem of the file."""
    path = root / PRICES_FILE
    if not path.exists():
        return base
    return merge_prices(path, PRICES_FILE, base)


def delivery_prices(root: Path, state: Delivery, base: PriceTable = DEFAULT_PRICES) -> PriceTable:
    """The price table of one delivery: `base` with the prices.yaml `specops new` froze into its
    snapshot merged over it, `base` alone when there was none to freeze, and `<root>/prices.yaml`
    as it is now only for a delivery frozen before prices were. Editing the harness root's file
    changes no delivery made before; `check_snapshot` refuses a run whose frozen copy changed."""
    from specops_dag.delivery.model import PRICES_KIND

    frozen = state.snapshot.frozen(PRICES_KIND)
    if frozen is None:
        return load_prices(root, base)
    if frozen.sha256 is None:
        return base
    shown = f"phases/{state.phase}/{frozen.copy_path}"
    return merge_prices(root / shown, shown, base)


def merge_prices(path: Path, shown: str, base: PriceTable) -> PriceTable:
    """`base` with the prices file at `path` (named `shown` in messages) merged over it."""
    parsed = parse_prices(read_prices(path, shown), shown)
    prices = {**base.prices, **parsed.prices}
    if parsed.default_model is not None and parsed.default_model not in prices:
        raise DefinitionError([f"{shown}: default_model: `{parsed.default_model}` has no "
                               f"price (priced: {', '.join(sorted(prices))}); add it under "
                               "`prices` or fix the name"])
    return PriceTable(as_of=parsed.as_of, prices=prices,
                      default_model=parsed.default_model or base.default_model, source=shown)


def read_prices(path: Path, shown: str = PRICES_FILE) -> dict:
    """The file's mapping, read within `yamlfile`'s caps; dates stay text for `as_of`'s check.
    YAML is imported here: a harness root without prices.yaml never needs it."""
    import yaml

    from specops_dag.workflow import yamlfile

    try:
        data = yamlfile.safe_load(yamlfile.read_text(path), text_dates_loader())
    except (yamlfile.LimitError, RecursionError) as err:
        limit = err if isinstance(err, yamlfile.LimitError) else yamlfile.TooDeep()
        raise DefinitionError([f"{shown}: (file): {limit}"]) from None
    except UnicodeDecodeError:
        raise DefinitionError([f"{shown}: not UTF-8 text; save the file as UTF-8"]) from None
    except OSError as err:
        raise DefinitionError([f"{shown}: cannot be read ({err.strerror}); make it a "
                               "readable YAML file or remove it"]) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        reason = getattr(err, "problem", None) or str(err)
        raise DefinitionError([f"{shown}: invalid YAML{where}: {reason}; fix the "
                               "syntax"]) from None
    if not isinstance(data, dict):
        got = "an empty file" if data is None else yaml_kind(data)
        raise DefinitionError([f"{shown}: (top level): expected a mapping of keys, got "
                               f"{got}; start the file with `as_of: YYYY-MM-DD`"])
    return data


def parse_prices(data: dict, shown: str = PRICES_FILE) -> PricesFile:
    try:
        return PricesFile.model_validate(data)
    except ValidationError as err:
        raise DefinitionError([f"{shown}: {with_fix(format_error(PricesFile, e))}"
                               for e in err.errors()]) from None


def with_fix(problem: str) -> str:
    """A price's bound error (below 0, not finite) says what to do like the others do."""
    return problem if "; " in problem else f"{problem}; write USD per 1M tokens, 0 or more"


@functools.cache
def text_dates_loader() -> type:
    """PyYAML's safe loader without its implicit timestamps: `as_of: 2026-13-01` is text the
    model names the field of, not a `ValueError` from PyYAML's date constructor."""
    import yaml

    class TextDates(yaml.SafeLoader):
        pass

    TextDates.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    return TextDates


class TokenCounts(Protocol):
    """One session's tokens: `delivery.model.Usage` or a review round's `ReviewUsage`."""

    input_tokens: int
    cached_input_tokens: int
    output_tokens: int


def price_of(table: PriceTable, model: str | None) -> Price | None:
    """The model's price; with no model named, the table's `default_model`'s; else None."""
    name = model if model is not None else table.default_model
    return table.prices.get(name) if name is not None else None


def unpriced_reason(table: PriceTable, model: str | None) -> str | None:
    """Why the sessions of `model` get no money figure, or None when they are priced."""
    if price_of(table, model) is not None:
        return None
    if model is None:
        return ("no model is named (codex runs its configured default) and the price table "
                f"has no `default_model`; name the model or set `default_model` in {PRICES_FILE}")
    return f"model `{model}` has no price; add it to {PRICES_FILE}"


def cost_usd(usage: TokenCounts, table: PriceTable, model: str | None) -> float | None:
    """One session's cost in USD (to the micro-dollar), or None for a model without a price.

    codex reports the Responses API's usage: `input_tokens` includes the cached ones
    (`input_tokens_details.cached_tokens`), and `output_tokens` includes the reasoning ones
    (`output_tokens_details.reasoning_tokens`, whose total is input + output). So uncached input
    is input - cached, and `reasoning_output_tokens` is not added: it is already in output."""
    price = price_of(table, getattr(usage, "model", None) or model)
    if price is None:
        return None
    uncached = usage.input_tokens - usage.cached_input_tokens
    micro = (uncached * price.input + usage.cached_input_tokens * price.cached_input
             + usage.output_tokens * price.output)
    return round(micro / PER_TOKENS, MICRO)


def sum_cost(usages: Iterable[TokenCounts], table: PriceTable,
             model: str | None) -> float | None:
    """The sessions' costs added up (each to the micro-dollar first), or None when one of them
    has no price (no session: 0). A session recorded with its model is priced as that model;
    `model` prices the others."""
    costs = [cost_usd(u, table, model) for u in usages]
    if None in costs:
        return None
    return round(float(sum(c for c in costs if c is not None)), MICRO)  # 0.0, never int 0


def attempt_cost(step: Step, attempt: int, table: PriceTable, model: str | None,
                 role: str | None = None) -> float | None:
    """The step's sessions of one attempt (generator, review round, contract), or only one
    role's. A fan-out task's sessions count their own attempts: see `task_cost`."""
    return sum_cost((u for u in step.usage if u.attempt == attempt and u.task is None
                     and (role is None or u.role == role)), table, model)


def round_cost(record: ReviewRecord, table: PriceTable, model: str | None) -> float | None:
    """A review round's evaluator sessions (0 when it stopped before calling one)."""
    return sum_cost([record.usage] if record.usage else [], table, model)


def task_cost(task: TaskRecord, table: PriceTable, model: str | None) -> float | None:
    return sum_cost(task.usage, table, model)


def node_cost(step: Step, table: PriceTable, model: str | None,
              role: str | None = None) -> float | None:
    """Every session of the step (its tasks' too, recorded in `step.usage` as well), or only
    the generator's or the evaluator's — as `queries.step_tokens` counts tokens."""
    return sum_cost((u for u in step.usage if role is None or u.role == role), table, model)


def delivery_cost(state: Delivery, table: PriceTable, model: str | None) -> float | None:
    return sum_cost((u for s in state.steps for u in s.usage), table, model)


def money_totals(state: Delivery, node: str, usage: TokenCounts | None, table: PriceTable,
                 model: str | None) -> dict[str, float | None]:
    """USD of the attempt's session, the node and the delivery (`step.token_totals`' twin)."""
    return {"attempt": cost_usd(usage, table, model) if usage else sum_cost([], table, model),
            "node": node_cost(state.get_step(node), table, model),
            "delivery": delivery_cost(state, table, model)}

