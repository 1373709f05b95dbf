"""The product's hooks on real codex calls (the replay agent plays the model)."""

from __future__ import annotations

import json
from pathlib import Path

import git
import pytest

from specops_dag.delivery.store import Store
from specops_dag.execution.step import run_step

from ..support.agents import agentic_git_harness, new, replay, settings_for, wrote

pytestmark = pytest.mark.e2e

BLOCKED = "Command blocked by PreToolUse hook"


def tool_outputs(tmp_path: Path) -> list[str]:
    """The tool results codex sent back to the model, in order (from the replay log)."""
    outputs = []
    for line in (tmp_path / "requests.jsonl").read_text().splitlines():
        request = json.loads(line)
        last = request["input"][-1] if request["input"] else {}
        if last.get("type") in ("function_call_output", "custom_tool_call_output"):
            outputs.append(str(last.get("output")))
    return outputs


def test_destructive_commands_are_denied_and_the_repo_stays_intact(tmp_path: Path) -> None:
    root = agentic_git_harness(tmp_path)
    store = new(root)
    dangerous = [{"shell": "git push --force origin HEAD"}, {"shell": "rm -rf .git"},
                 {"shell": "bash -c 'git reset --hard HEAD~1'"}]
    with replay(tmp_path, {"write": [{"literal": {"before": dangerous}}]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert (outcome.status, outcome.message) == ("completed",
                                                 wrote("write", "notes.md", f"{root}/phases"))
    outputs = tool_outputs(tmp_path)  # the three denials, then the literal read and write
    assert [BLOCKED in o for o in outputs] == [True, True, True, False, False]
    worktree = root / ".specops/worktrees/d1"
    assert (worktree / ".git").exists() and (root / ".git").is_dir()
    assert git.Repo(root).head.commit.message == "initial"


PRODUCT = "*** Begin Patch\n*** Add File: src/Foo.cs\n+namespace App;\n+public class Foo {}\n*** End Patch\n"
TEST = ("*** Begin Patch\n*** Add File: tests/FooTests.cs\n+namespace App.Tests;\n"
        "+public class FooTests {}\n*** End Patch\n")


def test_a_csharp_edit_without_its_test_file_is_denied_and_with_it_allowed(
        tmp_path: Path) -> None:
    root = agentic_git_harness(tmp_path)
    store = new(root)
    patches = [{"apply_patch": PRODUCT}, {"apply_patch": TEST}, {"apply_patch": PRODUCT}]
    with replay(tmp_path, {"write": [{"literal": {"before": patches}}]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert (outcome.status, outcome.message) == ("completed",
                                                 wrote("write", "notes.md", f"{root}/phases"))
    outputs = tool_outputs(tmp_path)  # the three patches, then the literal read and write
    assert [BLOCKED in o for o in outputs] == [True, False, False, False, False]
    assert "src/Foo.cs" in outputs[0]
    worktree = root / ".specops/worktrees/d1"
    assert (worktree / "src/Foo.cs").is_file() and (worktree / "tests/FooTests.cs").is_file()


def test_the_workflow_state_is_injected_on_each_prompt(tmp_path: Path) -> None:
    root = agentic_git_harness(tmp_path)
    store = new(root)
    with replay(tmp_path, {"write": [{"literal": {}}]}) as server:
        assert run_step(store, "d1", "write",
                        settings=settings_for(server, tmp_path)).status == "completed"
    first = json.loads((tmp_path / "requests.jsonl").read_text().splitlines()[0])
    text = json.dumps(first["input"])
    assert "<workflow-state>" in text and "<skill-invocation>" in text
    assert "c-write-skill" in text
    assert Store(root).read("d1").get_step("write").status == "completed"
