"""Assembles the prompt of one attempt (seed 001 §3–4, seed 000): AGENTS.md → common work rules →
context_files → delivery handoff (or one earlier step's summary) → previous failure summary →
the current step as READ / SKILLS / TASK / TARGET / WRITE. Upstream artifacts are named by path
and sha256, never pasted. Reading only: dry-run calls this and must change nothing.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from specops_dag.builtin import WORK_RULES
from specops_dag.delivery.model import WORK_RULES_KIND
from specops_dag.delivery.queries import (
    RISK_FILE,
    agent_path,
    get_step,
    is_git_target,
    owner_alive,
    target_of,
    work_path,
)
from specops_dag.errors import UsageError
from specops_dag.files import sha256_file
from specops_dag.workflow.model import MAX_ATTEMPTS

if TYPE_CHECKING:
    from specops_dag.delivery.model import Delivery, Step, TargetRecord, TaskRecord
    from specops_dag.workflow.catalog import Catalog
    from specops_dag.workflow.model import Node, Phase

FAILURE_LIMIT = 4000
FAILURE_HEAD = 1500
SUMMARY_LIMIT = 1000
ELISION = "\n[... {n} characters elided ...]\n"


def failure_summary(text: str, limit: int = FAILURE_LIMIT, head: int = FAILURE_HEAD) -> str:
    """At most `limit` chars: the first `head`, an elision marker, then the last ≤ 2,500 chars;
    the marker counts inside the limit."""
    if len(text) <= limit:
        return text
    tail_room = limit - head
    # The marker names how much was cut, so its own length depends on that number; settle it.
    cut = len(text) - head - tail_room
    for _ in range(3):
        marker = ELISION.format(n=cut + len(ELISION.format(n=cut)))
        tail = tail_room - len(marker)
        cut = len(text) - head - tail
    marker = ELISION.format(n=cut)
    tail = limit - head - len(marker)
    return text[:head] + marker + text[len(text) - tail:]


@dataclass(frozen=True)
class PromptPart:
    """One labelled part of a prompt (`path` None when it is not a file)."""

    label: str
    path: str | None
    text: str

    @property
    def chars(self) -> int:
        return len(self.text)


@dataclass(frozen=True)
class Prompt:
    """The whole prompt of one attempt: its `parts` in order."""

    delivery: str
    node: str
    step: int
    parts: tuple[PromptPart, ...]

    @property
    def text(self) -> str:
        return "\n\n".join(p.text for p in self.parts)

    @property
    def total_chars(self) -> int:
        return len(self.text)


@dataclass(frozen=True)
class TaskView:
    """One task of a fan-out node as its session's prompt shows it: the task's record, its place
    in the task order, and its own folder (where its WRITE artifacts go)."""

    record: TaskRecord
    index: int
    total: int
    folder: Path


@dataclass(frozen=True)
class ContractAsk:
    """A sprint-contract session (`execution.contract`): where `contract.md` goes, the round, and
    why the evaluator did not agree with the previous one."""

    path: Path
    round_no: int
    max_rounds: int
    feedback: str = ""


def assemble_prompt(root: Path, state: Delivery, step: Step, catalog: Catalog,
                    cwd: Path, tree: Path | None = None, task: TaskView | None = None,
                    contract: ContractAsk | None = None) -> Prompt:
    """Read everything this attempt's prompt is made of, in the fixed order, once. `root` is
    the harness root; `catalog` the delivery's snapshot; `cwd` the
    agent's working directory, which every path in the prompt resolves from; `tree` where the
    files of that directory are read (default `cwd`; a dry run before the worktree exists
    reads the commit it will be created from)."""
    tree = tree or cwd
    phase = catalog.phases[step.phase]
    parts: list[PromptPart] = []
    agents = tree / "AGENTS.md"
    if agents.is_file():  # codex's own AGENTS.md injection is off: it is sent once, here
        parts.append(PromptPart("AGENTS.md", "AGENTS.md", read_text(agents, "AGENTS.md")))
    parts.append(work_rules(root, state))
    for rel in context_paths(state, step, tree, shown=cwd):
        parts.append(PromptPart("context", rel, f"# Context file {rel} (the step's "
                                f"context_files)\n\n" + read_text(tree / rel, rel)))
    handoff = delivery_handoff(state, tree)
    if handoff is not None:
        parts.append(handoff)
    elif (earlier := latest_summary(state, step)) is not None:
        parts.append(earlier)
    if step.feedback:
        parts.append(PromptPart("human feedback", None,
                                "# Feedback from a person on this step\n\n" + step.feedback))
    last_failure = task.record.last_failure if task else step.last_failure
    if last_failure:
        failure = failure_summary(last_failure)
        parts.append(PromptPart("previous failure", None,
                                "# Previous attempt failed\n\n" + failure))
    parts.append(PromptPart("current step", None, current_step(root, state, step, catalog,
                                                                phase, cwd, task, contract)))
    return Prompt(state.phase, step.name, step.step, tuple(parts))


def work_rules(root: Path, state: Delivery) -> PromptPart:
    """The common work rules `specops new` froze into the delivery's snapshot; the built-in file
    only for a delivery frozen before they were (an upgrade of specops changes no delivery)."""
    frozen = state.snapshot.frozen(WORK_RULES_KIND)
    if frozen is None:
        return PromptPart("common work rules", "built-in:workflow_defs/work-rules.md",
                          WORK_RULES.read_text(encoding="utf-8"))
    shown = f"phases/{state.phase}/{frozen.copy_path}"
    try:
        return PromptPart("common work rules", shown, read_text(root / shown, shown))
    except OSError as err:
        raise UsageError(f"{shown}: cannot be read ({err.strerror}): the delivery's work rules "
                         "were frozen there at `specops new`; put it back as it was, or create "
                         "a new delivery") from None


def handoff_rel(delivery: str) -> str:
    return f"docs/phase/{delivery}/handoff.md"


def delivery_handoff(state: Delivery, tree: Path) -> PromptPart | None:
    """`docs/phase/<d>/handoff.md` as a completed step left it. A file no completed step
    registered (a failed attempt's own, or one from a step reopened since) is not a handoff."""
    rel = handoff_rel(state.phase)
    path = tree / rel
    if not path.is_file():
        return None
    sha = sha256_file(path)
    if not any(s.status == "completed" and s.delivery_handoff == sha for s in state.steps):
        return None
    return PromptPart("delivery handoff", rel, f"# Delivery handoff {rel} (as the last "
                      "completed step left it)\n\n" + read_text(path, rel))


def read_text(path: Path, shown: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(f"{shown}: not UTF-8 text; save it as UTF-8 or remove it") from err


def lexists(path: Path) -> bool:
    """The path exists, as a file, folder or symlink (even a broken one). Unlike
    `os.path.lexists`, a name the system refuses (too long) raises OSError instead of False."""
    return path.exists() or path.is_symlink()


def normalized(raw: str) -> str:
    """A context path as written, with `\\` separators and `.`/`..` segments folded."""
    return os.path.normpath(raw.replace("\\", "/"))


def context_paths(state: Delivery, step: Step, target: Path,
                  shown: Path | None = None) -> list[str]:
    """Validated context paths, relative to the agent's tree `target` (named `shown` in errors),
    duplicates (notation, case) once."""
    where = f"phases/{state.phase}/index.json: steps[{step.step}].context_files"
    if not isinstance(step.context_files, list) or not all(
            isinstance(p, str) for p in step.context_files):
        raise UsageError(f"{where}: must be an array of path strings; fix the file")
    root = target.resolve()
    named = shown or root
    files: set[str] = set()
    out: list[str] = []
    # The list's spellings of each path, by case-folded form (an absolute or empty entry never
    # shares a relative one's form); the first entry of a form takes them all.
    spellings: dict[str, list[str]] = {}
    for spelling in map(normalized, step.context_files):
        spellings.setdefault(spelling.casefold(), []).append(spelling)
    for i, raw in enumerate(step.context_files):
        here = f"{where}[{i}]: `{raw}`"
        if not raw.strip():
            raise UsageError(f"{here} is empty; remove it")
        if os.path.isabs(raw) or raw.startswith("~"):
            raise UsageError(f"{here} is absolute; use a path relative to the repository {named}")
        norm = normalized(raw)
        if norm == ".." or norm.startswith("../"):
            raise UsageError(f"{here} is outside the repository {named}; use a path inside it")
        same_path = spellings.pop(norm.casefold(), None)
        if same_path is None:  # the same path written another way, included already
            continue
        try:
            # Of the spellings differing only in case, the first that exists is the one read.
            norm = next((s for s in same_path if lexists(root / s)), norm)
            path = root / norm
            if not lexists(path):
                raise UsageError(f"{here} not found in {named}; fix the path or remove it")
            real = path.resolve()
        except RuntimeError:  # Path.resolve on a cycle of symlinks
            raise UsageError(f"{here} is a symlink loop; point the link at a file or remove "
                             "it") from None
        except OSError as err:  # too long a name, a permission denied on the way
            raise UsageError(f"{here} cannot be used ({err.strerror}); fix the path or remove "
                             "it") from None
        if not real.is_relative_to(root):
            raise UsageError(f"{here} resolves to {real}, outside the repository {named} (a "
                             "symlink); use a file inside the repository")
        if not real.is_file():
            raise UsageError(f"{here} is not a file; name a file")
        key = real.relative_to(root).as_posix().casefold()
        if key in files:  # another spelling (or a symlink) of a file already included
            continue
        files.add(key)
        read_text(real, here)
        out.append(norm)
    return out


def latest_summary(state: Delivery, step: Step) -> PromptPart | None:
    """The summary of the most recent completed step before this one, ≤ 1,000 chars; never all."""
    for earlier in reversed(state.steps[: step.step]):
        if earlier.status == "completed" and earlier.summary:
            return PromptPart(f"summary of step {earlier.step} ({earlier.name})", None,
                              f"# Summary of the previous step `{earlier.name}`\n\n"
                              + earlier.summary[:SUMMARY_LIMIT])
    return None


def read_list(root: Path, state: Delivery, step: Step, catalog: Catalog,
              cwd: Path) -> list[str]:
    """READ lines: upstream handoffs by input port, in the node's declared order, path + sha256,
    each path as it resolves from the agent's working directory `cwd`."""
    wf = catalog.workflows[state.workflow]
    node = next(n for n in wf.nodes if n.id == step.name)
    lines: list[str] = []
    for port, ref in node.inputs.items():
        if ref.input is not None:
            path = root / "phases" / state.phase / "request.md"
            sha = sha256_file(path) if path.is_file() else "missing"
            lines.append(f"{agent_path(path, cwd)} (sha256 {sha}) — input `{port}`: the "
                         "delivery request")
            continue
        upstream = get_step(state, ref.node or "")
        for art, fref in upstream.handoff.items():
            lines.append(f"{agent_path(root / fref.path, cwd)} (sha256 {fref.sha256}) — input "
                         f"`{port}`: `{ref.node}` "
                         f"output `{ref.output}`, artifact `{art}`")
    return lines


def where_line(cwd: Path) -> str:
    return f"Working directory: {cwd}. Every path below is absolute or relative to it."


def skill_lines(root: Path, state: Delivery, phase_id: str, cwd: Path) -> list[str]:
    """SKILLS lines: the phase's bound skills in the delivery snapshot, path + sha256."""
    folder = root / "phases" / state.phase
    return [f"- {s.load}: `{s.id}` {agent_path(folder / s.path, cwd)} (sha256 {s.sha256})"
            for s in state.snapshot.skills.get(phase_id, [])]


def current_step(root: Path, state: Delivery, step: Step, catalog: Catalog,
                 phase: Phase, cwd: Path, task: TaskView | None = None,
                 contract: ContractAsk | None = None) -> str:
    attempt = min(step.attempts + (0 if step.status == "running" else 1), MAX_ATTEMPTS)
    node_dir = root / "phases" / state.phase / step.name
    title = f"`{step.name}`"
    if task is not None:
        attempt, node_dir = task.record.attempts, task.folder
        title = f"`{step.name}`, task `{task.record.id}` ({task.index} of {task.total})"
    out = [f"# Current step: {title} (step {step.step} of delivery `{state.phase}`, phase "
           f"`{step.phase}`, attempt {attempt} of {MAX_ATTEMPTS})", "", where_line(cwd), "",
           "READ (in order):"]
    out += [f"{i}. {line}" for i, line in enumerate(read_list(root, state, step, catalog, cwd),
                                                    1)]
    if len(out) == 5:
        out.append("(no upstream handoffs)")
    skills = skill_lines(root, state, step.phase, cwd) if contract is None else []
    if skills:  # a contract session builds nothing: the build's skills are not its to follow
        out += ["", "SKILLS (from the delivery snapshot):", *skills]
    goal = phase.execution.goal.strip().replace("<delivery>", state.phase)
    out += ["", "TASK:" if contract is None else "TASK of the build that follows (this session "
            "only writes its contract):", goal.replace("<node>", step.name)]
    if task is not None:
        out += task_lines(task)
    step_file = root / "phases" / state.phase / f"step{step.step}.md"
    if step_file.is_file():
        out.append(f"Step details: {agent_path(step_file, cwd)}")
    target = target_line(state.snapshot.target)
    changes = changes_line(state)
    if changes is None:
        changes = plain_changes_line(root, state, phase, cwd)
    shown_target = (["", target] if target else []) + (["", changes] if changes else [])
    if contract is not None:
        return "\n".join(out + shown_target
                         + contract_lines(contract, cwd, "task" if task else "step"))
    out += shown_target
    agreed = task.record.contract if task is not None else step.contract
    if agreed is not None and agreed.agreed:
        shown = agent_path(root / agreed.path, cwd)
        out += ["", f"CONTRACT: build what the agreed contract {shown} "
                f"(sha256 {agreed.sha256}) says; every test it names must exist, run and pass "
                "in this attempt's validation, and the work is judged against it."]
    out += review_lines(state, step, catalog, attempt)
    out += ["", "WRITE:"]
    out += [f"- {agent_path(node_dir / a.path, cwd)}"
            + (" (required)" if a.required else " (optional)") for a in phase.output.artifacts]
    if task is not None:
        out += [f"- docs/phase/{state.phase}/{step.name}-{task.record.id}.md (task record: what "
                "you did, commands, evidence)", "",
                f"Task folder: {agent_path(node_dir, cwd)}/ — your WRITE artifacts live there "
                "(the node's artifacts are put together from every task's); put any other "
                "file this task produces (TRX results, logs) under it too."]
    else:
        out += [f"- docs/phase/{state.phase}/{step.name}.md (step record: what you did, "
                "commands, evidence)",
                f"- {handoff_rel(state.phase)} (delivery handoff for the next step: paths "
                "and decisions)", "",
                f"Node folder: {agent_path(node_dir, cwd)}/ — your WRITE artifacts live there; "
                "put any other file this step produces (TRX results, logs) under it too."]
    out += ["", f"RISK: {agent_path(node_dir / RISK_FILE, cwd)} — a risk or question a person "
            "must decide (an assumption you could not check, evidence you could not produce, a "
            "test you had to weaken, input you lack): what it is, why, and the file that shows "
            "it. Writing it makes the delivery wait at the `risk` gate until a person decides; "
            "leave it unwritten when there is none."]
    out += ["", "REPORT: end with a final message of at most 1,000 characters that summarizes "
            "what you did and names the files you wrote."]
    return "\n".join(out)


METADATA_PATHS = "':(exclude)phases' ':(exclude)docs/phase'"  # the delivery's own records


def changes_line(state: Delivery) -> str | None:
    """The CHANGES line of a git delivery: where its branch began and the one command that lists
    its product change (the delivery's own records under phases/ and docs/phase/ left out)."""
    if not (state.branch and state.base_commit):
        return None
    base = state.base_commit
    return (f"CHANGES: {state.branch}, this delivery's branch, began at {base}; `git diff "
            f"--stat {base} -- . {METADATA_PATHS}` lists its product change since then "
            "(commits and uncommitted edits; `git status --short` also shows new files).")


# What a plain folder's CHANGES command leaves out: the delivery's own records, the harness's
# working files (when the folder is the harness root) and build output.
PLAIN_EXCLUDES = ("./phases/*", "./docs/phase/*", "./.specops/*", "./.dagster_home/*", "*/bin/*",
                  "*/obj/*", "*/TestResults/*")


CHANGES_WORD = re.compile(r"\bCHANGES\b")


def refers_to_changes(root: Path, state: Delivery, phase: Phase) -> bool:
    """Does the phase's goal, or a skill the delivery bound to it, point the agent at the
    CHANGES line? (A skill that cannot be read counts as one that does.)"""
    if CHANGES_WORD.search(phase.execution.goal):
        return True
    folder = root / "phases" / state.phase
    for skill in state.snapshot.skills.get(phase.id, []):
        try:
            if CHANGES_WORD.search((folder / skill.path).read_text(encoding="utf-8")):
                return True
        except (OSError, UnicodeDecodeError):
            return True
    return False


def plain_changes_line(root: Path, state: Delivery, phase: Phase, cwd: Path) -> str | None:
    """The CHANGES line of a plain-folder delivery (its target is no git repository), for a
    phase whose goal or skills point at it: there is no branch, base commit or diff, so it says
    so and names the one command that lists the files written since `specops new` wrote the
    delivery's request, the same records left out; None for a git target or a phase that does
    not refer to it."""
    if is_git_target(target_of(root, state)) or not refers_to_changes(root, state, phase):
        return None
    request = agent_path(root / "phases" / state.phase / "request.md", cwd)
    skip = " ".join(f"-not -path '{p}'" for p in PLAIN_EXCLUDES)
    command = f"find . -type f -newer {shlex.quote(request)} {skip}"
    return ("CHANGES: this working directory is a plain folder, not a git repository: there is "
            f"no branch, base commit or diff, and nothing is committed. `{command}` lists the "
            f"files written since this delivery began ({request} was written at `specops new`), "
            "its own records under phases/ and docs/phase/ and build output left out; it cannot "
            "show a deleted file or what changed inside a file: open the files it lists.")


def target_line(target: TargetRecord | None) -> str | None:
    """The TARGET line: the framework frozen at `specops new` and what its policy lets build and
    test it. Work rules and skills name no .NET version and refer to this line instead; None
    (no line) without a frozen target."""
    if target is None:
        return None
    framework, line = target.framework, target.framework.removeprefix("net")
    sdk = f"SDK {line} or newer" if target.newer_sdk else f"SDK {line} only"
    text = (f"TARGET: {framework} — every project targets exactly {framework}; the SDK is the "
            f"one global.json selects in the repository root ({sdk}; never edit global.json).")
    if not target.newer_sdk:  # the target's own SDK line brings the target's runtime
        return text
    if target.newer_runtime:
        return text + (f" Where the {line} runtime is missing, run the tests on a newer one "
                       "with DOTNET_ROLL_FORWARD=Major.")
    return text + f" Tests run on the {line} runtime only; never set DOTNET_ROLL_FORWARD."


def contract_lines(ask: ContractAsk, cwd: Path, what: str) -> list[str]:
    """The rest of a contract session's step: what the contract holds, and its one WRITE."""
    out = ["", f"CONTRACT FIRST (round {ask.round_no} of {ask.max_rounds}): this session builds "
           f"nothing. Write the contract of this {what}: under `## Build`, what you will build "
           "(files and behaviour, within the TASK); under `## Tests`, one line `- "
           "Namespace.Class.Method` per test that will prove it — each must exist, run and pass "
           "in the build that follows. Change no other file: an independent evaluator reviews "
           "the contract read-only before the build starts."]
    if ask.feedback:
        out.append(f"The evaluator did not agree with your previous contract: {ask.feedback}")
    return out + ["", "WRITE:", f"- {agent_path(ask.path, cwd)} (required)", "",
                  "REPORT: end with a final message of at most 1,000 characters that summarizes "
                  "the contract and names the file you wrote."]


def task_lines(task: TaskView) -> list[str]:
    """What one task's session is told about its task (seed 001: one responsibility a step)."""
    rec = task.record
    out = ["", f"This session does ONE task of the node's task list: `{rec.id}` — {rec.title}. "
           "The other tasks run in sessions of their own and are merged after yours; do not do "
           "their work.",
           "- paths this task expects to touch: " + ", ".join(rec.paths),
           "- acceptance tests (each must exist, run and pass): " + ", ".join(rec.tests)]
    if rec.needs:
        out.append("- done before you and already in your working tree: "
                   + ", ".join(f"`{n}`" for n in rec.needs))
    return out


def review_phase(state: Delivery, node: Node) -> str | None:
    """The evaluator phase that reviews `node` in this delivery: the one `specops new` recorded
    for its platforms, else (a delivery created before reviews were recorded) the one its
    `review:` chooses for them; None for a node without `review:`."""
    if node.review is None:
        return None
    return state.snapshot.reviews.get(node.id) or node.review.phase_for(state.platforms)


def review_lines(state: Delivery, step: Step, catalog: Catalog, attempt: int) -> list[str]:
    """For a node with `review:`: what the evaluator grades, up front (seed 003's contract),
    and from round 2 the scores of the earlier rounds."""
    node = next(n for n in catalog.workflows[state.workflow].nodes if n.id == step.name)
    phase_id = review_phase(state, node)
    if node.review is None or phase_id is None:
        return []
    evaluator = catalog.phases[phase_id].execution
    out = ["", f"REVIEW: after the validation, an independent read-only evaluator "
           f"(`{phase_id}`, round {attempt} of {node.review.max_rounds}) scores your "
           "work 0-10 on each criterion; every score must reach its threshold:"]
    out += [f"- `{c.id}` (threshold {c.threshold}/10): {' '.join(c.description.split())}"
            for c in evaluator.criteria] or ["- (no criteria: its verdict alone decides)"]
    if evaluator.qa is not None:
        checks = ([f"{q.method} {q.path} → {q.status}" for q in evaluator.qa.probes]
                  + [f"page {b.path}" for b in evaluator.qa.browser])
        out.append("QA: before it scores, the executor starts your application with `dotnet "
                   "run`" + (f" and checks it ({', '.join(checks)})" if checks else "")
                   + "; a failed QA blocks the round whatever the scores.")
    if step.reviews:
        out.append("Scores of the earlier rounds:")
        for r in step.reviews:
            scores = ", ".join(f"{cid} {score}" for cid, score in r.scores.items())
            out.append(f"- round {r.round}: {r.verdict}"
                       + (f" ({scores})" if scores else "") + f" — {r.reason}")
        out.append("If the scores did not rise since the last round, change your approach "
                   "rather than polishing the same one.")
    return out


def pick_step(state: Delivery, node: str | None) -> Step:
    """The step a dry run previews: `node`, or the first pending or interrupted step."""
    if node is not None:
        return get_step(state, node)
    waiting = [s for s in state.steps if s.status == "pending"
               or (s.status == "running" and not owner_alive(s.owner))]
    if not waiting:
        raise UsageError(f"delivery `{state.phase}` has no pending step (status "
                         f"{state.status}); name a node to preview its prompt")
    return waiting[0]


def preview(root: Path, state: Delivery, step: Step, catalog: Catalog) -> Prompt | None:
    """The prompt the next attempt would send, with the same paths: before a git target's
    worktree exists, its files are read from the commit the worktree will be created from."""
    if catalog.phases[step.phase].execution.executor.kind == "command":
        return None
    cwd = work_path(root, state, step)
    target = target_of(root, state)
    if cwd.is_dir() or not is_git_target(target):
        return assemble_prompt(root, state, step, catalog, cwd)
    import tempfile

    from specops_dag.gitflow import (  # GitPython and git only for a worktree not made yet
        branch_name,
        export_tree,
    )

    with tempfile.TemporaryDirectory(prefix="specops-preview-") as scratch:
        tree, start = export_tree(target, state.phase, Path(scratch))
        will_be = state.model_copy(update={"branch": branch_name(state.phase),
                                           "base_commit": start})
        return assemble_prompt(root, will_be, step, catalog, cwd, tree=tree)


def sent_text(prompt: Prompt) -> str:
    """The prompt's text as the attempt sends it and keeps it in `prompt.md`: secret values of
    the environment (what the agent's sessions exclude) are `***`."""
    from specops_dag.agent.codex import AgentSettings, agent_excludes, secret_values
    from specops_dag.files import redact

    return redact(prompt.text, secret_values(dict(os.environ),
                                             agent_excludes(AgentSettings.from_env())))


def render_dry_run(root: Path, state: Delivery, step: Step, catalog: Catalog,
                   as_json: bool, show_prompt: bool = False) -> str:
    """What `specops dry-run` prints: the prompt's parts path by path (`show_prompt`: the prompt
    itself), or a command step's argv; as JSON, the parts and the prompt."""
    prompt = preview(root, state, step, catalog)
    head = {"delivery": state.phase, "node": step.name, "step": step.step, "phase": step.phase}
    if prompt is None:
        argv = catalog.phases[step.phase].execution.executor.argv
        if as_json:
            return json.dumps({**head, "executor": "command", "argv": argv}, indent=2)
        return (f"dry-run of {state.phase} / {step.name} (step {step.step}): a command step, no "
                f"prompt; it would run {argv}")
    node = next(n for n in catalog.workflows[state.workflow].nodes if n.id == step.name)
    review = review_phase(state, node)
    if as_json:
        return json.dumps({**head, "executor": "codex", "parts": [
            {"label": p.label, "path": p.path, "chars": p.chars} for p in prompt.parts],
            "total_chars": prompt.total_chars, **({"review": {
                "phase": review, "max_rounds": node.review.max_rounds}} if review else {}),
            "prompt": sent_text(prompt)}, indent=2)
    if show_prompt:
        return sent_text(prompt)
    lines = [f"dry-run of {state.phase} / {step.name} (step {step.step}, phase {step.phase}): "
             "nothing is changed"]
    for p in prompt.parts:
        shown = f"{p.path}  ({p.label})" if p.path else f"({p.label})"
        lines.append(f"  {p.chars:>8}  {shown}")
    lines.append(f"total prompt: {prompt.total_chars} chars")
    if review:
        lines.append(f"review: evaluator `{review}`, at most {node.review.max_rounds} rounds")
    return "\n".join(lines)
