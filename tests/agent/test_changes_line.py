"""The CHANGES line (issue 43, items 1, 5 and 10): a git delivery's prompt names where its branch
began and the one command that shows its product change, and the evaluator's names a snapshot of
the generator's uncommitted work. An agent that runs exactly that command from its cwd (the
replay agent's literal mode does) sees the product change and none of the delivery's records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specops_dag.execution.step import run_step

from ..support.agents import (
    add_review,
    agentic_git_harness,
    attempts,
    create,
    replay,
    settings_for,
    verdict,
)

pytestmark = pytest.mark.e2e

FEATURE = {"shell": "mkdir -p src && printf 'multiply\\n' > src/feature.txt"}
EXCLUDE = "-- . ':(exclude)phases' ':(exclude)docs/phase'"


def changes_output(tmp_path: Path, node: str) -> tuple[str, str]:
    """(command, codex's output) of the literal agent's CHANGES command in `node`'s first
    attempt."""
    calls, found = {}, {}
    for request in attempts(tmp_path, node)[0]:
        for item in request["input"]:
            if item.get("type") == "function_call" and item.get("name") == "exec_command":
                cmd = json.loads(item["arguments"])["cmd"]
                if cmd.startswith("# replay literal: changes\n"):
                    calls[item["call_id"]] = cmd.split("\n", 1)[1]
            elif item.get("type") == "function_call_output" and item.get("call_id") in calls:
                found[calls[item["call_id"]]] = str(item.get("output"))
    assert len(found) == 1, found
    return next(iter(found.items()))


def test_a_later_nodes_changes_command_lists_the_product_change_and_no_delivery_record(
        tmp_path: Path) -> None:
    root = agentic_git_harness(tmp_path)
    store = create(root, None)
    with replay(tmp_path, {"write": [{"literal": {"before": [FEATURE]}}],
                           "review": [{"literal": {}}]}) as server:
        settings = settings_for(server, tmp_path)
        assert [run_step(store, "d1", n, settings=settings).status
                for n in ("write", "review")] == ["completed", "completed"]
    base = store.read("d1").base_commit
    command = f"git diff --stat {base} {EXCLUDE}"
    assert (f"CHANGES: feat-d1, this delivery's branch, began at {base}; `{command}` lists its "
            "product change since then (commits and uncommitted edits; `git status --short` also "
            "shows new files).") in (root / "phases/d1/review/prompt.md").read_text()
    ran, output = changes_output(tmp_path, "review")
    assert ran == command
    assert "Process exited with code 0" in output, output
    listed = output.split("Output:\n", 1)[1]
    assert " src/feature.txt | 1 +" in listed, listed
    assert "phases/" not in listed and "docs/phase" not in listed, listed


def test_the_evaluators_changes_command_shows_the_generators_uncommitted_work(
        tmp_path: Path) -> None:
    root = agentic_git_harness(tmp_path)
    add_review(root)
    store = create(root, None)
    with replay(tmp_path, {"write": [{"literal": {"before": [FEATURE]}}],
                           "write.review": [verdict("PASS", 9, 9)]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert outcome.status == "completed", outcome.message
    step = store.read("d1").get_step("write")
    ran, output = changes_output(tmp_path, "write.review")
    base, snapshot = ran.split()[3:5]
    assert ran == f"git diff --stat {base} {snapshot} {EXCLUDE}"
    assert base == store.read("d1").base_commit  # where the delivery began
    prompt = (store.root / "phases/d1/write/reviews/write-r1-prompt.md").read_text()
    assert f"{base} is where this delivery's branch feat-d1 began, {snapshot} the work" in prompt
    assert snapshot != step.commits["product"]  # reviewed before the product commit was made
    listed = output.split("Output:\n", 1)[1]
    assert " src/feature.txt | 1 +" in listed, listed
    assert "phases/" not in listed and "docs/phase" not in listed, listed
