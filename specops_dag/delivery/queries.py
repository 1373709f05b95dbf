"""The read-only questions asked of a delivery's state — what can run, what drifted, which gate
waits and what it asks, how many tokens went where — and the `specops status` text.

Standard library only: `state` imports it, and the CLI reaches it without importing Dagster.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Container
from pathlib import Path
from typing import TYPE_CHECKING

from specops_dag.builtin import BUILTIN_DEFS, BUILTIN_PREFIX
from specops_dag.delivery.platform import origin_text
from specops_dag.errors import UsageError
from specops_dag.files import WORKTREES, sha256_file
from specops_dag.gitflow import is_repository

RISK_FILE = "risk.md"  # in a node folder: the agent raises a risk for a person to decide

if TYPE_CHECKING:
    from specops_dag.delivery.model import Delivery, Owner, PreflightRecord, RanOn, Step, Usage


STATUS_MARK = {"completed": "✔", "running": "…", "pending": "·", "error": "✘", "blocked": "■"}
QUESTIONS = {
    "scope": "Is this the right workflow and scope for the request, and the right repository?",
    "requirements": "Is the requirements specification correct and complete?",
    "design": "Can this technical plan be the basis for development?",
    "target-write": "May the agent change the target repository now?",
    "risk": "Do you accept the risk the agent raised (or the evidence it had to omit)?",
    "external-write": "May specops push or write to external systems?",
}
DELIVERY_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def check_delivery_id(delivery: str) -> None:
    problem = delivery_id_problem(delivery)
    if problem:
        raise UsageError(f"delivery id `{delivery}` {problem}; use e.g. `rss-cache` or "
                         "`2026-11-rss-cache`")


def delivery_id_problem(delivery: str) -> str | None:
    """Why `delivery` cannot be a delivery id (a folder, a partition key, a branch), or None."""
    if not delivery:
        return "is empty"
    if "/" in delivery or "\\" in delivery:
        return "contains a path separator"
    if ".." in delivery:
        return "contains `..`"
    if delivery.endswith((".", ".lock")):
        return "ends with `.` or `.lock`, which git refuses in a branch name"
    if not DELIVERY_ID_RE.fullmatch(delivery):
        return ("must be 1-64 characters of letters, digits, `.`, `_` or `-`, starting with a "
                "letter or digit")
    return None


def get_step(state: Delivery, name: str) -> Step:
    for step in state.steps:
        if step.name == name:
            return step
    raise UsageError(f"delivery `{state.phase}` has no node `{name}` (nodes: "
                     f"{', '.join(s.name for s in state.steps)})")


def target_of(root: Path, state: Delivery) -> Path:
    """The repository the delivery changes (its `target`, relative to the harness root)."""
    return (root / state.target).resolve()




def is_git_target(target: Path) -> bool:
    """A target with its own `.git` (a repository folder with a HEAD, or a worktree's file) works
    on a feat-<d> worktree; any other folder, also one with an empty `.git` folder, is a plain
    target the agent changes in place (`gitflow.is_repository`, the one such check)."""
    return is_repository(target)


def work_path(root: Path, state: Delivery, step: Step | None = None) -> Path:
    """The agent's working directory: for a git target, the worktree of `step` when it may run
    beside other nodes (`<d>+<node>`), else the delivery's worktree (the one its first run
    creates, for a git target not yet run); for a plain target, the folder itself."""
    if step is not None and step.worktree:
        return (root / step.worktree).resolve()
    target = target_of(root, state) if not state.worktree else None
    if target is not None and not is_git_target(target):
        return target
    if step is not None and runs_beside_others(state, step.name):
        return (root / WORKTREES / f"{state.phase}+{step.name}").resolve()
    if state.worktree:
        return (root / state.worktree).resolve()
    return (root / WORKTREES / state.phase).resolve()


def runs_beside_others(state: Delivery, node: str) -> bool:
    """May `node` run at the same time as another node: is some node neither upstream nor
    downstream of it? Such a node works in its own worktree; the others in the delivery's."""
    return node in beside_others(tuple((s.name, tuple(s.needs)) for s in state.steps))


@functools.lru_cache(maxsize=16)
def beside_others(graph: tuple[tuple[str, tuple[str, ...]], ...]) -> frozenset[str]:
    """The nodes of `graph` (each with its needs, in topological order) that some other node is
    neither upstream nor downstream of — worked out once per graph (a step asks it several
    times, and a walk of its upstream would cost more the further along a chain it is). Each
    node's upstream and downstream are bit sets over the nodes' positions."""
    at = {name: i for i, (name, _) in enumerate(graph)}
    up = [0] * len(graph)
    for i, (_, needs) in enumerate(graph):
        for need in needs:
            if need in at:
                up[i] |= up[at[need]] | 1 << at[need]
    down = [0] * len(graph)
    for i in reversed(range(len(graph))):
        for need in graph[i][1]:
            if need in at:
                down[at[need]] |= down[i] | 1 << i
    everyone = (1 << len(graph)) - 1
    return frozenset(name for i, (name, _) in enumerate(graph)
                     if up[i] | down[i] | 1 << i != everyone)


def agent_path(path: Path, cwd: Path) -> str:
    """A path as the agent's prompt names it: relative to its working directory when inside
    it, else absolute — so it resolves from where the agent runs."""
    path = path.resolve()
    return path.relative_to(cwd).as_posix() if path.is_relative_to(cwd) else str(path)


def ran_on_text(where: RanOn) -> str:
    """Where a step or task ran, as status and the run's log say it."""
    if where.worker:
        return f"Celery worker `{where.worker}` (host {where.host}, pid {where.pid})"
    return f"process {where.pid} on host {where.host}"


def owner_alive(owner: Owner | None) -> bool:
    """Is the process that marked a step running still at it? `locking.owner_alive` judges: on
    this host by its pid, on another by the lease its owner record holds (`owner.lease`)."""
    if owner is None:
        return False
    import time  # all load on first use: a delivery with nothing running needs none

    from specops_dag import locking

    record = owner_record(owner)
    leased = locking.read_owner(Path(owner.lease)) if owner.lease else None
    if leased is not None and leased.same_process(record):
        record = leased
    return locking.owner_alive(record, time.time())


def owner_record(owner: Owner):
    """A step's owner as `locking` judges and names it (its lease not read)."""
    from specops_dag.locking import OwnerRecord

    return OwnerRecord(owner.host, owner.pid, owner.boot_id, owner.create_time)


def owner_named(owner: Owner) -> str:
    """`pid N`, with `on host H` when the step runs on another host."""
    return owner_record(owner).named()


def gate_open(state: Delivery, gate: str) -> bool:
    """A gate is open when its latest decision is an approval (one approval per gate name) not
    yet used up (a push uses the `external-write` approval that allowed it); a `risk` gate also
    needs that approval to be newer than the latest risk raised."""
    decisions = [a for a in state.approvals if a.gate == gate]
    if not decisions or decisions[-1].decision != "approved" or decisions[-1].used_at:
        return False
    raised = [r.raised_at for r in state.risks] if gate == "risk" else []
    return not raised or decisions[-1].at >= max(raised)


def accepted_risks(state: Delivery) -> list:
    """The risks a standing approval of the `risk` gate covers: those `open_risks` leaves out."""
    still_open = open_risks(state)
    return [r for r in state.risks if r not in still_open]


def open_risks(state: Delivery) -> list:
    """The risks no standing approval of the `risk` gate covers: those raised after its latest
    decision when that is an approval, every risk when it is a rejection or there is none. By
    any node, the last included: while one is open the delivery is not completed nor pushed."""
    decisions = [a for a in state.approvals if a.gate == "risk"]
    if decisions and decisions[-1].decision == "approved":
        return [r for r in state.risks if r.raised_at > decisions[-1].at]
    return list(state.risks)


def delivery_status(state: Delivery, steps_status: str | None = None) -> str:
    """The delivery's status as a person must read it: its steps' status (`steps_status`, else
    the recorded one), except that every step completed with a risk still open is `blocked` on
    that decision."""
    status = steps_status or state.status
    if status == "completed" and open_risks(state):
        return "blocked"
    return status


def closed_gates(state: Delivery, step: Step) -> list[str]:
    return [g for g in step.gates if not gate_open(state, g)]


def runnable_steps(state: Delivery) -> list[str]:
    """Pending or interrupted steps whose upstream is not stuck and have no closed gate in front."""
    stuck: set[str] = set()
    out = []
    for step in state.steps:
        interrupted = step.status == "running" and not owner_alive(step.owner)
        upstream_stuck = bool(stuck & set(step.needs))
        if step.status != "completed":
            stuck.add(step.name)
        if upstream_stuck or step.status not in ("pending", "running") or closed_gates(state, step):
            continue
        if step.status == "pending" or interrupted:
            out.append(step.name)
    return out


def gates_ahead(state: Delivery) -> list[dict]:
    """The closed gates the next run stops at, each once, in step order: those of the pending
    (or interrupted) steps it reaches — steps whose every upstream step is completed or reached
    with no closed gate. `node`: the first step behind the gate; `after`: its upstream steps
    the run completes first."""
    passes = {s.name for s in state.steps if s.status == "completed"}
    ahead: dict[str, dict] = {}
    for step in state.steps:
        waiting = step.status == "pending" or (step.status == "running"
                                               and not owner_alive(step.owner))
        if not waiting or not set(step.needs) <= passes:
            continue
        closed = closed_gates(state, step)
        if not closed:
            passes.add(step.name)
        for gate in closed:
            ahead.setdefault(gate, {
                "gate": gate, "node": step.name, "question": QUESTIONS[gate],
                "after": [n for n in step.needs if get_step(state, n).status != "completed"],
                "approve": f"specops approve {state.phase} {gate} --note ...", "decides_on": []})
    return list(ahead.values())


def gate_plan(root: Path, state: Delivery) -> list[dict]:
    """`gates_ahead`, each with `decides_on`: the steps that ask the gate after their work and
    have not run, so it cannot be decided before the run (`specops approve` refuses). Only a
    gate behind a step the run completes first can be one: then the delivery's snapshot is read."""
    ahead = gates_ahead(state)
    behind = [entry for entry in ahead if entry["after"]]
    if behind:
        from specops_dag.delivery.gates import not_yet_run  # the snapshot's YAML, when needed
        from specops_dag.delivery.store import Store

        store = Store(root)
        for entry in behind:
            entry["decides_on"] = not_yet_run(store, state, entry["gate"])
    return ahead


def ahead_lines(delivery: str, ahead: list[dict], run: str, runnable: bool) -> list[str]:
    """What must be decided before the `run` ("first" or "next") run, for `new` and `status`;
    `runnable`: some step can run before any of these gates."""
    lines = []
    for entry in ahead:
        gate, node, command = entry["gate"], entry["node"], entry["approve"]
        if entry["decides_on"]:
            names = ", ".join(f"`{n}`" for n in entry["decides_on"])
            lines.append(f"the {run} run stops at gate `{gate}` in front of `{node}`: it decides "
                         f"on what {names} writes; decide it once that has run")
            continue
        if entry["after"]:
            lines.append(f"before the {run} run reaches `{node}`: gate `{gate}` needs approval, "
                         f"or the run stops there: `{command}`")
        else:
            then = "" if runnable else f", then `specops run {delivery}`"
            lines.append(f"before the {run} run: gate `{gate}` in front of `{node}` needs "
                         f"approval: `{command}`{then}")
        lines.append(f"  question: {entry['question']}")
    return lines


def source_path(root: Path, display: str) -> Path | None:
    """The file a snapshot entry was copied from (its `path` as shown, relative to `root`)."""
    if display.startswith(BUILTIN_PREFIX):
        return BUILTIN_DEFS / display.removeprefix(BUILTIN_PREFIX)
    path = Path(display)
    return path if path.is_absolute() else root / path


def drift(root: Path, state: Delivery) -> list[str]:
    """Snapshot files whose source changed since creation (reported, never blocking)."""
    notes = []
    catalog_files = {f.path: f for f in state.snapshot.files}
    for display, f in catalog_files.items():
        source = source_path(root, display)
        if f.sha256 is None:  # an optional harness file there was none of to freeze
            if source is not None and source.is_file():
                notes.append(f"{display}: created since the snapshot (the delivery runs "
                             "without it)")
            continue
        if source is None or not source.is_file():
            notes.append(f"{display}: removed since the snapshot (the delivery keeps its copy)")
        elif sha256_file(source) != f.sha256:
            notes.append(f"{display}: changed since the snapshot (the delivery keeps its copy)")
    for step in state.steps:
        notes += [f"{step.name}: {note}" for note in step_drift(root, step)]
    return notes


def step_drift(root: Path, step: Step) -> list[str]:
    """Upstream handoffs whose file no longer has the hash this step consumed."""
    notes = []
    for port, ref in step.consumed.items():
        path = root / ref.path
        if not path.is_file() or sha256_file(path) != ref.sha256:
            notes.append(f"input `{port}` {ref.path} changed since it was consumed")
    return notes


def tokens(usage: Usage) -> int:
    """What budgets count: uncached input plus output (cached input is shown beside)."""
    return usage.input_tokens - usage.cached_input_tokens + usage.output_tokens


def step_tokens(step: Step, role: str | None = None) -> int:
    """The step's tokens: every session's, or only the generator's or the evaluator's."""
    return sum(tokens(u) for u in step.usage if role is None or u.role == role)


def step_cached(step: Step) -> int:
    return sum(u.cached_input_tokens for u in step.usage)


def delivery_tokens(state: Delivery) -> int:
    return sum(step_tokens(s) for s in state.steps)


def gate_prompt(state: Delivery, step: Step) -> dict[str, object] | None:
    """For `specops status`: the question at the first closed gate, what to read, the command."""
    closed = closed_gates(state, step)
    if not closed:
        return None
    gate = closed[0]
    if gate == "scope":
        look = [f"phases/{state.phase}/request.md"]
    elif gate == "risk":
        look = [r.path for r in open_risks(state)]
    else:
        look = [ref.path for n in step.needs for ref in get_step(state, n).handoff.values()]
    return {"gate": gate, "question": QUESTIONS[gate], "look_at": look,
            "approve": f"specops approve {state.phase} {gate} --note ...",
            "reject": f"specops approve {state.phase} {gate} --reject --note ...",
            "open": gate_open(state, gate)}


def status_report(root: Path, state: Delivery) -> dict:
    """What `specops status ID` adds to the state: runnable steps, drift, open questions, tokens."""
    return {"status": delivery_status(state), "runnable": runnable_steps(state),
            "gates_ahead": gate_plan(root, state), "drift": drift(root, state),
            "gates": {s.name: ask for s in state.steps
                      if s.status == "blocked" and (ask := gate_prompt(state, s))},
            "open_risks": [{"node": r.node, "path": r.path, "raised_at": r.raised_at}
                           for r in open_risks(state)],
            "tokens": {"delivery": delivery_tokens(state), "budget": state.budget_tokens,
                       "cached_input": sum(step_cached(s) for s in state.steps),
                       "per_node": {s.name: step_tokens(s) for s in state.steps}},
            "cost": cost_report(root, state),
            "tasks": {s.name: [{"id": t.id, "status": t.status, "attempts": t.attempts,
                                "tokens": sum(tokens(u) for u in t.usage),
                                "commits": t.commits, "error": t.error,
                                "ran_on": t.ran_on.model_dump() if t.ran_on else None}
                               for t in s.tasks]
                      for s in state.steps if s.tasks}}


def cost_report(root: Path, state: Delivery) -> dict:
    """The delivery's money (USD) from its recorded tokens and the price table, or why it
    cannot be counted (`unpriced`): a session whose model has no price is never counted as 0."""
    from specops_dag.delivery import pricing  # YAML and the price table only when asked
    from specops_dag.errors import DefinitionError

    try:
        table = pricing.delivery_prices(root, state)
    except DefinitionError as err:
        return {"delivery": None, "budget": state.budget_usd, "per_node": {},
                "unpriced": "; ".join(err.problems), "as_of": None}
    sessions = [u for s in state.steps for u in s.usage]
    unpriced = next((pricing.unpriced_reason(table, u.model) for u in sessions
                     if pricing.cost_usd(u, table, None) is None), None)
    return {"delivery": pricing.delivery_cost(state, table, None), "budget": state.budget_usd,
            "per_node": {s.name: pricing.node_cost(s, table, None) for s in state.steps
                         if s.usage},
            "unpriced": unpriced, "as_of": table.as_of, "source": table.source}


def render_status(state: Delivery, report: dict) -> str:
    lines = [f"delivery {state.phase}  workflow {state.workflow}  status {report['status']}",
             f"request: {(state.request.strip().splitlines() or ['(empty)'])[0][:100]}"]
    if state.platforms:
        lines.append(f"platforms: {origin_text(state.platforms, state.platforms_from)}")
    if state.snapshot.reviews:  # the evaluator each review chose for these platforms at `new`
        lines.append("reviews: " + ", ".join(f"{node} by `{phase}`"
                                             for node, phase in state.snapshot.reviews.items()))
    for s in state.steps:
        line = f"  {STATUS_MARK[s.status]} {s.step:>2} {s.name:<16} {s.status:<10}"
        if s.status == "completed":
            # its attempt since the last reopen, as the evidence counts it: a resume restarts
            # `attempts` (the attempt budget), never `attempt_log`
            line += f" {len(s.handoff)} handoff(s), attempt {len(s.attempt_log) or s.attempts}"
        if s.usage:
            cached = step_cached(s)
            usd = report.get("cost", {}).get("per_node", {}).get(s.name)
            line += (f" [{step_tokens(s)} tokens" + (f", {cached} cached" if cached else "")
                     + (f", {usd_text(usd)}" if usd is not None else "") + "]")
        if s.error_message:
            line += f" {s.error_message.splitlines()[0][:120]}"
            line += f"\n       next: fix the cause, then `specops resume {state.phase} {s.name}`"
        if s.blocked_reason:
            line += f" {s.blocked_reason}"
        if s.ran_on is not None and s.ran_on.worker:  # one machine's output stays as it was
            line += f"\n       ran on {ran_on_text(s.ran_on)}"
        if s.preflight:
            line += f"\n       {preflight_line(s.preflight)}"
        checked = s.validation_report
        if checked is not None and checked.mode == "docs-only→full" and checked.notes:
            line += f"\n       {checked.notes[0]}"  # why a docs-only step validated in full
        if s.tasks:
            merged = sum(t.status == "merged" for t in s.tasks)
            line += f"\n       tasks: {merged} of {len(s.tasks)} merged"
            for t in s.tasks:
                spent = sum(tokens(u) for u in t.usage)
                line += (f"\n         {t.id:<16} {t.status:<8} attempt {t.attempts}"
                         + (f" [{spent} tokens]" if spent else "")
                         + (f" {t.error.splitlines()[0][:100]}" if t.error else ""))
                if t.ran_on is not None and t.ran_on.worker:
                    line += f"\n           ran on {ran_on_text(t.ran_on)}"
        ask = report["gates"].get(s.name)
        if ask:
            line += f"\n       question: {ask['question']}"
            if ask["look_at"]:
                line += f"\n       look at: {', '.join(ask['look_at'])}"
            line += f"\n       next: `{ask['approve']}` (or `{ask['reject']}`)"
        lines.append(line)
    lines += risk_lines(state, report["open_risks"])
    budget = f" of {state.budget_tokens}" if state.budget_tokens else ""
    cached = sum(step_cached(s) for s in state.steps)
    lines.append(f"tokens: {delivery_tokens(state)}{budget}"
                 + (f" (uncached input + output; {cached} cached input beside)" if cached else ""))
    lines += cost_lines(state, report.get("cost"))
    if report["runnable"]:
        lines.append(f"next: `specops run {state.phase}` runs {', '.join(report['runnable'])}")
    first = all(s.status == "pending" and not s.attempt_log for s in state.steps)
    lines += ahead_lines(state.phase, report.get("gates_ahead", []), "first" if first else "next",
                         bool(report["runnable"]))
    lines += [f"drift: {d}" for d in report["drift"]]
    return "\n".join(lines)


def usd_text(amount: float) -> str:
    """Money as a person reads it: `$0.01`, `$0.0123`, `$12.50`, to the micro-dollar."""
    text = f"{amount:,.6f}".rstrip("0")
    whole, _, cents = text.partition(".")
    return f"${whole}.{cents.ljust(2, '0')}"


def cost_lines(state: Delivery, cost: dict | None) -> list[str]:
    """The `cost:` line of `specops status`, once a session ran (or a USD budget is set)."""
    if not cost or not (any(s.usage for s in state.steps) or cost["budget"] is not None):
        return []
    budget = f" of {usd_text(cost['budget'])}" if cost["budget"] is not None else ""
    if cost["delivery"] is None:
        return [f"cost: not counted{budget}: {cost['unpriced']}"]
    return [f"cost: {usd_text(cost['delivery'])}{budget} (prices as of {cost['as_of']}, "
            f"{cost['source']}; cached input priced as cached)"]


def preflight_line(record: PreflightRecord) -> str:
    """The base tree's validation before the first agent call (issue 16), in one line."""
    commit = (record.commit or "")[:12] or "the working folder"
    verdict = "passed" if record.passed else f"failed at `{record.stage}`"
    cached = ", cached" if record.cached else ""
    sdk = f", SDK {record.sdk_version}" if record.sdk_version else ""
    return (f"preflight {verdict} on {commit} (judge {record.judge}{sdk}"
            f"{cached}): {record.message[:160]}")


def risk_lines(state: Delivery, risks: list[dict]) -> list[str]:
    """The open risks, their files, the question and the commands that decide them."""
    if not risks:
        return []
    return ["open risks (decide them before the delivery completes or is pushed):",
            *(f"  {r['path']} (raised by `{r['node']}`)" for r in risks),
            f"  question: {QUESTIONS['risk']}",
            f"  next: `specops approve {state.phase} risk --note ...` (or `specops approve "
            f"{state.phase} risk --reject --note ...`)"]


def render_index(entries: list, unreadable: dict[str, str] | None = None) -> str:
    """`specops status` with no delivery: one line per delivery, or how to create the first; a
    delivery whose state file cannot be read says so instead of its last known status."""
    if not entries:
        return ("no deliveries yet; create one with `specops new WORKFLOW DELIVERY --request "
                "TEXT`")
    broken = unreadable or {}
    return "\n".join(f"{e.id:<24} {e.workflow:<18} unreadable: {broken[e.id]}" if e.id in broken
                     else f"{e.id:<24} {e.workflow:<18} {e.status:<10} updated {e.updated_at}"
                     for e in entries)


def state_problem(state: Delivery, delivery: str,
                  changed: Container[str] | None = None) -> str | None:
    """What the schema cannot see in a (possibly hand-edited) state file of `delivery`: it
    names its own delivery, has steps with unique names whose needs are earlier steps, and
    every recorded file lies inside the delivery. Checked on every read and write of the state,
    so a path is named only once it is found outside. `changed`: the only steps whose files
    may have changed since the state was last checked (a transaction of one step's; the paths
    of the others are not looked at again)."""
    if state.phase != delivery:
        return f"phase: `{state.phase}` but the file is delivery `{delivery}`'s"
    if not state.steps:
        return "steps: empty, a delivery has at least one step"
    seen: dict[str, int] = {}
    own = f"phases/{delivery}/"
    for i, step in enumerate(state.steps):
        if step.name in seen:
            return f"steps[{i}].name: `{step.name}` is also steps[{seen[step.name]}]; step names " \
                   "are unique"
        for need in step.needs:
            if need not in seen:
                known = "a later step" if any(s.name == need for s in state.steps) else "no step"
                return f"steps[{i}].needs: `{need}` is {known} of this delivery (needs name " \
                       "earlier steps)"
        seen[step.name] = i
        if changed is not None and step.name not in changed:
            continue
        for r, record in enumerate([step, *step.revisions]):
            for field in ("handoff", "consumed"):
                for port, ref in getattr(record, field).items():
                    if not inside(ref.path, own):
                        where = f"steps[{i}]" + (f".revisions[{r - 1}]" if r else "")
                        return f"{where}.{field}.{port}.path: `{ref.path}` is outside the " \
                               f"delivery (handoffs live under {own})"
    for i, risk in enumerate(state.risks):
        if not inside(risk.path, own):
            return f"risks[{i}].path: `{risk.path}` is outside the delivery (risks live under " \
                   f"{own})"
    for i, f in enumerate(state.snapshot.files):
        copy = f.copy_path
        if not inside(copy, "snapshot/"):
            return f"snapshot.files[{i}].copy: `{copy}` is outside {own}snapshot/"
    return None


def inside(path: str, folder: str) -> bool:
    """Whether the relative POSIX `path` lies under `folder` with no `..`, `.` or empty part."""
    parts = path.split("/")
    return path.startswith(folder) and "" not in parts and "." not in parts and ".." not in parts
