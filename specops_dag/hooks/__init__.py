"""`specops hook <event>` (also `python -m specops_dag.hooks <event>`): the codex hooks of an agent
session (DESIGN §11), each run under its Deadline. `pre-tool-use` (`pre_tool_use`) denies
dangerous commands and untested C# product edits and fails closed; `session-start` (compact) and
`user-prompt-submit` (`context`) inject the delivery's workflow state and fail open. This module
only dispatches, importing the half an event needs when it runs; hooks never change state, never
start processes, never import dagster or click."""

from __future__ import annotations

import json
import os
import sys

EVENTS = {"pre-tool-use": "PreToolUse", "session-start": "SessionStart",
          "user-prompt-submit": "UserPromptSubmit"}
USAGE = "usage: specops hook {pre-tool-use|session-start|user-prompt-submit} < payload.json"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if len(args) != 1 or args[0] not in EVENTS:
        print(USAGE, file=sys.stderr)
        return 2
    event, env = args[0], dict(os.environ)
    if event == "pre-tool-use":
        from specops_dag.hooks.pre_tool_use import deny_reason

        reason = deny_reason(env)
        output = reason and {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                             "permissionDecisionReason": reason}
    else:
        from specops_dag.hooks.context import state_context

        text = state_context(event, env)
        output = text and {"hookEventName": EVENTS[event], "additionalContext": text}
    if output:
        sys.stdout.write(json.dumps({"hookSpecificOutput": output}) + "\n")
        sys.stdout.flush()
    return 0


class BudgetExceeded(Exception):
    """A hook's Deadline ran out (the name is part of the messages the hooks print)."""


class Deadline:
    """Raises BudgetExceeded in the main thread once `seconds` have passed, until closed."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.live, self.installed, self.previous = seconds, False, False, None

    def start(self) -> None:
        import signal

        try:
            self.previous = signal.signal(signal.SIGALRM, self.expire)
        except (AttributeError, ValueError):  # no SIGALRM (Windows) or not the main thread
            return
        self.installed = self.live = True
        signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def expire(self, signum: int, frame: object) -> None:
        if self.live:
            self.live = False
            raise BudgetExceeded(f"the {self.seconds:g} s budget of the hook ran out")

    def close(self) -> None:
        import signal

        self.live = False
        if self.installed:
            self.installed = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, signal.SIG_DFL if self.previous is None
                          else self.previous)
