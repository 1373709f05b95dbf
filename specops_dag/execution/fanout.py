"""Task fan-out inside one node (`execution.fan_out`, issue #20 item 2): the upstream task list
becomes one fresh codex session per task, each in its own worktree on its own branch with its own
MAX_ATTEMPTS calls and failure feedback; independent tasks run at once (up to `max_parallel`),
finished ones are merged into the node's tree one at a time in task order with the node's
validation re-run on each merge, and a failing task blocks only the tasks that need it.

Every task's progress is in the delivery state (`Step.tasks`), so a killed run goes on where it
stopped: merged and built tasks are never run again. A task is run by whichever process claims
it in that state (its `owner`, judged alive as a step's owner is): the step's own threads, or,
on a Celery worker, another worker the step offered it to (`dispatch`, `run_offered_task`). A
task whose process is gone is pending again with that session spent. A task's branch holds
product commits only (its record and artifacts are metadata); once all are merged, the executor
brings the task records into the node's tree and writes the node's section of the delivery
handoff, which no task writes. No dagster here: progress is reported through a callback.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path

from specops_dag import gitflow
from specops_dag.agent.codex import AgentSettings, find_codex
from specops_dag.agent.prompt import TaskView, assemble_prompt, failure_summary, handoff_rel
from specops_dag.delivery.lifecycle import (
    current_owner,
    owns,
    ran_on,
    snapshot_catalog,
    target_path,
    task_record,
    workdir,
)
from specops_dag.delivery.model import Delivery, Step, TaskRecord
from specops_dag.delivery.queries import agent_path, owner_alive, ran_on_text
from specops_dag.delivery.store import Store
from specops_dag.errors import UsageError
from specops_dag.execution.attempt import (
    AttemptResult,
    attempt_logs,
    baseline_for,
    codex_session,
    layout_of,
    node_dir,
    provider_down,
    step_env,
)
from specops_dag.execution.contract import judge, negotiate
from specops_dag.execution.host import missing_tool
from specops_dag.files import WORKTREES, now_iso, write_text_atomic
from specops_dag.validation import validate_attempt
from specops_dag.workflow.catalog import Catalog
from specops_dag.workflow.model import MAX_ATTEMPTS
from specops_dag.workflow.tasks import TaskList, load_task_list, task_order

Progress = Callable[[str], None]
# Offers task `task` of node `node` of delivery `delivery` to other processes (a Celery worker's
# step: the workers, through the broker); whichever claims it first runs it.
Dispatch = Callable[[str, str, str], None]
GRACE_S = 10.0  # an offered task no worker has taken by then runs in the step's own process
POLL_S = 1.0  # how often the step looks at tasks other processes run


def task_list_file(root: Path, state: Delivery, step: Step, catalog: Catalog) -> tuple[Path, str]:
    """(the task list's path, as the user sees it): the upstream artifact `fan_out.tasks` names,
    through the node's input port."""
    fan = catalog.phases[step.phase].execution.fan_out
    node = next(n for n in catalog.workflows[state.workflow].nodes if n.id == step.name)
    ref = node.inputs.get(fan.tasks.input)
    if ref is None or ref.node is None:
        raise UsageError(f"node `{step.name}`: fan_out.tasks.input `{fan.tasks.input}` is not an "
                         "input bound to an upstream node; bind it in the workflow")
    handoff = state.get_step(ref.node).handoff.get(fan.tasks.artifact)
    if handoff is None:
        raise UsageError(f"node `{step.name}`: the task list (`{ref.node}` artifact "
                         f"`{fan.tasks.artifact}`) is not in `{ref.node}`'s handoff; `specops "
                         f"reopen {state.phase} {ref.node}` so it writes it")
    return root / handoff.path, handoff.path


def load_tasks(root: Path, state: Delivery, step: Step, catalog: Catalog) -> TaskList:
    """The node's task list, validated (a load-style error naming file, line and fix)."""
    path, shown = task_list_file(root, state, step, catalog)
    return load_task_list(path, shown)


def task_records(tasks: TaskList, known: list[TaskRecord]) -> list[TaskRecord]:
    """The records of `tasks` in task order: kept for ids already recorded, new ones pending."""
    have = {t.id: t for t in known}
    return [have.get(t.id) or TaskRecord(id=t.id, title=t.title, needs=list(t.needs),
                                         paths=list(t.paths), tests=list(t.tests))
            for t in task_order(tasks.tasks)]


def task_branch(delivery: str, node: str, task: str) -> str:
    return f"feat-{delivery}+{node}+{task}"


@dataclass
class FanOut:
    """One node's fan-out in this process: what every task thread and the merger share."""

    store: Store
    delivery: str
    node: str
    catalog: Catalog
    settings: AgentSettings
    progress: Progress
    tree: Path  # the node's tree: tasks are merged here

    def transaction(self):
        return self.store.transaction(self.delivery)

    def record(self, state: Delivery, task: str) -> TaskRecord:
        return next(t for t in state.get_step(self.node).tasks if t.id == task)

    def say(self, text: str) -> None:
        self.progress(f"{self.node}: {text}")


def run_fan_out(store: Store, state: Delivery, step: Step, catalog: Catalog,
                settings: AgentSettings, progress: Progress | None = None,
                sessions: int | None = None, dispatch: Dispatch | None = None) -> AttemptResult:
    """Run, merge and validate every task of the node, at most `max_parallel` (and `sessions`,
    the codex pool's limit) at once; ok once all are merged and the node's own verification
    (artifacts, validation) passes on the merged tree. With `dispatch`, the step's process runs
    one task at a time itself and offers the others (GRACE_S)."""
    fan = catalog.phases[step.phase].execution.fan_out
    parallel = min(fan.max_parallel, sessions or fan.max_parallel)
    tasks = load_tasks(store.root, state, step, catalog)
    ctx = FanOut(store, state.phase, step.name, catalog, settings,
                 progress or (lambda _text: None), workdir(store, state, step))
    with ctx.transaction() as fresh:
        node = fresh.get_step(step.name)
        node.tasks = task_records(tasks, node.tasks)
        order = [t.id for t in node.tasks]
    packages = None  # the plan's `## Packages`, restored once for every task's session
    if step.attempts == 1 and step.validation == "full":
        from specops_dag.execution.attempt import plan_packages

        packages = plan_packages(store, state, step, ctx.tree, step_env(store, state, step),
                                 catalog)
    ctx.say(f"fan-out of {len(order)} tasks, at most {parallel} at once")
    local: dict[Future, str] = {}  # tasks this process runs
    offered: dict[str, float] = {}  # tasks offered to other processes, not taken yet: when
    with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="task") as pool:
        while True:
            merged_any = merge_ready(ctx, state, step, order)
            current = {t.id: t for t in ctx.store.read(ctx.delivery).get_step(ctx.node).tasks}
            if reclaim(ctx, current.values()):
                continue
            block_dependents(ctx, current)
            mine = set(local.values())
            elsewhere = {t for t, r in current.items() if t not in mine and held_elsewhere(r)}
            for tid in [t for t in offered if current[t].status != "pending" or t in elsewhere]:
                offered.pop(tid)
                where = current[tid].ran_on
                if where is not None and tid in elsewhere:
                    ctx.say(f"task {tid}: taken by {ran_on_text(where)}")
            now = time.monotonic()
            for tid in order:
                rec = current[tid]
                if (rec.status != "pending" or tid in mine or tid in elsewhere
                        or any(current[n].status != "merged" for n in rec.needs)):
                    continue
                if tid in offered:
                    if now - offered[tid] >= GRACE_S and len(local) < parallel:
                        offered.pop(tid)
                        ctx.say(f"task {tid}: no worker took it in {GRACE_S:.0f} s; it runs in "
                                "the step's own process")
                        local[pool.submit(run_task, ctx, state, step, tid)] = tid
                    continue
                if len(local) + len(elsewhere) + len(offered) >= parallel:
                    continue
                if dispatch is None or not local:
                    local[pool.submit(run_task, ctx, state, step, tid)] = tid
                else:
                    dispatch(ctx.delivery, ctx.node, tid)
                    offered[tid] = now
                    ctx.say(f"task {tid}: offered to the other workers")
            if merged_any:
                continue
            if not (local or elsewhere or offered):
                break
            if not local:
                time.sleep(POLL_S)
                continue
            done, _ = wait(list(local), timeout=POLL_S if (elsewhere or offered) else None,
                           return_when=FIRST_COMPLETED)
            for future in done:
                local.pop(future)
                future.result()  # a defect in a task thread ends the node's attempt
    final = {t.id: t for t in ctx.store.read(ctx.delivery).get_step(ctx.node).tasks}
    unfinished = [t for t in final.values() if t.status != "merged"]
    if unfinished:
        lines = "; ".join(f"`{t.id}` {t.status}: {t.error or t.last_failure or ''}".rstrip(": ")
                          for t in unfinished)
        return AttemptResult(False, f"fan-out: {len(final) - len(unfinished)} of {len(final)} "
                             f"tasks merged; {lines}; fix the cause, then `specops resume "
                             f"{state.phase} {step.name}` (merged tasks are kept)",
                             environment=True)
    gather_artifacts(ctx, state, step, list(final.values()))
    from specops_dag.execution.attempt import cache_dirs, verify

    result = verify(store, state, step, catalog)
    ctx.say("every task merged; the node's validation " + ("passed" if result.ok else "failed"))
    if result.ok:  # the step's completion registers it as the delivery handoff
        leave_handoff(ctx, step, list(final.values()))
    if step.validation != "full":
        return result
    caches = cache_dirs(store)
    return replace(result, preparation=(
        f"restored by the executor before attempt 1 (NuGet packages in "
        f"{caches['NUGET_PACKAGES']}, dotnet home {caches['DOTNET_CLI_HOME']}) of each task, in "
        f"its own worktree; logs in {node_dir(store, state.phase, step.name) / 'tasks'}/<task>/"
        "validation/restore" + (f"; {packages}" if packages else "")))


def merge_ready(ctx: FanOut, state: Delivery, step: Step, order: list[str]) -> bool:
    """Merge the built tasks that are next in task order (failed and blocked ones are passed
    over), one at a time, each followed by the node's validation; True when one merged."""
    merged_any = False
    while True:
        tasks = {t.id: t for t in ctx.store.read(ctx.delivery).get_step(ctx.node).tasks}
        nxt = next((tasks[t] for t in order if tasks[t].status not in
                    ("merged", "failed", "blocked")), None)
        if nxt is None or nxt.status != "built":
            return merged_any
        merge_task(ctx, state, step, nxt)
        merged_any = True


def merge_task(ctx: FanOut, state: Delivery, step: Step, rec: TaskRecord) -> None:
    """Stage the task's branch merged into the node's tree, run the node's validation on it,
    and commit the merge only when it passes; otherwise abort it (the tree as it was) and send
    the task back with the failure (a conflict or a spent budget fails it for good)."""
    started = time.monotonic()
    try:
        _merge_task(ctx, state, step, rec)
    finally:
        with ctx.transaction() as fresh:
            done = ctx.record(fresh, rec.id)
            done.merge_s = round(done.merge_s + time.monotonic() - started, 3)


def _merge_task(ctx: FanOut, state: Delivery, step: Step, rec: TaskRecord) -> None:
    tree, head = ctx.tree, rec.commits.get("product") or rec.base_commit or ""
    if gitflow.merging(tree):  # a kill during an earlier merge of this node: undo it
        gitflow.abort_merge(tree)
    message = f"[{ctx.delivery}] {ctx.node}: merge task {rec.id} ({rec.branch})"
    staged = gitflow.merge(tree, head, rec.branch or head, message, commit=False)
    if isinstance(staged, gitflow.MergeConflict):
        paths = ", ".join(staged.paths)
        finish_task(ctx, rec.id, "failed", error=(
            f"merging {rec.branch} into the node's tree conflicts on {paths} (the merge was "
            f"aborted); its expected paths were {', '.join(rec.paths)}"))
        return
    if staged is None:  # nothing new on its branch: already in the tree
        finish_task(ctx, rec.id, "merged", merge=None)
        return
    config = layout_of(ctx.catalog, state, step)
    folder = node_dir(ctx.store, ctx.delivery, ctx.node)
    report = validate_attempt(step.validation, tree, delivery=ctx.delivery,
                              base_commit=step.base_commit,
                              log_dir=folder / "validation" / f"after-{rec.id}",
                              env=step_env(ctx.store, state, step), config=config,
                              baseline=baseline_for(ctx.store, step, config))
    if not report.passed:
        gitflow.abort_merge(tree)
        again = rec.attempts < MAX_ATTEMPTS
        why = failure_summary(f"after merging task `{rec.id}` into the node's tree the node's "
                              f"validation failed: {report.describe()}")
        finish_task(ctx, rec.id, "pending" if again else "failed", failure=why,
                    error=None if again else why)
        ctx.say(f"task {rec.id}: the validation after its merge failed"
                + ("; it gets another session" if again else "; budget spent"))
        return
    sha = gitflow.conclude_merge(tree, message)
    finish_task(ctx, rec.id, "merged", merge=sha)
    ctx.say(f"task {rec.id}: merged ({sha[:12]}) and the node's validation passed")


_UNSET = object()


def finish_task(ctx: FanOut, task: str, status: str, *, error: str | None | object = _UNSET,
                failure: str | None | object = _UNSET, merge: str | None | object = _UNSET
                ) -> None:
    with ctx.transaction() as state:
        rec = ctx.record(state, task)
        rec.status = status  # type: ignore[assignment]
        if error is not _UNSET:
            rec.error = error  # type: ignore[assignment]
        if failure is not _UNSET:
            rec.last_failure = failure  # type: ignore[assignment]
        if merge is not _UNSET:
            rec.commits["merge"] = merge  # type: ignore[assignment]
        if status in ("merged", "failed"):
            rec.finished_at = now_iso()
        state.log(f"task {status}", ctx.node, f"{task}" + (f": {rec.error}" if rec.error and
                                                           status == "failed" else ""))


def block_dependents(ctx: FanOut, tasks: dict[str, TaskRecord]) -> None:
    """A pending task that needs a failed or blocked one is blocked (never run), transitively."""
    stuck = {t for t, r in tasks.items() if r.status in ("failed", "blocked")}
    newly = []
    grew = True
    while grew:
        grew = False
        for tid, rec in tasks.items():
            if rec.status == "pending" and tid not in stuck and set(rec.needs) & stuck:
                stuck.add(tid)
                newly.append((tid, sorted(set(rec.needs) & stuck)))
                grew = True
    if not newly:
        return
    with ctx.transaction() as state:
        for tid, causes in newly:
            rec = ctx.record(state, tid)
            rec.status = "blocked"
            rec.error = "needs " + ", ".join(f"`{c}`" for c in causes) + ", which did not merge"
            state.log("task blocked", ctx.node, f"{tid}: {rec.error}")
    for tid, _ in newly:
        ctx.say(f"task {tid}: blocked by a task it needs")


def held_elsewhere(rec: TaskRecord) -> bool:
    """Does another live process hold the task (running it, or between its sessions)?"""
    return rec.owner is not None and not owns(rec.owner) and owner_alive(rec.owner)


def reclaim(ctx: FanOut, tasks: Iterable[TaskRecord]) -> bool:
    """A task marked running whose process is gone (a killed run's thread, a killed worker) is
    pending again: that session's call is spent, the rest of its budget is left. `tasks`: the
    node's tasks as just read; True when one was reclaimed."""
    if not any(t.status == "running" and not owner_alive(t.owner) for t in tasks):
        return False
    gone = []
    with ctx.transaction() as fresh:
        for rec in fresh.get_step(ctx.node).tasks:
            if rec.status == "running" and not owner_alive(rec.owner):
                where = f" ({ran_on_text(rec.ran_on)} is gone)" if rec.owner and rec.ran_on else ""
                rec.status, rec.owner = "pending", None
                rec.last_failure = rec.last_failure or f"the session was interrupted{where}"
                fresh.log("task interrupted", ctx.node, f"{rec.id} attempt {rec.attempts}{where}")
                gone.append((rec.id, where))
    for task, where in gone:
        ctx.say(f"task {task}: its session was interrupted{where}; the call is spent")
    return bool(gone)


def not_claimable(state: Delivery, node: str, rec: TaskRecord) -> str | None:
    """Why this process may not run the task now, or None."""
    step = state.get_step(node)
    if step.status != "running" or not owner_alive(step.owner):
        return f"node `{node}` is `{step.status}`" + (
            "" if step.status != "running" else " under a process that is gone")
    if rec.status != "pending":
        return f"the task is `{rec.status}`"
    if held_elsewhere(rec):
        return f"{ran_on_text(rec.ran_on)} holds it" if rec.ran_on else "another process holds it"
    tasks = {t.id: t for t in step.tasks}
    waiting = [n for n in rec.needs if tasks[n].status != "merged"]
    if waiting:
        return "it needs " + ", ".join(f"`{n}`" for n in waiting) + ", not merged yet"
    return None


def run_offered_task(store: Store, delivery: str, node: str, task: str,
                     settings: AgentSettings, progress: Progress) -> str:
    """Run a task another process offered (`Dispatch`), when it is still this process's to
    take and this host has the tools its sessions need; what happened, in one line."""
    state = store.read(delivery)
    step = state.get_step(node)
    rec = next((t for t in step.tasks if t.id == task), None)
    why = "no such task" if rec is None else not_claimable(state, node, rec)
    if why is None:
        catalog = snapshot_catalog(store, state)
        why = missing_tool(catalog, step, settings, store.root, ran_on(current_owner()))
    if why is not None:
        return f"task `{task}` of `{node}` in `{delivery}` not run here: {why}"
    ctx = FanOut(store, delivery, node, catalog, settings, progress, workdir(store, state, step))
    if not run_task(ctx, state, step, task):
        return f"task `{task}` of `{node}` in `{delivery}` not run here: another process took it"
    done = ctx.record(store.read(delivery), task)
    return f"task `{task}` of `{node}` in `{delivery}`: {done.status}"


def run_task(ctx: FanOut, state: Delivery, step: Step, task: str) -> bool:
    """A task's sessions until one is built (validated on its own tree and committed on its
    branch) or its MAX_ATTEMPTS calls are spent. The task is claimed in the delivery state
    first; False when it was not this process's to run (`not_claimable`)."""
    key = f"{ctx.node}+{task}"
    claimed = False
    try:
        while True:
            with ctx.transaction() as fresh:
                rec = ctx.record(fresh, task)
                if not_claimable(fresh, ctx.node, rec) is not None:
                    return claimed
                if rec.attempts >= MAX_ATTEMPTS:
                    rec.status, rec.error = "failed", (f"budget spent: {rec.attempts} of "
                                                       f"{MAX_ATTEMPTS} sessions failed: "
                                                       f"{rec.last_failure}")
                    rec.finished_at, rec.owner = now_iso(), None
                    fresh.log("task failed", ctx.node, f"{task}: {rec.error}")
                    ctx.say(f"task {task}: failed ({rec.error[:200]})")
                    return True
                tree = task_tree(ctx, fresh, rec)
                if not owns(rec.owner):
                    rec.owner = current_owner(ctx.store.lease(ctx.delivery, key))
                    rec.ran_on = ran_on(rec.owner)
                claimed = True
                rec.status, rec.attempts = "running", rec.attempts + 1
                rec.started_at = rec.started_at or now_iso()
                fresh.log("task started", ctx.node,
                          f"{task} attempt {rec.attempts}/{MAX_ATTEMPTS}")
                view = rec.model_copy(deep=True)
                index = [t.id for t in fresh.get_step(ctx.node).tasks].index(task) + 1
                total = len(fresh.get_step(ctx.node).tasks)
                snapshot = fresh.model_copy(deep=True)
            ctx.say(f"task {task}: session {view.attempts} of {MAX_ATTEMPTS} started")
            started = time.monotonic()
            outcome = task_attempt(ctx, snapshot, snapshot.get_step(ctx.node), view, index,
                                   total, tree)
            with ctx.transaction() as fresh:
                rec = ctx.record(fresh, task)
                rec.duration_s = round(rec.duration_s + time.monotonic() - started, 3)
                for used in (*outcome.contract_usage,
                             *([outcome.usage] if outcome.usage else [])):
                    used = used.model_copy(update={"task": task})
                    rec.usage.append(used)
                    fresh.get_step(ctx.node).usage.append(used)
                if outcome.contract is not None:
                    rec.contract = outcome.contract
                rec.infra_retries.extend(outcome.infra)
                if outcome.reason == "infrastructure":  # the provider's failure: call given back
                    rec.attempts -= 1
                    rec.status, rec.error = "blocked", outcome.summary
                    rec.finished_at, rec.owner = now_iso(), None
                    fresh.log("task blocked", ctx.node, f"{task}: {outcome.summary}")
                elif outcome.ok:
                    product = gitflow.commit_product(tree, ctx.delivery, f"{ctx.node}.{task}",
                                                     rec.attempts)
                    rec.commits["product"] = product or gitflow.head(tree)
                    rec.status, rec.last_failure, rec.owner = "built", None, None
                    fresh.log("task built", ctx.node, f"{task} attempt {rec.attempts}")
                else:  # pending again, still held by this process for its next session
                    rec.status, rec.last_failure = "pending", outcome.summary
                    fresh.log("task attempt failed", ctx.node, f"{task} attempt {rec.attempts}")
            ctx.say(f"task {task}: session {view.attempts} "
                    + ("built and validated on its own tree" if outcome.ok else "failed"))
            if outcome.ok or outcome.reason == "infrastructure":
                return True
    finally:
        if claimed:  # still held when a defect or the node's end stopped its sessions: let go
            if owns(ctx.record(ctx.store.read(ctx.delivery), task).owner):
                with ctx.transaction() as fresh:
                    rec = ctx.record(fresh, task)
                    if owns(rec.owner):
                        rec.owner = None
            ctx.store.release(ctx.delivery, key)


def task_tree(ctx: FanOut, state: Delivery, rec: TaskRecord) -> Path:
    """The task's worktree (made on its first session from the node's tree as it is then, so
    it holds every task it needs); on a later session the node's tree is merged in first."""
    target = target_path(ctx.store, state)
    path = (ctx.store.root / WORKTREES / f"{ctx.delivery}+{ctx.node}+{rec.id}").resolve()
    branch = task_branch(ctx.delivery, ctx.node, rec.id)
    gitflow.branch_worktree(target, path, branch, gitflow.head(ctx.tree),
                            f"task `{rec.id}` of node `{ctx.node}`")
    if rec.base_commit is None:
        rec.base_commit = gitflow.head(path)
    else:
        merged = gitflow.merge(path, gitflow.head(ctx.tree), "the node's tree",
                               f"[{ctx.delivery}] {ctx.node}.{rec.id}: merge the node's tree")
        if isinstance(merged, gitflow.MergeConflict):
            raise UsageError(f"task `{rec.id}`: merging the node's tree into {path} conflicts on "
                             f"{', '.join(merged.paths)}")
    root = ctx.store.root.resolve()
    rec.branch = branch
    rec.worktree = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    return path


def task_attempt(ctx: FanOut, state: Delivery, step: Step, rec: TaskRecord, index: int,
                 total: int, tree: Path) -> AttemptResult:
    """One codex session of one task in its own tree, then the task's verification there: its
    artifacts, a product change, the node's validation."""
    phase = ctx.catalog.phases[step.phase]
    folder = node_dir(ctx.store, ctx.delivery, ctx.node) / "tasks" / rec.id
    folder.mkdir(parents=True, exist_ok=True)
    view = TaskView(rec, index, total, folder)
    prompt = assemble_prompt(ctx.store.root, state, step, ctx.catalog, tree, task=view)
    # the node folder is read-only to a task's session: its folder is the task's own
    env = {**step_env(ctx.store, state, step), "SPECOPS_TASK": rec.id,
           "SPECOPS_TARGET": str(tree), "SPECOPS_NODE_DIR": str(folder.resolve())}
    if rec.attempts == 1 and step.validation == "full":
        restored = restore_task_tree(ctx, state, step, tree, env, folder)
        if restored is not None:
            return AttemptResult(False, restored)
    deal = None
    if phase.execution.contract is not None and not (rec.contract and rec.contract.agreed):
        deal = negotiate(ctx.store, state, step, ctx.catalog, ctx.settings, cwd=tree,
                         folder=folder, label=f"{ctx.node}.{rec.id}", env=env, task=view)
        if deal.refused:
            return AttemptResult(False, deal.refused, contract=deal.record,
                                 contract_usage=deal.usage)
        rec = rec.model_copy(update={"contract": deal.record})
        view = TaskView(rec, index, total, folder)
        prompt = assemble_prompt(ctx.store.root, state, step, ctx.catalog, tree, task=view)
    result = build_task(ctx, state, step, rec, view, prompt, tree, folder, env, phase)
    if deal is not None:
        result = replace(result, contract=deal.record, contract_usage=deal.usage,
                         infra=deal.retries + result.infra)
    return result


def build_task(ctx: FanOut, state: Delivery, step: Step, rec: TaskRecord, view: TaskView,
               prompt, tree: Path, folder: Path, env: dict[str, str], phase) -> AttemptResult:
    """The task's build session and its verification (artifacts, a product change, the node's
    validation on the task's tree, the agreed contract's tests)."""
    session = codex_session(
        ctx.store, ctx.settings, phase, find_codex(ctx.settings, ctx.store.root),
        prompt=prompt.text, cwd=tree, folder=folder, delivery=ctx.delivery,
        label=f"{ctx.node}.{rec.id}", attempt=rec.attempts, env=env,
        output=folder / f"session{rec.attempts}-output.json")
    (folder / f"session{rec.attempts}-prompt.md").write_text(session.shown(prompt.text),
                                                             encoding="utf-8")
    run, usage = session.run, session.usage.model_copy(update={"task": rec.id})
    if run.environment_error:
        return AttemptResult(False, session.shown(run.environment_error), usage=usage,
                             infra=session.retries)
    if run.infrastructure:
        return AttemptResult(False, provider_down(state, step, session.shown(run.infrastructure),
                                                  session.retries, phase.execution),
                             usage=usage, reason="infrastructure", infra=session.retries)
    if not run.ok:
        failure = run.failure(phase.execution.timeout_s, phase.execution.idle_timeout_s)
        return AttemptResult(False, failure_summary(session.shown(failure)), usage=usage,
                             reason=run.reason, infra=session.retries)
    missing = [f"`{a.id}` ({agent_path(folder / a.path, tree)})"
               for a in phase.output.artifacts if a.required and not (folder / a.path).is_file()]
    if missing:
        return AttemptResult(False, "exit 0 but required artifacts are missing: "
                             + ", ".join(missing), usage=usage)
    if not gitflow.product_changes(tree, since=rec.base_commit):
        return AttemptResult(False, "exit 0 but the product did not change: a task changes "
                             f"the product (expected paths: {', '.join(rec.paths)})",
                             usage=usage)
    config = layout_of(ctx.catalog, state, step)
    logs_dir = attempt_logs(folder, rec.attempts)
    report = validate_attempt(step.validation, tree, delivery=ctx.delivery,
                              base_commit=rec.base_commit, log_dir=logs_dir, env=env,
                              config=config, baseline=baseline_for(ctx.store, step, config))
    if not report.passed:
        logs = f"\nvalidation logs: {agent_path(logs_dir, tree)}/" if report.logs else ""
        return AttemptResult(False, failure_summary(report.describe() + logs), usage=usage,
                             validation=report)
    broken = judge(rec.contract, report)
    if broken:
        return AttemptResult(False, broken, usage=usage, validation=report)
    return AttemptResult(True, "", usage=usage, validation=report)


def restore_task_tree(ctx: FanOut, state: Delivery, step: Step, tree: Path,
                      env: dict[str, str], folder: Path) -> str | None:
    """Before a task's first session: its worktree restored outside the sandbox with the agent's
    own NuGet and dotnet homes (as a node's is), so the agent builds and tests `--no-restore`.
    Returns why it failed, or None."""
    from specops_dag.errors import ToolMissing
    from specops_dag.validation.dotnet import restore_worktree

    try:
        report = restore_worktree(tree, folder / "validation" / "restore", env,
                                  config=layout_of(ctx.catalog, state, step))
    except ToolMissing:
        return None  # validation says so with the exact error
    if report is None or report.passed:
        return None
    return (f"the executor's `dotnet restore` of the task's worktree failed, no agent call was "
            f"made: {report.message}; logs in {folder / 'validation' / 'restore'}")


def gather_artifacts(ctx: FanOut, state: Delivery, step: Step,
                     tasks: list[TaskRecord]) -> None:
    """The node's artifacts are its tasks' own, put together in task order, each under a
    `## Task <id>: <title>` heading (what every session wrote, nothing added)."""
    phase = ctx.catalog.phases[step.phase]
    folder = node_dir(ctx.store, ctx.delivery, ctx.node)
    for art in phase.output.artifacts:
        parts = []
        for rec in tasks:
            source = folder / "tasks" / rec.id / art.path
            if source.is_file():
                parts.append(f"## Task {rec.id}: {rec.title}\n\n"
                             + source.read_text(encoding="utf-8").strip() + "\n")
        if parts:
            path = folder / art.path
            path.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(path, "\n".join(parts))


def leave_handoff(ctx: FanOut, step: Step, tasks: list[TaskRecord]) -> None:
    """Once every task is merged: each task's record copied from its worktree into the node's
    tree (a task's branch holds its product only; the records are committed with the node's
    metadata), and the node's `## <node>` section of the delivery handoff written there. The
    executor writes it, not the tasks: parallel sessions editing one file could not all merge."""
    for rec in tasks:
        rel = task_record(ctx.delivery, ctx.node, rec.id)
        source = (ctx.store.root / rec.worktree / rel) if rec.worktree else None
        if source is not None and source.is_file():
            (ctx.tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, ctx.tree / rel)
    path = ctx.tree / handoff_rel(ctx.delivery)
    old = path.read_text(encoding="utf-8") if path.is_file() else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, with_section(old, ctx.node, handoff_section(ctx, step, tasks)))


def handoff_section(ctx: FanOut, step: Step, tasks: list[TaskRecord]) -> str:
    """The fan-out node's handoff section: its tasks (id, status, record) and its gathered
    artifacts, by path only."""
    d, n = ctx.delivery, ctx.node
    folder = node_dir(ctx.store, d, n)
    lines = [f"## {n}", "", f"Written by the executor: the node's {len(tasks)} tasks ran in "
             "sessions of their own and were merged into its tree in task order; the node's "
             "validation passed on the merged tree.", "", "Tasks:"]
    for rec in tasks:
        rel = task_record(d, n, rec.id)
        lines.append(f"- `{rec.id}` {rec.title}: {rec.status}; task record {rel}"
                     + ("" if (ctx.tree / rel).is_file() else " (not written)"))
    arts = [f"- `{a.id}`: phases/{d}/{n}/{a.path}"
            for a in ctx.catalog.phases[step.phase].output.artifacts
            if (folder / a.path).is_file()]
    lines += ["", "Artifacts (every task's, put together in task order):", *(arts or ["- none"])]
    return "\n".join(lines) + "\n"


def with_section(text: str, node: str, section: str) -> str:
    """The handoff `text` with its `## <node>` section (up to the next `## ` heading) replaced
    by `section`, or `section` appended; every other section as it was."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.rstrip() == f"## {node}"), None)
    if start is None:
        return (text.rstrip() + "\n\n" if text.strip() else "") + section
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
               len(lines))
    before = "\n".join(lines[:start]).rstrip()
    after = "\n".join(lines[end:]).strip()
    return ((before + "\n\n" if before else "") + section
            + ("\n" + after + "\n" if after else ""))


def remove_task_trees(store: Store, state: Delivery, step: Step) -> None:
    """The merged tasks' worktrees go once the node completes (their branches stay)."""
    target = target_path(store, state)
    for rec in step.tasks:
        if rec.worktree:
            gitflow.remove_worktree(target, (store.root / rec.worktree).resolve())
            rec.worktree = None
