"""The independent validation after an attempt (seed 001 §8, DESIGN §8): the hook point every
executor calls once the required artifacts exist. Verdicts are data (`ValidationReport`).

Mode `none` passes with nothing to check. The .NET 8 `full` and `docs-only` validators are not
in this version: `validation_unavailable` says so before any attempt starts, so no agent call is
spent on a step that could never be verified.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

AVAILABLE_MODES = ("none",)


@dataclass(frozen=True)
class ValidationReport:
    passed: bool
    mode: str
    stage: str
    log: str = ""

    def describe(self) -> str:
        state = "passed" if self.passed else "failed"
        return f"validation `{self.mode}` {state} at stage `{self.stage}`" + (
            f":\n{self.log}" if self.log else "")


def validation_unavailable(mode: str) -> str | None:
    if mode in AVAILABLE_MODES:
        return None
    return (f"validation `{mode}` is not available in this version of specops-dag (only "
            f"{', '.join(AVAILABLE_MODES)})")


def validate_attempt(mode: str, target: Path) -> ValidationReport:
    if mode == "none":
        return ValidationReport(True, mode, "none", "validation: none declared by the phase")
    return ValidationReport(False, mode, "unavailable", validation_unavailable(mode) or "")
