"""What an apply_patch text changes, for the PreToolUse hook: (action, path, added lines) per
file. It only reads the text; `walk` resolves the paths and records what is written and
deleted. Standard library only: it runs on every tool call."""

from __future__ import annotations

import re

PATCH_LINE = re.compile(r"\*\*\* (Add File|Update File|Delete File|Move to): (.+)")


def patch_changes(text: str) -> list[tuple[str, str, str]]:
    """(action, path, added lines) per file of an apply_patch text; a `Move to` is a delete of
    the old path plus an update of the new one."""
    out: list[tuple[str, str, str]] = []
    added: list[str] = []
    for line in text.splitlines():
        m = PATCH_LINE.fullmatch(line.rstrip())
        if m is None:
            if line.startswith("+") and out:
                added.append(line[1:])
            continue
        if out:
            out[-1] = (*out[-1][:2], "\n".join(added))
        added = []
        action = {"Add File": "add", "Update File": "update", "Delete File": "delete",
                  "Move to": "update"}[m.group(1)]
        if m.group(1) == "Move to" and out:
            out[-1] = ("delete", out[-1][1], "")
        out.append((action, m.group(2).strip(), ""))
    if out:
        out[-1] = (*out[-1][:2], "\n".join(added))
    return out
