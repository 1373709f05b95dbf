"""What the process that claims a step must have before its attempt starts: the codex CLI for
an agent step, `dotnet` for a step that validates `full`. Checked at the claim, so a host (a
Celery worker, say) that lacks one blocks the step before any agent call, with no attempt
counted. It only looks: it runs nothing and changes no state."""

from __future__ import annotations

import shutil
from pathlib import Path

from specops_dag.agent.codex import AgentSettings, find_codex
from specops_dag.delivery.model import RanOn, Step
from specops_dag.errors import ToolMissing
from specops_dag.validation.dotnet import INSTALL_HINT
from specops_dag.workflow.catalog import Catalog


def required_tools(catalog: Catalog, step: Step, settings: AgentSettings, root: Path) -> None:
    """Raise ToolMissing naming the first tool the step needs that this process cannot find, the
    way the attempt would look it up (`find_codex`; `dotnet` on PATH)."""
    if catalog.phases[step.phase].execution.executor.kind != "command":
        find_codex(settings, root)
    if step.validation == "full" and shutil.which("dotnet") is None:
        raise ToolMissing(INSTALL_HINT)


def missing_tool(catalog: Catalog, step: Step, settings: AgentSettings, root: Path,
                 here: RanOn) -> str | None:
    """The block reason when this process (`here`) lacks a tool the step needs, else None."""
    try:
        required_tools(catalog, step, settings, root)
    except ToolMissing as err:
        by = f" by Celery worker `{here.worker}`" if here.worker else ""
        return (f"environment error: {err.message} (found on host `{here.host}`{by} before the "
                "attempt: no agent call was made and no attempt was spent)")
    return None
