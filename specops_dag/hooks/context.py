"""`specops hook session-start` (after compaction) and `user-prompt-submit`, the fail-open half:
the bound delivery's workflow state or recovery index and its skill invocation, each section
capped and what is cut written whole to the node folder (a fan-out task's own folder). Any
error, BUDGET_S running out included, becomes a short warning, never a block; it reads the state
and never changes it, and imports `delivery`, `workflow` and `agent.prompt` only inside the
functions that need them."""

from __future__ import annotations

import json
import os
import sys

from specops_dag.hooks import Deadline

# `typing` alone costs more than this hook's work; annotations name the state models lazily.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

    from specops_dag.delivery.model import Delivery, Step
    from specops_dag.delivery.store import Store
    from specops_dag.workflow.catalog import Catalog

BUDGET_S = 4.0  # inside the 5 s codex timeout of the state hooks, start-up included
TOTAL_CAP = 10_000
PREVIEW = 2_000
SECTION_CAPS = {"workflow-state": 6_000, "skill-invocation": 4_000, "recovery-index": 6_000}
FIELD_CAP = 500
OVERFLOW = "hook-context.md"


def state_context(event: str, env: dict[str, str]) -> str | None:
    """The text to inject for a state event; on any error a short warning instead."""
    deadline = Deadline(BUDGET_S)
    try:
        try:
            deadline.start()
            return _state_context(event, env)
        finally:
            deadline.close()
    except Exception as err:  # fail open, the deadline running out included; never block
        deadline.close()
        return (f"<workflow-state>\nspecops hook {event} could not read the workflow state "
                f"({type(err).__name__}: {clip(str(err), 300)}). Continue the step your prompt "
                "names; do not guess the current step from the chat history or from other "
                "deliveries.\n"
                "</workflow-state>")


def _state_context(event: str, env: dict[str, str]) -> str | None:
    raw = sys.stdin.buffer.read()
    if event == "session-start":
        payload = json.loads(raw) if raw.strip() else {}
        if not isinstance(payload, dict) or payload.get("source") != "compact":
            return None  # startup/resume/clear: the prompt carries the step
    from pathlib import Path

    from specops_dag.delivery.lifecycle import snapshot_catalog
    from specops_dag.delivery.store import Store

    store = Store(Path(env.get("SPECOPS_ROOT") or os.getcwd()))
    bound = bind(store, env)
    if isinstance(bound, str):
        return f"<workflow-state>\n{bound}\n</workflow-state>"
    state, step = bound
    catalog = snapshot_catalog(store, state)
    at = session_paths(store, state, step, env)
    first = ("recovery-index", recovery_index(store, state, step, catalog, at)) \
        if event == "session-start" else ("workflow-state", workflow_state(store, state, step,
                                                                           catalog, at))
    # a sprint-contract session builds nothing: the build's skills are not its to follow
    skills = "" if env.get("SPECOPS_CONTRACT") else skill_invocation(
        state, step, catalog, at, env.get("SPECOPS_REVIEW_PHASE") or step.phase)
    sections = [first, ("skill-invocation", skills)]
    # parallel tasks each overflow into their own folder: the node folder is not theirs to write
    folder = work_folder(state, step, at)
    return fit(sections, store.root / folder / OVERFLOW, at(f"{folder}{OVERFLOW}"))


class Paths:
    """Harness-root paths as the agent resolves them from its working directory."""

    def __init__(self, root: Path, cwd: Path, review: str | None = None,
                 task: str | None = None) -> None:
        self.root, self.cwd = root, cwd
        self.review = review  # the evaluator phase, in a review round's session
        self.task = task  # the fan-out task this session does (SPECOPS_TASK), if any

    def __call__(self, rel: str) -> str:
        from specops_dag.delivery.queries import agent_path

        shown = agent_path(self.root / rel, self.cwd)
        return shown + "/" if rel.endswith("/") else shown


def session_paths(store: Store, state: Delivery, step: Step, env: dict[str, str]) -> Paths:
    """The paths of this session: a fan-out task's (SPECOPS_TASK beside its node) resolve from
    the task's own worktree, the others' from the node's working directory."""
    from specops_dag.delivery.queries import work_path

    cwd = work_path(store.root, state, step)
    task = env.get("SPECOPS_TASK") if env.get("SPECOPS_DELIVERY") and env.get(
        "SPECOPS_NODE") else None
    if task:
        from specops_dag.errors import UsageError

        rec = next((t for t in step.tasks if t.id == task), None)
        if rec is None:
            known = ", ".join(t.id for t in step.tasks) or "none yet"
            raise UsageError(f"SPECOPS_TASK `{task}`: node `{step.name}` has no such task "
                             f"(tasks: {known})")
        cwd = (store.root / rec.worktree).resolve() if rec.worktree else cwd
    return Paths(store.root, cwd, env.get("SPECOPS_REVIEW_PHASE"), task or None)


def work_folder(state: Delivery, step: Step, at: Paths) -> str:
    """Where this session's WRITE artifacts go, from the harness root: the node folder, or a
    fan-out task's own folder in it (the prompt's `Task folder:`)."""
    node = f"phases/{state.phase}/{step.name}/"
    return f"{node}tasks/{at.task}/" if at.task else node


def bind(store: Store, env: dict[str, str]) -> tuple[Delivery, Step] | str:
    """(state, step) of this session's delivery, or a note when it cannot be told for sure."""
    from specops_dag.delivery.queries import delivery_id_problem
    from specops_dag.errors import UsageError

    delivery = env.get("SPECOPS_DELIVERY", "")
    if not delivery:
        open_ = [e.id for e in store.read_index().deliveries if e.status != "completed"]
        if len(open_) != 1:
            listed = (f"{len(open_)} open deliveries ({', '.join(open_[:10])})" if open_
                      else "no open delivery")
            return (f"No delivery is bound to this session (SPECOPS_DELIVERY is not set) and "
                    f"phases/index.json lists {listed}. Run `specops status`, then ask the user "
                    "which delivery to work on; do not guess.")
        delivery = open_[0]
    if problem := delivery_id_problem(delivery):
        raise UsageError(f"SPECOPS_DELIVERY `{delivery}` {problem}")
    state = store.read(delivery)
    node = env.get("SPECOPS_NODE") if env.get("SPECOPS_DELIVERY") else None
    if node:
        return state, state.get_step(node)
    waiting = [s for s in state.steps if s.status == "running"] or [
        s for s in state.steps if s.status != "completed"] or state.steps[-1:]
    return state, waiting[0]


def clip(text: str, limit: int = FIELD_CAP) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def step_line(step: Step) -> str:
    from specops_dag.workflow.model import MAX_ATTEMPTS

    return (f"{step.name} (step {step.step}, phase {step.phase}, status {step.status}, "
            f"{step.attempts} of {MAX_ATTEMPTS} attempts used)")


def next_action(state: Delivery, step: Step, at: Paths) -> str:
    from specops_dag.delivery.queries import closed_gates, runnable_steps

    d, n = state.phase, step.name
    if step.status == "running" and at.review:
        return (f"review the work of `{n}` read-only as evaluator `{at.review}`: read its READ "
                "paths, judge each criterion of your prompt, end with its REPORT block; write "
                "no file")
    if step.status == "running" and at.task:  # as the task's prompt names them under WRITE
        return (f"continue task `{at.task}` of `{n}`: do its TASK, write its WRITE files "
                f"({at(work_folder(state, step, at))}, docs/phase/{d}/{n}-{at.task}.md), then "
                "end with a final summary")
    if step.status == "running":
        return (f"continue the attempt of `{n}`: do its TASK, write its WRITE files "
                f"({at(f'phases/{d}/{n}/')}, docs/phase/{d}/{n}.md), then end with a final "
                "summary")
    if step.status == "error":
        return f"fix the cause of the error, then `specops resume {d} {n}`"
    gate = (step.blocked_reason or "").removeprefix("awaiting approval: ")
    if step.status == "blocked" and gate != step.blocked_reason:
        return f"a person decides the `{gate}` gate (`specops approve {d} {gate} --note ...`)"
    if step.status == "blocked":
        return f"remove the cause of the block, then `specops resume {d} {n}`"
    runnable = runnable_steps(state)
    waits = [f"`{u}` ({state.get_step(u).status})" for u in step.needs
             if state.get_step(u).status != "completed"]
    if step.status == "pending" and n in runnable:
        return f"`specops run {d}` runs it"
    if step.status == "pending" and waits:
        return f"it waits for {', '.join(waits)}; see `specops status {d}`"
    if step.status == "pending":
        gates = closed_gates(state, step)
        return f"a person decides the `{gates[0]}` gate (`specops approve {d} {gates[0]} " \
            "--note ...`)" if gates else f"see `specops status {d}`"
    return f"`{n}` is completed and is not redone; " + (
        f"`specops run {d}` runs {', '.join(runnable)}" if runnable else "no step is runnable")


def folder_line(state: Delivery, step: Step, at: Paths) -> str:
    if at.task:
        return f"task folder: {at(work_folder(state, step, at))} (task `{at.task}` of the node)"
    return f"node folder: {at(work_folder(state, step, at))}"


def state_lines(state: Delivery, step: Step, at: Paths) -> list[str]:
    lines = [f"next action: {next_action(state, step, at)}",
             f"blocked reason: {clip(step.blocked_reason) if step.blocked_reason else 'none'}"]
    if step.error_message:
        lines.append(f"error: {clip(step.error_message)}")
    return lines


def read_lines(store: Store, state: Delivery, step: Step, catalog: Catalog,
               at: Paths) -> list[str]:
    from specops_dag.agent.prompt import read_list

    lines = read_list(store.root, state, step, catalog, at.cwd) + [
        f"{path} — context file" for path in step.context_files]
    return [f"- {line}" for line in lines] or ["- (none)"]


def workflow_state(store: Store, state: Delivery, step: Step, catalog: Catalog,
                   at: Paths) -> str:
    d = state.phase
    return "\n".join([
        "<workflow-state>", f"delivery: {d} (workflow {state.workflow}, status {state.status})",
        f"node: {step_line(step)}", folder_line(state, step, at),
        *state_lines(state, step, at),
        "sub-agent read list (give sub-agents these paths; never paste the files):",
        *read_lines(store, state, step, catalog, at), "</workflow-state>"])


def recovery_index(store: Store, state: Delivery, step: Step, catalog: Catalog,
                   at: Paths) -> str:
    d = state.phase
    lines = [
        "<recovery-index>",
        "The context was compacted. Recover only from the files of this delivery, not from the "
        "chat history or other deliveries; completed nodes are never redone.",
        f"delivery: {d} (workflow {state.workflow}, status {state.status}; state "
        f"{at(f'phases/{d}/index.json')})", f"goal: {clip(state.request)}",
        f"current node: {step_line(step)}",
        f"node goal: {clip(catalog.phases[step.phase].execution.goal)}",
        folder_line(state, step, at), *state_lines(state, step, at),
        "inputs:", *read_lines(store, state, step, catalog, at), "upstream handoffs:"]
    for name in step.needs:
        up = state.get_step(name)
        files = ", ".join(f"{at(ref.path)} (sha256 {ref.sha256})" for ref in up.handoff.values())
        lines += [f"- `{name}` ({up.status}): {files or 'no handoff yet'}",
                  f"  summary: {clip(up.summary) if up.summary else 'none'}"]
    if not step.needs:
        lines.append("- (none: this node starts from the request)")
    return "\n".join([*lines, "</recovery-index>"])


def skill_invocation(state: Delivery, step: Step, catalog: Catalog, at: Paths,
                     phase: str) -> str:
    bound = state.snapshot.skills.get(phase, [])
    entry = next((s for s in bound if s.load == "entry"), None)
    if entry is None:
        return ""
    d = state.phase
    known = {s.id: s for skills in state.snapshot.skills.values() for s in skills}
    edges = [e for e in catalog.graph.edges if e.source == entry.id and e.to in known]
    return "\n".join([
        "<skill-invocation>",
        f"entry skill: `{entry.id}` {at(f'phases/{d}/{entry.path}')} (sha256 {entry.sha256})",
        "on-demand skills (skill-graph edges from the entry skill):",
        *([f"- `{e.to}` {at(f'phases/{d}/{known[e.to].path}')} (sha256 {known[e.to].sha256}) "
           "— when: "
           f"{clip(e.reason, 200)}" for e in edges] or ["- none"]),
        "Read the entry skill completely after the READ files (work rule 1) and follow it; load "
        "an on-demand skill only when the entry skill calls for it along an edge above.",
        "</skill-invocation>"])


def fit(sections: list[tuple[str, str]], overflow: Path, shown: str) -> str:
    """Cap each section and the whole; what is cut goes whole to `overflow` (path + preview)."""
    sections = [(name, text) for name, text in sections if text]
    full = "\n".join(text for _, text in sections)
    out = "\n".join(cap_section(text, SECTION_CAPS[name], shown) for name, text in sections)
    if out == full and len(full) <= TOTAL_CAP:
        return full
    from specops_dag.files import write_text_atomic  # the state hooks load the state models anyway

    write_text_atomic(overflow, full)
    if len(out) <= TOTAL_CAP:
        return out
    return (f"The workflow context is {len(full):,} characters, over the {TOTAL_CAP:,}-character "
            f"hook limit; read all of it in {shown}. Preview (first {PREVIEW:,} characters):\n"
            + full[:PREVIEW])


def cap_section(text: str, cap: int, shown: str) -> str:
    if len(text) <= cap:
        return text
    head, _, closing = text.rpartition("\n")
    marker = f"\n[... cut at {cap:,} characters; the full context is in {shown}]\n{closing}"
    return head[:cap - len(marker)] + marker
