"""The pre-tool-use hook called in-process, its payloads and its answers."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

from specops_dag import hooks as hook

SPECOPS_VARS = ("SPECOPS_ROOT", "SPECOPS_DELIVERY", "SPECOPS_NODE", "SPECOPS_NODE_DIR",
                "SPECOPS_TARGET", "SPECOPS_ATTEMPT")


def call(event: str, data: bytes) -> tuple[int, str]:
    """Run the hook in-process with `data` on stdin; (exit code, stdout)."""
    out, saved = io.StringIO(), sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(data))
    try:
        with contextlib.redirect_stdout(out):
            code = hook.main([event])
    finally:
        sys.stdin = saved
    return code, out.getvalue()


def payload(command: object, cwd: Path | str | None = None, tool: str = "Bash") -> bytes:
    data = {"session_id": "s", "turn_id": "t", "hook_event_name": "PreToolUse", "model": "m",
            "permission_mode": "bypassPermissions", "tool_name": tool,
            "tool_input": {"command": command}, "tool_use_id": "call_1"}
    if cwd is not None:
        data["cwd"] = str(cwd)
    return json.dumps(data).encode()


def denial(out: str) -> str | None:
    """The deny reason of a hook answer, or None for an allowed call (no output)."""
    if not out.strip():
        return None
    answer = json.loads(out)["hookSpecificOutput"]
    assert answer["hookEventName"] == "PreToolUse"
    assert answer["permissionDecision"] == "deny"
    assert answer["permissionDecisionReason"].strip()
    return answer["permissionDecisionReason"]


def check(repo: Path, command: str) -> str | None:
    code, out = call("pre-tool-use", payload(command, repo))
    assert code == 0
    return denial(out)
