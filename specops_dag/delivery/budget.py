"""Token budgets per phase and per delivery (DESIGN §9), counted from codex's
`turn.completed.usage` (cumulative per thread, one thread per attempt, so each attempt's usage
is its own). When a budget is spent no further codex call is made. Pure functions over state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specops_dag.delivery.queries import delivery_tokens, step_tokens

if TYPE_CHECKING:
    from specops_dag.delivery.model import Delivery, Step


def budget_spent(state: Delivery, step: Step, phase_tokens: int | None,
                 phase: str | None = None, role: str = "generator") -> str | None:
    """Why no further call may be made for `step` (its generator, or with `role="evaluator"`
    its review rounds under the evaluator `phase`'s budget), or None while both budgets last.
    Budgets count uncached input plus output tokens."""
    used = step_tokens(step, role)
    if phase_tokens is not None and used >= phase_tokens:
        whose = "" if role == "generator" else "the review rounds of "
        return (f"budget: {whose}step `{step.name}` used {used} of its {phase_tokens} tokens "
                f"(phase `{phase or step.phase}` budget.tokens); no further codex call is made")
    total = delivery_tokens(state)
    if state.budget_tokens is not None and total >= state.budget_tokens:
        return (f"budget: delivery `{state.phase}` used {total} of its {state.budget_tokens} "
                "tokens; no further codex call is made")
    return None
