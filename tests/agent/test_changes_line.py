"""The CHANGES line (issue 43, items 1, 5 and 10): a git delivery's prompt names where its branch
began and the one command that shows its product change, and the evaluator's names a snapshot of
the generator's uncommitted work; a plain-folder delivery's (where the phase's goal or skills
point at it) says there is no git history and names the command that lists the files written
since the delivery began. An agent that runs exactly that command from its cwd (the replay
agent's literal mode does) sees the product change and none of the delivery's records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specops_dag.execution.step import run_step

from ..support.agents import (
    MODES,
    add_review,
    agentic_git_harness,
    attempts,
    create,
    replay,
    settings_for,
    verdict,
    world,
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


PLAIN = ("find . -type f -newer {request} -not -path './phases/*' -not -path './docs/phase/*' "
         "-not -path './.specops/*' -not -path './.dagster_home/*' -not -path '*/bin/*' "
         "-not -path '*/obj/*' -not -path '*/TestResults/*'")
BUILD_OUTPUT = {"shell": "mkdir -p src/bin src/obj && touch src/bin/app.dll src/obj/app.json"}


@pytest.mark.parametrize("own_root", [False, True], ids=["a plain-folder target",
                                                         "a plain harness root as its target"])
def test_a_plain_folder_prompts_changes_command_lists_the_product_change_and_no_delivery_record(
        tmp_path: Path, own_root: bool) -> None:
    root, target = world(tmp_path, MODES[2])
    phase = root / "workflow_defs/phases/c-review.yaml"  # a reviewer told to run the command
    phase.write_text(phase.read_text().replace(
        "goal: Produce review.md for the next step.",
        "goal: Review the change (the CHANGES command of the current step) in review.md."))
    store = create(root, None if own_root else target)
    cwd = (root if own_root else target).resolve()
    with replay(tmp_path, {"write": [{"literal": {"before": [FEATURE, BUILD_OUTPUT]}}],
                           "review": [{"literal": {}}]}) as server:
        settings = settings_for(server, tmp_path)
        assert [run_step(store, "d1", n, settings=settings).status
                for n in ("write", "review")] == ["completed", "completed"]
    request = "phases/d1/request.md" if own_root else str(root.resolve() / "phases/d1/request.md")
    command = PLAIN.format(request=request)
    assert (f"CHANGES: this working directory is a plain folder, not a git repository: there is "
            f"no branch, base commit or diff, and nothing is committed. `{command}` lists the "
            f"files written since this delivery began ({request} was written at `specops new`), "
            "its own records under phases/ and docs/phase/ and build output left out; it cannot "
            "show a deleted file or what changed inside a file: open the files it lists."
            ) in (root / "phases/d1/review/prompt.md").read_text()
    ran, output = changes_output(tmp_path, "review")
    assert ran == command
    assert "Process exited with code 0" in output, output
    listed = output.split("Output:\n", 1)[1].split()
    assert listed == ["./src/feature.txt"], listed  # the records, build output and harness left out
    assert (cwd / "docs/phase/d1/write.md").is_file() and (cwd / "src/bin/app.dll").is_file()
    # the writer's phase points at no CHANGES line, and its prompt has none
    assert "CHANGES" not in (root / "phases/d1/write/prompt.md").read_text()


def test_a_plain_folder_evaluators_changes_command_lists_the_generators_work(
        tmp_path: Path) -> None:
    root, target = world(tmp_path, MODES[2])
    add_review(root)
    evaluator = root / "workflow_defs/phases/c-eval.yaml"  # an evaluator told to run the command
    evaluator.write_text(evaluator.read_text().replace(
        "goal: Judge the notes.", "goal: Judge the notes and the change (CHANGES)."))
    store = create(root, target)
    with replay(tmp_path, {"write": [{"literal": {"before": [FEATURE, BUILD_OUTPUT]}}],
                           "write.review": [verdict("PASS", 9, 9)]}) as server:
        outcome = run_step(store, "d1", "write", settings=settings_for(server, tmp_path))
    assert outcome.status == "completed", outcome.message
    command = PLAIN.format(request=str(root.resolve() / "phases/d1/request.md"))
    prompt = (root / "phases/d1/write/reviews/write-r1-prompt.md").read_text()
    assert "CHANGES: this working directory is a plain folder, not a git repository: " in prompt
    assert f"`{command}` lists the files written since this delivery began" in prompt
    ran, output = changes_output(tmp_path, "write.review")
    assert ran == command
    assert output.split("Output:\n", 1)[1].split() == ["./src/feature.txt"]
