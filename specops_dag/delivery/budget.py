"""Token and money budgets per phase and per delivery (DESIGN §9), counted from codex's
`turn.completed.usage` (cumulative per thread, one thread per attempt, so each attempt's usage
is its own) and priced with `pricing`. When a budget is spent no further codex call is made.
Pure functions over state: the caller passes the price table and the model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from specops_dag.delivery.pricing import (
    PRICES_FILE,
    delivery_cost,
    node_cost,
    unpriced_reason,
    usd_text,
)
from specops_dag.delivery.queries import delivery_tokens, step_tokens

if TYPE_CHECKING:
    from specops_dag.delivery.model import Delivery, Step
    from specops_dag.delivery.pricing import PriceTable


def budget_spent(state: Delivery, step: Step, phase_tokens: int | None,
                 phase: str | None = None, role: str = "generator", *,
                 phase_usd: float | None = None, prices: PriceTable | None = None,
                 model: str | None = None) -> str | None:
    """Why no further call may be made for `step` (its generator, or with `role="evaluator"`
    its review rounds under the evaluator `phase`'s budget), or None while every budget lasts.
    Token budgets count uncached input plus output tokens; USD budgets price the sessions with
    `prices` for `model` — and, with a USD budget set, a model without a price (or no table)
    stops the step too: money that cannot be counted is never taken as unspent. With no `model`
    (neither `-m` nor codex's config names one) the next session is taken to run the model
    codex reported for the delivery's latest session that reported one."""
    phase = phase or step.phase
    model = model or reported_model(state, step)
    whose = "" if role == "generator" else "the review rounds of "
    used = step_tokens(step, role)
    if phase_tokens is not None and used >= phase_tokens:
        return (f"budget: {whose}step `{step.name}` used {used} of its {phase_tokens} tokens "
                f"(phase `{phase}` budget.tokens); no further codex call is made")
    if phase_usd is not None:
        spent = money_spent(f"phase `{phase}` budget.usd", prices, model,
                            lambda table: node_cost(step, table, model, role))
        if isinstance(spent, str):
            return spent
        if spent >= phase_usd:
            return (f"budget: {whose}step `{step.name}` spent {usd_text(spent)} of its "
                    f"{usd_text(phase_usd)} (phase `{phase}` budget.usd); no further codex "
                    "call is made")
    return delivery_spent(state, prices, model)


def reported_model(state: Delivery, step: Step) -> str | None:
    """The model codex reported for the latest session of `step`, else of the delivery's steps
    (the last one in workflow order that has one), or None."""
    for candidate in (step, *reversed(state.steps)):
        found = next((u.model for u in reversed(candidate.usage) if u.model), None)
        if found:
            return found
    return None


def delivery_spent(state: Delivery, prices: PriceTable | None,
                   model: str | None) -> str | None:
    """Why the delivery's own budgets allow no further call, or None."""
    total = delivery_tokens(state)
    if state.budget_tokens is not None and total >= state.budget_tokens:
        return (f"budget: delivery `{state.phase}` used {total} of its {state.budget_tokens} "
                "tokens; no further codex call is made")
    if state.budget_usd is None:
        return None
    spent = money_spent(f"delivery `{state.phase}` budget.usd", prices, model,
                        lambda table: delivery_cost(state, table, model))
    if isinstance(spent, str):
        return spent
    if spent >= state.budget_usd:
        return (f"budget: delivery `{state.phase}` spent {usd_text(spent)} of its "
                f"{usd_text(state.budget_usd)}; no further codex call is made")
    return None


def money_spent(budget: str, prices: PriceTable | None, model: str | None,
                cost: Callable[[PriceTable], float | None]) -> float | str:
    """The USD `cost(table)` counts, or why it cannot be counted (the budget's stop message)."""
    if prices is None:
        return (f"budget: {budget} is set but no price table was given to count it with (a "
                "defect: report it); no codex call is made")
    reason = unpriced_reason(prices, model)
    if reason is not None:
        return f"budget: {budget} is set but {reason}; no codex call is made until then"
    spent = cost(prices)
    if spent is None:  # a session recorded under another model that has no price
        return (f"budget: {budget} is set but a recorded session ran a model without a price; "
                f"add it to {PRICES_FILE}; no codex call is made until then")
    return spent
