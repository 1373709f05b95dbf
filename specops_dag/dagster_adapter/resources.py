"""The `specops` resource: the harness root and how to run codex, from the environment at load
(`resource_from_env`) or from run config. It hands a step to `execution.step.run_step` and
decides nothing; the state store and the step executor are imported when used, never at load."""

from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

from specops_dag import collector
from specops_dag.agent.codex import AgentSettings

if TYPE_CHECKING:
    from collections.abc import Callable

    from specops_dag.delivery.store import Store
    from specops_dag.execution.step import StepOutcome


class SpecopsResource(dg.ConfigurableResource):
    """The harness root and how to run codex; defaults come from the environment at load
    (SPECOPS_ROOT, SPECOPS_CODEX_BIN, SPECOPS_REPLAY_URL, ...) and run config can override them."""

    root: str
    lock_timeout_s: float = 30.0
    codex_bin: str | None = None
    replay_url: str | None = None
    codex_model: str | None = None
    codex_config: list[str] = []
    codex_home: str | None = None

    def store(self) -> "Store":
        from specops_dag.delivery.store import Store

        return Store(Path(self.root), lock_timeout_s=self.lock_timeout_s)

    def agent_settings(self) -> AgentSettings:
        return AgentSettings(codex_bin=self.codex_bin, replay_url=self.replay_url,
                             model=self.codex_model, config=tuple(self.codex_config),
                             codex_home=self.codex_home)

    def run_step(self, delivery: str, workflow: str, node: str,
                 progress: "Callable[[str], None] | None" = None,
                 sessions: int | None = None,
                 dispatch: "Callable[[str, str, str], None] | None" = None) -> "StepOutcome":
        from specops_dag.execution.step import run_step

        collector.tune()  # this process runs steps: tuned as the console script is
        return run_step(self.store(), delivery, node, workflow=workflow,
                        settings=self.agent_settings(), progress=progress, sessions=sessions,
                        dispatch=dispatch)


def resource_from_env(root: Path) -> SpecopsResource:
    env = AgentSettings.from_env()
    return SpecopsResource(root=str(root), codex_bin=env.codex_bin, replay_url=env.replay_url,
                           codex_model=env.model, codex_config=list(env.config),
                           codex_home=env.codex_home)
