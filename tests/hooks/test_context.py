"""`specops hook session-start` / `user-prompt-submit` (`hooks/context.py`): the injected workflow state, its caps and
overflow file, delivery binding, fail-open behaviour, and that no hook changes the state."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specops_dag import hooks as hook
from specops_dag.agent.prompt import TaskView, assemble_prompt
from specops_dag.delivery.lifecycle import new_delivery, snapshot_catalog
from specops_dag.delivery.model import FileRef, TaskRecord
from specops_dag.delivery.store import Store
from specops_dag.files import sha256_file
from specops_dag.hooks import context
from specops_dag.workflow.catalog import definition_roots, load_catalog

from ..support.harness import VENV_BIN, write_tree
from ..support.hooks import SPECOPS_VARS, call, payload


def codex_phase(pid: str, port: str, contract: str, artifact: str, skills: str) -> str:
    return (f"kind: phase\nid: {pid}\ninput: {{ports: {{{port}}}}}\nexecution:\n"
            f"  goal: Produce {artifact} for the next step.\n  executor: {{kind: codex}}\n"
            f"  skills:\n{skills}output:\n  ports: {{out: {{contract: {contract}}}}}\n"
            f"  artifacts:\n    - {{id: {Path(artifact).stem}, path: {artifact}, required: true}}\n"
            "validation: none\n")


HARNESS = {
    "workflow_defs/workflows/two.yaml": """
        kind: workflow
        id: two
        inputs: {request: {contract: req}}
        nodes:
          - {id: spec, phase: h-spec, inputs: {request: {input: request}}}
          - {id: build, phase: h-build, needs: [spec], inputs: {spec: {node: spec, output: out}}}
    """,
    "workflow_defs/phases/h-spec.yaml": codex_phase(
        "h-spec", "request: {contract: req}", "spec", "spec.md",
        "    - {id: specify, path: skills/specify/SKILL.md, load: entry, required: true}\n"),
    "workflow_defs/phases/h-build.yaml": codex_phase(
        "h-build", "spec: {contract: spec}", "code", "notes.md",
        "    - {id: build, path: skills/build/SKILL.md, load: entry, required: true}\n"
        "    - {id: survey, path: skills/survey/SKILL.md, load: on-demand}\n"
        "    - {id: mobile, path: skills/mobile/SKILL.md, load: on-demand,"
        " when: {platforms: [ios]}}\n"),
    "workflow_defs/skills/specify/SKILL.md": "Write the spec.\n",
    "workflow_defs/skills/build/SKILL.md": "Build it test first.\n",
    "workflow_defs/skills/survey/SKILL.md": "Survey the repository.\n",
    "workflow_defs/skills/mobile/SKILL.md": "Mobile specifics.\n",
    "workflow_defs/skills/graph.yaml": """
        edges:
          - {from: build, to: survey, type: dynamic_load, reason: Before changing code you have not read.}
          - {from: build, to: mobile, type: dynamic_load, reason: When the change touches the iOS app.}
    """,
}


def new(root: Path, delivery: str = "d1") -> Store:
    store = Store(root)
    new_delivery(store, load_catalog(definition_roots(root), display_base=root), "two", delivery,
                 "Add an RSS cache to the feed reader.")
    return store


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    harness = write_tree(tmp_path / "harness", HARNESS)
    for var in SPECOPS_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SPECOPS_ROOT", str(harness))
    monkeypatch.chdir(harness)
    return harness


def finish_spec(store: Store, artifacts: dict[str, str], summary: str = "Spec written.") -> None:
    """`spec` completed with the given handoff files, `build` running its first attempt."""
    with store.transaction("d1") as state:
        spec = state.get_step("spec")
        state.move(spec, "running", "run")
        state.move(spec, "completed", "run")
        for art, text in artifacts.items():
            path = store.root / "phases/d1/spec" / f"{art}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            spec.handoff[art] = FileRef(path=f"phases/d1/spec/{art}.md", sha256=sha256_file(path))
        spec.summary, spec.attempts = summary, 1
        build = state.get_step("build")
        state.move(build, "running", "run")
        build.attempts = 1


def inject(event: str, data: dict | None = None) -> str | None:
    """The additionalContext of a state hook run in-process, or None when it printed nothing."""
    code, out = call(event, json.dumps(data or {}).encode())
    assert code == 0
    if not out:
        return None
    answer = json.loads(out)["hookSpecificOutput"]
    assert answer["hookEventName"] == hook.EVENTS[event]
    return answer["additionalContext"]


def snapshot(root: Path, rel: str) -> tuple[str, str]:
    skill = root / "phases/d1/snapshot/skills" / rel / "SKILL.md"
    return f"phases/d1/snapshot/skills/{rel}/SKILL.md", sha256_file(skill)


def skill_block(root: Path) -> str:
    build, survey = snapshot(root, "build"), snapshot(root, "survey")
    return (
        "<skill-invocation>\n"
        f"entry skill: `build` {build[0]} (sha256 {build[1]})\n"
        "on-demand skills (skill-graph edges from the entry skill):\n"
        f"- `survey` {survey[0]} (sha256 {survey[1]}) — when: Before changing code you have not "
        "read.\n"
        "Read the entry skill completely after the READ files (work rule 1) and follow it; load "
        "an on-demand skill only when the entry skill calls for it along an edge above.\n"
        "</skill-invocation>")


def test_user_prompt_submit_injects_the_workflow_state_and_the_skill_invocation(
        root: Path, monkeypatch) -> None:
    store = new(root)
    finish_spec(store, {"spec": "# Spec\n"})
    monkeypatch.setenv("SPECOPS_DELIVERY", "d1")
    monkeypatch.setenv("SPECOPS_NODE", "build")
    spec_sha = sha256_file(root / "phases/d1/spec/spec.md")
    assert inject("user-prompt-submit", {"prompt": "go"}) == (
        "<workflow-state>\n"
        "delivery: d1 (workflow two, status running)\n"
        "node: build (step 1, phase h-build, status running, 1 of 3 attempts used)\n"
        "node folder: phases/d1/build/\n"
        "next action: continue the attempt of `build`: do its TASK, write its WRITE files "
        "(phases/d1/build/, docs/phase/d1/build.md), then end with a final summary\n"
        "blocked reason: none\n"
        "sub-agent read list (give sub-agents these paths; never paste the files):\n"
        f"- phases/d1/spec/spec.md (sha256 {spec_sha}) — input `spec`: `spec` output `out`, "
        "artifact `spec`\n"
        "</workflow-state>\n" + skill_block(root))


def test_a_contract_session_is_not_told_to_follow_the_builds_skills(root: Path,
                                                                   monkeypatch) -> None:
    new(root)
    monkeypatch.setenv("SPECOPS_DELIVERY", "d1")
    monkeypatch.setenv("SPECOPS_NODE", "build")
    monkeypatch.setenv("SPECOPS_CONTRACT", "1")
    text = inject("user-prompt-submit")
    assert text.startswith("<workflow-state>") and "<skill-invocation>" not in text


def test_an_unbound_on_demand_skill_is_not_offered(root: Path, monkeypatch) -> None:
    new(root)
    monkeypatch.setenv("SPECOPS_DELIVERY", "d1")
    monkeypatch.setenv("SPECOPS_NODE", "build")
    text = inject("user-prompt-submit")
    assert "`survey`" in text and "mobile" not in text


def test_session_start_after_compaction_injects_the_recovery_index(root: Path,
                                                                    monkeypatch) -> None:
    store = new(root)
    finish_spec(store, {"spec": "# Spec\n"}, summary="Wrote the spec:\n three criteria.")
    monkeypatch.setenv("SPECOPS_DELIVERY", "d1")
    monkeypatch.setenv("SPECOPS_NODE", "build")
    spec_sha = sha256_file(root / "phases/d1/spec/spec.md")
    text = inject("session-start", {"hook_event_name": "SessionStart", "source": "compact"})
    assert text == (
        "<recovery-index>\n"
        "The context was compacted. Recover only from the files of this delivery, not from the "
        "chat history or other deliveries; completed nodes are never redone.\n"
        "delivery: d1 (workflow two, status running; state phases/d1/index.json)\n"
        "goal: Add an RSS cache to the feed reader.\n"
        "current node: build (step 1, phase h-build, status running, 1 of 3 attempts used)\n"
        "node goal: Produce notes.md for the next step.\n"
        "node folder: phases/d1/build/\n"
        "next action: continue the attempt of `build`: do its TASK, write its WRITE files "
        "(phases/d1/build/, docs/phase/d1/build.md), then end with a final summary\n"
        "blocked reason: none\n"
        "inputs:\n"
        f"- phases/d1/spec/spec.md (sha256 {spec_sha}) — input `spec`: `spec` output `out`, "
        "artifact `spec`\n"
        "upstream handoffs:\n"
        f"- `spec` (completed): phases/d1/spec/spec.md (sha256 {spec_sha})\n"
        "  summary: Wrote the spec: three criteria.\n"
        "</recovery-index>\n" + skill_block(root))


@pytest.mark.parametrize("source", ["startup", "resume", "clear"])
def test_session_start_from_other_sources_injects_nothing(root: Path, monkeypatch,
                                                           source: str) -> None:
    new(root)
    monkeypatch.setenv("SPECOPS_DELIVERY", "d1")
    assert inject("session-start", {"source": source}) is None


def test_without_the_env_the_one_open_delivery_is_used(root: Path) -> None:
    store = new(root)
    new(root, "d2")
    with store.transaction("d2") as state:
        for step in state.steps:
            state.move(step, "running", "run")
            state.move(step, "completed", "run")
    text = inject("user-prompt-submit")
    assert text.startswith("<workflow-state>\ndelivery: d1 (workflow two, status pending)\n"
                           "node: spec (step 0, phase h-spec, status pending, 0 of 3 attempts "
                           "used)\n")
    assert "next action: `specops run d1` runs it\n" in text


@pytest.mark.parametrize(("deliveries", "listed"), [
    (["d1", "d2"], "2 open deliveries (d1, d2)"), ([], "no open delivery")],
    ids=["two open", "none"])
def test_without_the_env_and_no_single_open_delivery_the_hook_does_not_guess(
        root: Path, deliveries: list[str], listed: str) -> None:
    for delivery in deliveries:
        new(root, delivery)
    assert inject("user-prompt-submit") == (
        "<workflow-state>\nNo delivery is bound to this session (SPECOPS_DELIVERY is not set) and "
        f"phases/index.json lists {listed}. Run `specops status`, then ask the user which "
        "delivery to work on; do not guess.\n</workflow-state>")


def test_a_blocked_gate_is_reported_as_the_next_action(root: Path, monkeypatch) -> None:
    store = new(root)
    with store.transaction("d1") as state:
        spec = state.get_step("spec")
        state.move(spec, "blocked", "run")
        spec.blocked_reason = "awaiting approval: design-approval"
    monkeypatch.setenv("SPECOPS_DELIVERY", "d1")
    text = inject("user-prompt-submit")
    assert ("next action: a person decides the `design-approval` gate (`specops approve d1 "
            "design-approval --note ...`)\nblocked reason: awaiting approval: design-approval\n"
            ) in text


def test_an_oversized_section_is_cut_and_written_whole_to_the_node_folder(
        root: Path, monkeypatch) -> None:
    store = new(root)
    finish_spec(store, {f"part-{i:03}": f"part {i}\n" for i in range(120)})
    monkeypatch.setenv("SPECOPS_DELIVERY", "d1")
    monkeypatch.setenv("SPECOPS_NODE", "build")
    text = inject("user-prompt-submit")
    overflow = root / "phases/d1/build/hook-context.md"
    state_part = text.split("\n<skill-invocation>")[0]
    assert len(state_part) == context.SECTION_CAPS["workflow-state"]
    assert state_part.endswith("\n[... cut at 6,000 characters; the full context is in "
                               "phases/d1/build/hook-context.md]\n</workflow-state>")
    assert text.endswith(skill_block(root))
    assert len(text) <= context.TOTAL_CAP
    full = overflow.read_text()
    assert "phases/d1/spec/part-119.md" in full and "part-119" not in text
    assert full.endswith(skill_block(root))


def test_a_context_over_the_total_cap_becomes_a_path_and_a_preview(root: Path,
                                                                   monkeypatch) -> None:
    store = new(root)
    finish_spec(store, {f"part-{i:03}": f"part {i}\n" for i in range(150)})
    monkeypatch.setenv("SPECOPS_DELIVERY", "d1")
    monkeypatch.setenv("SPECOPS_NODE", "build")
    monkeypatch.setitem(context.SECTION_CAPS, "workflow-state", 50_000)
    text = inject("user-prompt-submit")
    full = (root / "phases/d1/build/hook-context.md").read_text()
    head = (f"The workflow context is {len(full):,} characters, over the 10,000-character hook "
            "limit; read all of it in phases/d1/build/hook-context.md. Preview (first 2,000 "
            "characters):\n")
    assert len(full) > context.TOTAL_CAP
    assert text == head + full[:2000]


def state_files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((root / "phases").rglob("index.json"))}


def test_no_hook_changes_the_state_files(root: Path, monkeypatch) -> None:
    store = new(root)
    finish_spec(store, {"spec": "# Spec\n"})
    before = state_files(root)
    monkeypatch.setenv("SPECOPS_DELIVERY", "d1")
    monkeypatch.setenv("SPECOPS_NODE", "build")
    assert inject("user-prompt-submit")
    assert inject("session-start", {"source": "compact"})
    assert inject("session-start", {"source": "startup"}) is None
    assert call("pre-tool-use", payload("git push --force", root))[1]
    assert call("pre-tool-use", payload("dotnet test", root)) == (0, "")
    assert state_files(root) == before


def test_a_corrupt_delivery_index_fails_open_with_a_warning(root: Path, monkeypatch) -> None:
    new(root)
    (root / "phases/d1/index.json").write_text("{not json")
    monkeypatch.setenv("SPECOPS_DELIVERY", "d1")
    assert inject("user-prompt-submit") == (
        "<workflow-state>\nspecops hook user-prompt-submit could not read the workflow state "
        "(StateError: phases/d1/index.json: not valid JSON (Expecting property name enclosed in "
        "double quotes: line 1 column 2 (char 1)); restore it from a backup). "
        "Continue the step your prompt names; do not guess the current step from the chat "
        "history or from other deliveries.\n</workflow-state>")


@pytest.mark.parametrize("event", ["user-prompt-submit", "session-start"])
def test_a_corrupt_phases_index_fails_open(root: Path, event: str) -> None:
    new(root)
    (root / "phases/index.json").write_text("[[[")
    text = inject(event, {"source": "compact"})
    assert text.startswith(f"<workflow-state>\nspecops hook {event} could not read the workflow "
                           "state (StateError: phases/index.json: not valid JSON (Expecting "
                           "value: line 1 column 4 (char 3)); restore it from a backup). "
                           "Continue ")
    assert text.endswith("do not guess the current step from the chat history or from other "
                         "deliveries.\n</workflow-state>")


@pytest.mark.parametrize(("env", "error"), [
    ({"SPECOPS_DELIVERY": "../etc"}, "UsageError: SPECOPS_DELIVERY `../etc` contains a path "
                                     "separator"),
    ({"SPECOPS_DELIVERY": "d1", "SPECOPS_NODE": "deploy"},
     "UsageError: delivery `d1` has no node `deploy` (nodes: spec, build)"),
    ({"SPECOPS_DELIVERY": "d9"}, "UsageError: unknown delivery `d9`: phases/d9/index.json not "
                                 "found; list deliveries with `specops status` or create one "
                                 "with `specops new`"),
], ids=["bad id", "unknown node", "unknown delivery"])
def test_a_bad_binding_fails_open_with_the_reason(root: Path, monkeypatch, env: dict,
                                                  error: str) -> None:
    new(root)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert f"could not read the workflow state ({error})." in inject("user-prompt-submit")


def test_the_state_hooks_fail_open_when_the_budget_runs_out(root: Path, monkeypatch) -> None:
    new(root)
    monkeypatch.setenv("SPECOPS_DELIVERY", "d1")
    monkeypatch.setattr(context, "BUDGET_S", 1e-6)
    text = inject("user-prompt-submit")
    assert "could not read the workflow state (BudgetExceeded: the 1e-06 s budget of the hook " \
           "ran out)" in text


def test_the_budget_timer_is_disarmed_after_the_hook(root: Path, monkeypatch) -> None:
    import signal

    new(root)
    monkeypatch.setenv("SPECOPS_DELIVERY", "d1")
    before = signal.getsignal(signal.SIGALRM)
    inject("user-prompt-submit")
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is before


@pytest.mark.parametrize("argv", [[str(VENV_BIN / "specops"), "hook", "user-prompt-submit"],
                                  [sys.executable, "-m", "specops_dag.hooks", "session-start"]],
                         ids=["console script", "python -m"])
def test_the_installed_state_hooks_answer_within_the_budget(root: Path, argv: list[str]) -> None:
    new(root)
    env = {**{k: v for k, v in os.environ.items() if k not in SPECOPS_VARS},
           "SPECOPS_ROOT": str(root), "SPECOPS_DELIVERY": "d1", "SPECOPS_NODE": "spec"}
    done = subprocess.run(argv, input=b'{"source": "compact"}', cwd=root, env=env,
                          capture_output=True, timeout=context.BUDGET_S + 10, check=False)
    assert (done.returncode, done.stderr) == (0, b"")
    answer = json.loads(done.stdout)["hookSpecificOutput"]
    assert answer["hookEventName"] in ("UserPromptSubmit", "SessionStart")
    assert "node: spec (step 0" in answer["additionalContext"] \
        or "current node: spec (step 0" in answer["additionalContext"]


def running_task(store: Store, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`build` is a fan-out node whose task `t1` (1 of 2) runs its first session in its own
    worktree, and this session is that task's (its env as the executor sets it); returns the
    task's folder."""
    finish_spec(store, {"spec": "# Spec\n"})
    with store.transaction("d1") as state:
        state.get_step("build").tasks = [
            TaskRecord(id=t, title=f"Part {t}", status="running", attempts=1,
                       branch=f"feat-d1+build+{t}", worktree=f".specops/worktrees/d1+build+{t}")
            for t in ("t1", "t2")]
    for key, value in {"SPECOPS_DELIVERY": "d1", "SPECOPS_NODE": "build",
                       "SPECOPS_TASK": "t1"}.items():
        monkeypatch.setenv(key, value)
    return (store.root / "phases/d1/build/tasks/t1").resolve()


def test_a_fan_out_task_session_is_told_the_task_folder_and_record_its_prompts_write_names(
        root: Path, monkeypatch) -> None:
    store = new(root)
    folder = running_task(store, monkeypatch)
    state = store.read("d1")
    build = state.get_step("build")
    prompt = assemble_prompt(root, state, build, snapshot_catalog(store, state),
                             (root / ".specops/worktrees/d1+build+t1").resolve(),
                             task=TaskView(build.tasks[0], 1, 2, folder)).text
    assert f"\nTask folder: {folder}/ — " in prompt
    assert f"WRITE:\n- {folder}/notes.md (required)\n- docs/phase/d1/build-t1.md (task " in prompt
    action = (f"next action: continue task `t1` of `build`: do its TASK, write its WRITE files "
              f"({folder}/, docs/phase/d1/build-t1.md), then end with a final summary\n")
    text = inject("user-prompt-submit")
    assert f"\ntask folder: {folder}/ (task `t1` of the node)\n{action}" in text
    assert "phases/d1/build/\n" not in text and "docs/phase/d1/build.md" not in text
    assert f"\ntask folder: {folder}/ (task `t1` of the node)\n{action}" in inject(
        "session-start", {"source": "compact"})


def test_a_fan_out_tasks_oversized_context_is_written_whole_to_its_own_folder(
        root: Path, monkeypatch) -> None:
    store = new(root)
    folder = running_task(store, monkeypatch)
    with store.transaction("d1") as state:
        spec = state.get_step("spec")
        for i in range(120):
            spec.handoff[f"part-{i:03}"] = FileRef(path=f"phases/d1/spec/part-{i:03}.md",
                                                   sha256="0" * 64)
    text = inject("user-prompt-submit")
    assert f"the full context is in {folder}/hook-context.md]\n</workflow-state>" in text
    assert "phases/d1/spec/part-119.md" in (folder / "hook-context.md").read_text()
    assert not (root / "phases/d1/build/hook-context.md").exists()


def test_a_task_the_node_does_not_have_fails_open_with_the_reason(root: Path,
                                                                  monkeypatch) -> None:
    store = new(root)
    running_task(store, monkeypatch)
    monkeypatch.setenv("SPECOPS_TASK", "t9")
    assert ("could not read the workflow state (UsageError: SPECOPS_TASK `t9`: node `build` has "
            "no such task (tasks: t1, t2))." in inject("user-prompt-submit"))
