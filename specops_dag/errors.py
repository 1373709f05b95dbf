"""The one exception family of specops-dag.

Failures to run are exceptions from `SpecopsError`; verdicts (a failed command, a failed
validation) are data. Only the front-ends (CLI, Dagster adapter) translate these into exit codes
or `dg.Failure`.
"""

from __future__ import annotations


class SpecopsError(Exception):
    """Root of every error the product raises on purpose. `exit_code` is the CLI's exit code."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(SpecopsError):
    """Bad input or usage: a bad id, an unknown node, a malformed file. Nothing was changed."""

    exit_code = 2


class DefinitionError(UsageError):
    """One or more workflow/phase/skill definitions are invalid; `problems` lists every message."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class StateError(UsageError):
    """A state file is unreadable or a requested transition is not allowed."""


class WriteConflict(SpecopsError):
    """Another process holds the delivery's lock or owns the step (seed 004: a real block)."""

    exit_code = 3


class BlockedError(SpecopsError):
    """The work cannot go on without a human or an environment fix (gate, budget, missing tool)."""

    exit_code = 3


class ToolMissing(BlockedError):
    """An environment error: a program to run is not installed. Never retried."""
