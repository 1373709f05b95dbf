"""Runs one attempt of one step of one delivery: the domain function behind every node asset.

It claims the step under the delivery lock (checking everything that can be checked before any
agent call: gates, inputs, executor, validation mode, context paths), runs the executor outside
the lock, and records the verdict. Three calls in all per step; environment errors block at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from specops_dag import gitflow
from specops_dag.agent.codex import AgentSettings, expected_model
from specops_dag.agent.prompt import assemble_prompt
from specops_dag.delivery import pricing
from specops_dag.delivery.budget import budget_spent
from specops_dag.delivery.gates import WAITING, block_reason, raise_risk
from specops_dag.delivery.lifecycle import (
    current_owner,
    owns,
    ran_on,
    snapshot_catalog,
    target_path,
    workdir,
)
from specops_dag.delivery.model import (
    METADATA_PENDING,
    AttemptRecord,
    Delivery,
    FileRef,
    RanOn,
    Step,
    Usage,
    ValidationRecord,
)
from specops_dag.delivery.queries import (
    closed_gates,
    delivery_tokens,
    is_git_target,
    owner_alive,
    owner_named,
    runs_beside_others,
    step_drift,
    step_tokens,
    tokens,
)
from specops_dag.delivery.store import Store
from specops_dag.errors import DefinitionError, SpecopsError, UsageError, WriteConflict
from specops_dag.execution.attempt import (
    AttemptResult,
    already_decided,
    attempt_number,
    check_snapshot,
    risk_files,
    run_attempt,
)
from specops_dag.execution.evidence import write_evidence
from specops_dag.execution.fanout import load_tasks, remove_task_trees
from specops_dag.execution.host import missing_tool
from specops_dag.files import now_iso, sha256_file
from specops_dag.workflow.catalog import Catalog
from specops_dag.workflow.model import MAX_ATTEMPTS

AVAILABLE_EXECUTORS = ("command", "codex")


# completed/reused: materialize; blocked/skipped: no materialization; failed: retry;
# error/environment: stop without retry.
Status = Literal["completed", "reused", "blocked", "skipped", "failed", "error", "environment"]


@dataclass(frozen=True)
class StepOutcome:
    """What happened to a step in this call. `retryable` tells the caller another call may help."""

    status: Status
    node: str
    message: str = ""
    attempt: int = 0
    duration_s: float = 0.0
    handoff: dict[str, FileRef] = field(default_factory=dict)
    retryable: bool = False
    usage: Usage | None = None
    prompt_chars: int = 0
    validation: dict | None = None  # the ValidationReport as metadata
    drift: tuple[str, ...] = ()  # consumed upstream handoffs whose hash changed since
    commits: dict[str, str | None] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)  # attempt / node / delivery totals
    review: dict | None = None  # the last evaluator round (ReviewRecord as metadata)
    tasks: tuple[dict, ...] = ()  # a fan-out's tasks: id, status, attempts, tokens, commits
    ended: AttemptRecord | None = None  # how this call's attempt ended, when one ran
    usd: dict[str, float] = field(default_factory=dict)  # attempt / node / delivery money
    evidence: FileRef | None = None  # the node's evidence.json as it completed
    ran_on: RanOn | None = None  # where the attempt ran (a reused step: where it completed)


def task_summaries(step: Step) -> tuple[dict, ...]:
    """A fan-out node's tasks as its materialization metadata shows them."""
    return tuple({"id": t.id, "status": t.status, "attempts": t.attempts,
                  "tokens": sum(tokens(u) for u in t.usage), "commits": dict(t.commits),
                  "branch": t.branch, "duration_s": t.duration_s,
                  "ran_on": t.ran_on.model_dump() if t.ran_on else None} for t in step.tasks)


def run_step(store: Store, delivery: str, node: str, workflow: str | None = None,
             settings: AgentSettings | None = None,
             max_attempts: int = MAX_ATTEMPTS,
             progress: Callable[[str], None] | None = None,
             sessions: int | None = None,
             dispatch: Callable[[str, str, str], None] | None = None) -> StepOutcome:
    """Run the next attempt of `node` if it may run; otherwise say why not. Never fakes success.
    `progress` hears a fan-out's task events as they happen (the Dagster run's log); `sessions`
    caps how many of its task sessions run at once (the `codex` pool's limit); `dispatch` offers
    its tasks to other processes (a Celery worker's). The owner record its claim writes
    (`Store.lease`) is renewed until the call ends."""
    try:
        return attempt_step(store, delivery, node, workflow, settings or AgentSettings(),
                            max_attempts, progress, sessions, dispatch)
    finally:
        store.release(delivery, node)  # after the verdict is recorded: the claim is over


def attempt_step(store: Store, delivery: str, node: str, workflow: str | None,
                 settings: AgentSettings, max_attempts: int,
                 progress: Callable[[str], None] | None, sessions: int | None,
                 dispatch: Callable[[str, str, str], None] | None = None) -> StepOutcome:
    claim = claim_step(store, delivery, node, workflow, max_attempts, settings)
    if isinstance(claim, StepOutcome) and claim.status == "reused" and claim.commits.get(
            "metadata") == METADATA_PENDING:
        # a run killed between the step's completion and its metadata commit: make it now
        return replace(claim, commits=commit_metadata(store, delivery, node).get_step(node).commits)
    if isinstance(claim, StepOutcome):
        return claim
    state, catalog = claim
    step = state.get_step(node)
    number = attempt_number(step)
    started, began = time.monotonic(), now_iso()
    try:
        result = run_attempt(store, state, step, catalog, settings, progress,
                             sessions, dispatch)
    except SpecopsError as err:  # bad input found while preparing: blocked, never `running`
        result = AttemptResult(False, f"{err.message}; after fixing it, `specops resume "
                               f"{delivery} {node}`", environment=True)
    except Exception as err:  # noqa: BLE001 — a defect must not leave the step `running`
        result = AttemptResult(False, f"internal error while running the attempt "
                               f"({type(err).__name__}: {err}); report it, then `specops resume "
                               f"{delivery} {node}`", environment=True)
    final = (result.ok or result.environment or result.review_exhausted
             or step.attempts >= max_attempts)
    took = round(time.monotonic() - started, 3)
    ended = AttemptRecord(attempt=number, reason=reason_of(result),
                          detail=result.summary[:500], infra_retries=list(result.infra),
                          started_at=began, ended_at=now_iso(), duration_s=took,
                          counted=result.reason != "infrastructure")
    result = numbered(result, number)
    written = finish_attempt(store, delivery, node, result, final=final, ended=ended,
                             settings=settings)
    extra = {"usage": result.usage, "prompt_chars": result.prompt_chars, "duration_s": took,
             "review": result.review.model_dump() if result.review else None,
             "attempt": step.attempts, "ended": ended, "ran_on": step.ran_on,
             "validation": result.validation.as_metadata() if result.validation else None}
    if result.ok:
        after = written or store.read(delivery)
        if after.get_step(node).status == "blocked":  # its merge into feat-<d> conflicted
            return StepOutcome("blocked", node, after.get_step(node).blocked_reason or "",
                               **extra)
        return StepOutcome("completed", node, result.message, handoff=result.handoff,
                           commits=after.get_step(node).commits,
                           tasks=task_summaries(after.get_step(node)),
                           tokens=token_totals(after, node, result.usage),
                           usd=money_totals(store, after, node, number),
                           evidence=after.get_step(node).evidence, **extra)
    if result.environment:
        return StepOutcome("environment", node, f"blocked: {result.summary}", **extra)
    if result.review_exhausted:
        return StepOutcome("error", node, f"review: max_rounds {step.attempts} reached without "
                           f"PASS: {result.summary}", **extra)
    if final:
        return StepOutcome("error", node, f"attempt {step.attempts}/{max_attempts} failed; budget "
                           f"spent: {result.summary}", **extra)
    return StepOutcome("failed", node, f"attempt {step.attempts}/{max_attempts} failed: "
                       f"{result.summary}", retryable=True, **extra)


def money_totals(store: Store, state: Delivery, node: str, attempt: int) -> dict[str, float]:
    """USD of the attempt's sessions (generator, review, contract), the node and the delivery,
    priced by the delivery's frozen table; a figure that cannot be counted is left out."""
    try:
        table = pricing.delivery_prices(store.root, state)
    except DefinitionError:
        return {}  # the run itself reports a bad prices.yaml (the claim loads it first)
    step = state.get_step(node)
    costs = {"attempt": pricing.attempt_cost(step, attempt, table, None),
             "node": pricing.node_cost(step, table, None),
             "delivery": pricing.delivery_cost(state, table, None)}
    return {k: v for k, v in costs.items() if v is not None}


def token_totals(state: Delivery, node: str, usage: Usage | None) -> dict[str, int]:
    return {"attempt": tokens(usage) if usage else 0,
            "node": step_tokens(state.get_step(node)), "delivery": delivery_tokens(state)}


def claim_step(store: Store, delivery: str, node: str, workflow: str | None,
               max_attempts: int, settings: AgentSettings
               ) -> tuple[Delivery, Catalog] | StepOutcome:
    """Under the lock: decide whether the step runs now and, if so, mark it running for us. It
    changes that step, the delivery's top level (its worktree, made on the first step) and the
    history, nothing else: its write is made of those alone (`step_only`)."""
    with store.transaction(delivery, node, step_only=True) as state:
        if workflow is not None and state.workflow != workflow:
            raise UsageError(f"delivery `{delivery}` runs workflow `{state.workflow}`, not "
                             f"`{workflow}`; launch `{state.workflow.replace('-', '_')}_job`")
        if node not in {s.name for s in state.steps}:
            raise UsageError(f"node `{node}` is not in delivery `{delivery}`: the workflow changed "
                             f"after `specops new`; `specops run {delivery}` runs the delivery's "
                             "snapshot")
        step = state.get_step(node)
        early = _not_runnable(store, state, step, max_attempts)
        if early is not None:
            return early
        catalog = snapshot_catalog(store, state)
        check_snapshot(store, state)  # raises UsageError: the transaction writes nothing
        refusal = _refusal(catalog, step)
        if refusal:
            return StepOutcome("error", node, f"{refusal}; nothing was run and the step stays "
                               f"`{step.status}`")
        execution = catalog.phases[step.phase].execution
        block = budget_spent(state, step, execution.budget.tokens, phase_usd=execution.budget.usd,
                             prices=pricing.delivery_prices(store.root, state),
                             model=expected_model(settings))
        missing = None if block else missing_tool(catalog, step, settings, store.root,
                                                  ran_on(current_owner()))
        if missing:  # this host (a Celery worker) lacks codex or dotnet: no attempt is counted
            state.block(step, missing)
            return StepOutcome("environment", node, f"blocked: {missing}")
        block = block or prepare_worktree(store, state, step)
        if not block and catalog.phases[step.phase].execution.fan_out is not None:
            block = bad_task_list(store, state, step, catalog)
        if not block and catalog.phases[step.phase].execution.executor.kind != "command":
            # Context paths are checked in the tree the agent will see, before any codex call
            # (raises UsageError: the transaction writes nothing).
            assemble_prompt(store.root, state, step, catalog, workdir(store, state, step))
        if block:
            state.block(step, block)
            return StepOutcome("blocked", node, block)
        state.start(step, current_owner(store.lease(delivery, node)))
        step.ran_on = ran_on(step.owner)
        if step.attempts == 1:
            step.base_commit = head_commit(workdir(store, state, step))
        step.consumed = {**request_inputs(store, state, step, catalog),
                         **upstream_handoffs(state, step)}
        now = {ref.path: sha256_file(store.root / ref.path) for ref in step.consumed.values()}
        changed = [f"{ref.path} (registered {ref.sha256[:12]}, now {now[ref.path][:12]})"
                   for ref in step.consumed.values() if now[ref.path] != ref.sha256]
        if changed:  # reported, never refused (DESIGN §5): `specops status` shows it as drift
            state.log("input drift", node, "upstream handoffs changed since they were "
                      "registered: " + ", ".join(changed))
        state.log("attempt started", node, f"attempt {step.attempts}/{max_attempts}")
        return state, catalog  # written as it is now; what the caller changes stays local


def bad_task_list(store: Store, state: Delivery, step: Step, catalog: Catalog) -> str | None:
    """A fan-out node's task list is checked before any agent call: what is wrong with it, in
    the load errors' form (file, line, field, fix), blocks the node."""
    try:
        load_tasks(store.root, state, step, catalog)
    except UsageError as err:
        return (f"bad task list: {'; '.join(err.message.splitlines())}; no agent call was made: "
                f"fix the list (or `specops reopen {state.phase} <the node that writes it>`), "
                f"then `specops resume {state.phase} {step.name}`")
    return None


def _refusal(catalog: Catalog, step: Step) -> str | None:
    kind = catalog.phases[step.phase].execution.executor.kind
    if kind not in AVAILABLE_EXECUTORS:
        return (f"executor not available: phase `{step.phase}` uses `executor: {{kind: {kind}}}`, "
                "which this version of specops-dag cannot run yet")
    return None


def prepare_worktree(store: Store, state: Delivery, step: Step) -> str | None:
    """Create (or reuse) the delivery's feat-<d> worktree and, for a node that may run beside
    others, the node's own worktree; a step starts only on a clean tree that holds every upstream
    node's result (merged in, never silently resolved). Returns the reason that blocks the step
    (a write conflict, a git lock, a merge conflict), or None."""
    target = target_path(store, state)
    if not is_git_target(target):
        return None  # a plain folder: the agent works in place and nothing is committed
    try:
        if state.worktree is None:
            path = gitflow.ensure_worktree(target, store.root, state.phase)
            state.worktree = _relative(store, path)
            state.branch = gitflow.branch_name(state.phase)
            state.base_commit = gitflow.head(path)
        tree = workdir(store, state)
        if not (tree / ".git").is_file():
            return (f"the delivery's worktree {tree} is missing (deleted or moved); recreate it "
                    f"from its branch with `git -C {target} worktree prune && git -C {target} "
                    f"worktree add {tree} {state.branch or gitflow.branch_name(state.phase)}`, "
                    f"then `specops resume {state.phase} {step.name}`")
        held = _clear_stale_locks(state, step, tree, state.branch
                                  or gitflow.branch_name(state.phase))
        if held:
            return held
        if runs_beside_others(state, step.name):
            ups = upstream_results(state, step)
            start = ups[0][1] if ups else (state.base_commit or gitflow.head(tree))
            path = gitflow.ensure_node_worktree(target, store.root, state.phase, step.name, start)
            step.worktree, step.branch = (_relative(store, path),
                                          gitflow.node_branch(state.phase, step.name))
            held = _clear_stale_locks(state, step, path, step.branch)
            if held:
                return held
        tree = workdir(store, state, step)
        for folder in dict.fromkeys((workdir(store, state), tree)):
            undo_interrupted_merge(state, step, folder)
        if gitflow.merge_in_progress(tree):
            return (f"merge in progress in {tree}: finish it (`git -C {tree} status`, fix the "
                    f"conflicts, `git -C {tree} commit --no-edit`) or abort it (`git -C {tree} "
                    f"merge --abort`), then `specops resume {state.phase} {step.name}`")
        if step.attempts == 0 and step.started_at is None:  # a fresh start needs a clean tree
            gitflow.check_clean(tree, state.phase, step.name)
        elif step.attempts == 0 and (left := gitflow.product_changes(tree)):
            # resumed: it goes on from what its earlier attempts left, and says so
            state.log("resumed on leftover changes", step.name, ", ".join(left[:10]))
        return merge_upstreams(state, step, tree)
    except WriteConflict as err:
        return err.message
    except gitflow.GitError as err:
        return f"{err.message}; fix it, then `specops resume {state.phase} {step.name}`"


def undo_interrupted_merge(state: Delivery, step: Step, tree: Path) -> None:
    """A merge specops started and a kill interrupted (its MERGE_HEAD is a node's or a task's
    work of this delivery, and no person is resolving a merge conflict) is aborted, to be made
    again; a merge a person started is left alone."""
    rev = gitflow.merging(tree)
    if rev is None or any(s.status == "blocked" and (s.blocked_reason or "").startswith(
            "merge conflict") for s in state.steps):
        return
    ours = {result_of(s) for s in state.steps} | {
        t.commits.get("product") for s in state.steps for t in s.tasks}
    ours |= gitflow.branch_heads(tree, f"feat-{state.phase}+*")
    if rev in ours:
        gitflow.abort_merge(tree)
        state.log("aborted an interrupted merge", step.name, f"{rev[:12]} in {tree}")


def _relative(store: Store, path: Path) -> str:
    root = store.root.resolve()
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def _clear_stale_locks(state: Delivery, step: Step, tree: Path, branch: str) -> str | None:
    stale, held = gitflow.stale_locks(tree, branch)
    for lock in stale:  # no process has it open: a killed git command left it
        lock.unlink(missing_ok=True)
        state.log("removed stale git lock", step.name, f"{lock} (no process had it open)")
    if held:
        lock = held[0]
        return (f"git lock: {lock} exists and a process may still hold it; if no git "
                f"command is running in {tree}, remove it (`rm {lock}`), then `specops "
                f"resume {state.phase} {step.name}`")
    return None


def result_of(step: Step) -> str | None:
    """The commit holding a completed step's work (older states: its last commit)."""
    metadata = step.commits.get("metadata")
    return (step.result_commit or (metadata if metadata != METADATA_PENDING else None)
            or step.commits.get("product"))


def upstream_results(state: Delivery, step: Step) -> list[tuple[str, str]]:
    """(upstream node, its result commit) in needs order, for those that made one."""
    return [(n, rev) for n in step.needs if (rev := result_of(state.get_step(n)))]


def merge_upstreams(state: Delivery, step: Step, tree: Path) -> str | None:
    """Merge every upstream result the tree does not hold yet, in needs order; a conflict is
    aborted and blocks this node (never its siblings) with the paths and the commands."""
    d = state.phase
    for upstream, rev in upstream_results(state, step):
        label = state.get_step(upstream).branch or f"`{upstream}`'s result {rev[:12]}"
        merged = gitflow.merge(tree, rev, label, f"[{d}] {step.name}: merge {upstream} "
                               f"({label})")
        if isinstance(merged, gitflow.MergeConflict):
            paths = ", ".join(merged.paths)
            return (f"merge conflict: merging `{upstream}` ({label}) into the tree of "
                    f"`{step.name}` ({tree}) conflicts on {paths}; the merge was aborted and "
                    f"nothing was resolved. Resolve it by hand: `git -C {tree} merge {rev}`, fix "
                    f"{paths}, `git -C {tree} commit --no-edit`, then `specops resume {d} "
                    f"{step.name}`")
        if merged:
            state.log("merged upstream", step.name, f"{label} ({merged[:12]})")
    return None


def integrate(store: Store, state: Delivery, step: Step) -> str | None:
    """A node that worked in its own worktree lands in feat-<d>: its delivery handoff files are
    copied over, its branch merged (a merge commit), its worktree removed (the branch stays). A
    conflict with a sibling's work is left to the downstream nodes, which start from the merge of
    their upstream nodes and are blocked there with the paths; a node with no downstream node is
    blocked itself. Returns that block reason, or None."""
    d, node = state.phase, step.name
    tree, delivery_tree = workdir(store, state, step), workdir(store, state)
    docs = tree / "docs" / "phase" / d
    if docs.is_dir():
        gitflow.sync_tree(docs, delivery_tree / "docs" / "phase" / d)
    step.result_commit = gitflow.head(tree)
    merged = gitflow.merge(delivery_tree, step.result_commit, step.branch or "",
                           f"[{d}] merge {step.branch}: {node} attempt {step.attempts}")
    if isinstance(merged, gitflow.MergeConflict):
        paths = ", ".join(merged.paths)
        if any(node in s.needs for s in state.steps):
            state.log("merge deferred", node, f"{step.branch} conflicts with {state.branch} on "
                      f"{paths}; the nodes downstream start from the merge of their upstream "
                      "nodes and meet the conflict there")
            step.commits["merge"] = None
        else:
            return (f"merge conflict: merging {step.branch} into {state.branch} "
                    f"({delivery_tree}) conflicts on {paths}; the merge was aborted and "
                    f"nothing was resolved. Resolve it by hand: `git -C {delivery_tree} merge "
                    f"{step.branch}`, fix {paths}, `git -C {delivery_tree} commit --no-edit`, "
                    f"then `specops resume {d} {node}`")
    else:
        step.commits["merge"] = merged
    gitflow.remove_worktree(target_path(store, state), tree)
    step.worktree = None
    return None


def head_commit(target: Path) -> str | None:
    """The target repo's HEAD, the base a docs-only check diffs against; None outside git."""
    import git  # GitPython loads on first use: the code location imports this module

    try:
        return gitflow.head(target)
    except (git.GitError, ValueError):
        return None


def _not_runnable(store: Store, state: Delivery, step: Step, max_attempts: int
                  ) -> StepOutcome | None:
    name, d = step.name, state.phase
    if step.status == "completed":
        return StepOutcome("reused", name, "completed earlier; not re-run", step.attempts,
                           handoff=step.handoff,
                           validation=(step.validation_report.model_dump()
                                       if step.validation_report else None),
                           drift=tuple(step_drift(store.root, step)), commits=step.commits,
                           tasks=task_summaries(step),
                           tokens=token_totals(state, name, None), ran_on=step.ran_on,
                           review=step.reviews[-1].model_dump() if step.reviews else None)
    if step.status == "error":
        return StepOutcome("error", name, f"step `{name}` is in error since {step.failed_at}: "
                           f"{step.error_message}; fix the cause, then `specops resume {d} {name}`")
    if step.status == "running" and owner_alive(step.owner):
        return StepOutcome("blocked", name, f"write conflict: step `{name}` is already running "
                           f"({owner_named(step.owner)})")
    not_done = [n for n in step.needs if state.get_step(n).status != "completed"]
    if not_done:
        return StepOutcome("skipped", name, "upstream not completed: " + ", ".join(
            f"`{n}` is `{state.get_step(n).status}`" for n in not_done))
    reason = _block_reason(store, state, step)
    if step.status == "blocked":
        if reason is None and not (step.blocked_reason or "").startswith(WAITING):
            return StepOutcome("blocked", name, f"{step.blocked_reason}; after fixing it, "
                               f"`specops resume {d} {name}`")
        if reason is not None:
            return StepOutcome("blocked", name, reason)
        state.unblock(step)  # the gate it waited for is approved now
        return None
    if reason is not None:
        state.block(step, reason)
        return StepOutcome("blocked", name, reason)
    if step.attempts >= max_attempts:  # an interrupted last attempt: the budget is spent
        state.move(step, "running", "run")  # the interrupted attempt, taken over to end it
        state.fail(step, f"budget spent: {step.attempts} of {max_attempts} attempts "
                      "used (the last one was interrupted)")
        return StepOutcome("error", name, step.error_message or "", step.attempts)
    return None


def _block_reason(store: Store, state: Delivery, step: Step) -> str | None:
    gates = closed_gates(state, step)
    if gates:
        return block_reason(state, gates[0])
    missing = [ref.path for n in step.needs for ref in state.get_step(n).handoff.values()
               if not (store.root / ref.path).is_file()]
    if missing:
        return (f"missing input: {missing[0]} (registered by an upstream step) is gone; restore "
                f"it or `specops reopen {state.phase} <upstream>`")
    return None


def request_inputs(store: Store, state: Delivery, step: Step,
                   catalog: Catalog) -> dict[str, FileRef]:
    """The delivery's request file as the node's prompt names it (path, sha256), keyed by the
    workflow input an input port of the node takes (`{input: request}`)."""
    path = store.delivery_dir(state.phase) / "request.md"
    node = next(n for n in catalog.workflows[state.workflow].nodes if n.id == step.name)
    names = dict.fromkeys(ref.input for ref in node.inputs.values() if ref.input is not None)
    if not names or not path.is_file():
        return {}
    ref = FileRef(path=path.relative_to(store.root).as_posix(), sha256=sha256_file(path))
    return {name: ref for name in names}


def upstream_handoffs(state: Delivery, step: Step) -> dict[str, FileRef]:
    """Every handoff of every direct upstream step, keyed `<node>/<artifact>`, in needs order."""
    return {f"{n}/{art}": ref for n in step.needs
            for art, ref in state.get_step(n).handoff.items()}


def numbered(result: AttemptResult, attempt: int) -> AttemptResult:
    """The attempt's own sessions (generator, evaluator, contract) under the attempt's number in
    `attempt_log`, which a resume does not restart as it restarts `attempts`."""
    def own(usage: Usage) -> Usage:
        return usage if usage.task else usage.model_copy(update={"attempt": attempt})
    return replace(result, usage=result.usage and own(result.usage),
                   review_usage=result.review_usage and own(result.review_usage),
                   contract_usage=tuple(own(u) for u in result.contract_usage))


def reason_of(result: AttemptResult) -> str:
    """The attempt's one terminal reason (`AttemptReason`)."""
    if result.ok:
        return "completed"
    return result.reason or ("environment" if result.environment else "verification-failed")


def finish_attempt(store: Store, delivery: str, node: str, result: AttemptResult,
                   final: bool, ended: AttemptRecord | None = None,
                   settings: AgentSettings | None = None) -> Delivery | None:
    """Record the verdict; on success commit product then metadata on feat-<delivery> and
    return the state as that last transaction left it (the caller's own: reading it again would
    parse it again), else None."""
    if _record(store, delivery, node, result, final, ended, settings) and result.ok:
        return commit_metadata(store, delivery, node)
    return None


def commit_metadata(store: Store, delivery: str, node: str) -> Delivery:
    """The step's metadata commit on feat-<d>, under the delivery lock: nodes running at once
    merge into and commit on the one delivery worktree in turn. It holds what changed in the
    delivery's own files and in the node's folder; another node's folder is committed by that
    node's steps. Returns the state as written. It changes that step and adds an event, nothing
    else: its write is made of those alone (`step_only`)."""
    with store.transaction(delivery, node, step_only=True) as state:
        if not state.worktree:
            return state
        step = state.get_step(node)
        tree = workdir(store, state)
        try:
            sha = gitflow.commit_metadata(
                tree, store.delivery_dir(delivery), delivery, node, step.attempts,
                step.base_commit, others=frozenset(s.name for s in state.steps) - {node})
        except gitflow.GitError as err:  # the step is completed; the next run commits again
            raise gitflow.GitError(f"the metadata commit of `{node}` failed, the step stays "
                                   f"completed and the next `specops run {delivery}` commits "
                                   f"it: {err}") from err
        step.commits["metadata"] = sha
        step.result_commit = step.result_commit or gitflow.head(tree)
        state.log("metadata committed", node, sha or "nothing to commit")
    return state


def _record(store: Store, delivery: str, node: str, result: AttemptResult,
            final: bool, ended: AttemptRecord | None = None,
            settings: AgentSettings | None = None) -> bool:
    with store.transaction(delivery, node) as state:
        step = state.get_step(node)
        if step.status != "running" or not owns(step.owner):
            state.log("attempt result dropped", node, "the step was reopened or taken over "
                      "while it ran")
            return False
        step.owner = None
        if ended is not None:
            step.attempt_log.append(ended)
        for retry in result.infra:
            state.log("provider failure retried", node, f"{retry.session}: {retry.reason} "
                      f"(waited {retry.wait_s:g} s)")
        if result.usage is not None:
            step.usage.append(result.usage)
        if result.review_usage is not None:
            step.usage.append(result.review_usage)
        step.usage.extend(result.contract_usage)
        if result.contract is not None:
            step.contract = result.contract
        if result.validation is not None:
            step.validation_report = ValidationRecord(**result.validation.as_metadata())
        if result.preparation is not None:
            step.preparation = result.preparation
        if result.preflight is not None:
            step.preflight = result.preflight
        if result.review is not None:
            step.reviews.append(result.review)
        if result.validation is not None:
            step.integrity, step.proof = list(result.integrity), result.proof
        if result.ok or result.raises_risk:
            for risk in risk_files(store.delivery_dir(delivery) / node):
                path, digest = risk.relative_to(store.root).as_posix(), sha256_file(risk)
                if not already_decided(state, path, digest):
                    raise_risk(state, node, path, digest)
        if result.ok:
            tree = workdir(store, state, step)
            handoff = tree / "docs" / "phase" / delivery / "handoff.md"
            delivery_handoff = sha256_file(handoff) if handoff.is_file() else None
            if state.worktree:  # product first, so its SHA is in the metadata commit's state
                product = gitflow.commit_product(tree, delivery, node, step.attempts)
                if product is None and step.tasks and gitflow.head(tree) != step.base_commit:
                    product = gitflow.head(tree)  # a fan-out's product: its last task merge
                step.commits = {"product": product, "metadata": METADATA_PENDING}
                if step.tasks:
                    remove_task_trees(store, state, step)
                conflict = integrate(store, state, step) if step.worktree else None
                if conflict:
                    step.commits = {}
                    state.block(step, conflict)
                    return False
            state.complete(step, result.handoff, result.message, delivery_handoff)
            # its product is on feat-<d> now (a node's own worktree is gone once merged)
            step.evidence = write_evidence(store, state, step, workdir(store, state),
                                           settings or AgentSettings(),
                                           codex=bool(step.usage))  # sessions ran: codex did
        elif result.reason == "infrastructure":
            state.give_back(step, result.summary)
        elif result.environment:
            state.block(step, result.summary)
        elif final:
            step.last_failure = result.summary
            state.fail(step, result.summary)
        else:
            step.last_failure = result.summary
            state.log("attempt failed", node, f"attempt {step.attempts}")
        return True
