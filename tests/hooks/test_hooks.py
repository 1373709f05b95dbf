"""`specops hook EVENT` (`hooks/__init__.py`): the event dispatch and each hook's Deadline against
the timeout codex gives it."""

from __future__ import annotations

from specops_dag import hooks as hook
from specops_dag.agent import codex
from specops_dag.hooks import context, pre_tool_use


def test_a_wrong_event_is_a_usage_error(capsys) -> None:
    assert hook.main(["pre-tool"]) == 2
    assert capsys.readouterr().err == ("usage: specops hook {pre-tool-use|session-start|"
                                       "user-prompt-submit} < payload.json\n")


def test_codexs_timeout_of_each_hook_is_longer_than_the_hooks_own_deadline() -> None:
    timeouts = {event: timeout for _, event, timeout in codex.HOOKS}
    assert timeouts["pre-tool-use"] > pre_tool_use.PRE_TOOL_BUDGET_S
    assert timeouts["session-start"] > context.BUDGET_S
    assert timeouts["user-prompt-submit"] > context.BUDGET_S
