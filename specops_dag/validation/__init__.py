"""The independent validation after an attempt (seed 001 §8, DESIGN §8): the hook point every
executor calls once the required artifacts exist. It picks the mode the step declares:
`none`, `docs-only` (falls back to `full` when the change is not documentation only) or `full`
(.NET build and tests under the target policy). Verdicts are data; a missing `dotnet` raises
`ToolMissing`. It never reads or writes the delivery state and never imports Dagster.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from specops_dag.errors import ToolMissing
from specops_dag.validation.docs_only import docs_only_change
from specops_dag.validation.dotnet import DEADLINE_S, ValidationReport, validate_full
from specops_dag.workflow.model import ValidationConfig

MODES = ("full", "docs-only", "none")

__all__ = ["ValidationReport", "validate_attempt", "MODES"]


def validate_attempt(mode: str, target: Path, *, delivery: str, base_commit: str | None,
                     log_dir: Path, deadline_s: float = DEADLINE_S,
                     env: dict[str, str] | None = None, config: ValidationConfig | None = None,
                     baseline: dict | None = None) -> ValidationReport:
    """`config` is the layout (validation.yaml + the phase); `baseline` the base tree's report
    an attempt is compared with under `judge: regressions`."""
    if mode == "none":
        return ValidationReport(True, "none", "none", "the phase declares `validation: none`",
                                target_found=False)
    if mode == "docs-only":
        decision = docs_only_change(target, base_commit, delivery)
        if decision.docs_only:
            return ValidationReport(True, "docs-only", "docs-only", decision.reason,
                                    target_found=False)
        # Why this docs-only step validates in full: the report's first note (kept in the step's
        # state and its Dagster check metadata, shown by `specops status`), and the message when
        # the full validation cannot run.
        note = f"docs-only fell back to full validation: {decision.reason}"
        try:
            full = validate_full(target, log_dir, deadline_s, env, config, baseline)
        except ToolMissing as err:
            raise ToolMissing(f"{note}; {err.message}") from err
        return replace(full, mode="docs-only→full", notes=(note, *full.notes))
    return validate_full(target, log_dir, deadline_s, env, config, baseline)
