"""Delivery life cycle over the state store: create (with the frozen config snapshot), reopen,
resume, approve, and the read-only questions the front-ends ask (what can run, what drifted).

Plain Python: the CLI and the Dagster adapter call these; nothing here imports dagster.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import yaml

from specops_dag.builtin import BUILTIN_PREFIX, HOOK_RULES, WORK_RULES
from specops_dag.delivery import pricing
from specops_dag.delivery.model import (
    HOOK_RULES_KIND,
    PRICES_KIND,
    WORK_RULES_KIND,
    BoundSkill,
    Delivery,
    Owner,
    RanOn,
    Revision,
    Snapshot,
    SnapshotFile,
    Step,
    TargetRecord,
    derive_status,
)
from specops_dag.delivery.platform import EXPLICIT, detect_platforms
from specops_dag.delivery.queries import (
    check_delivery_id,
    gate_open,
    open_risks,
    owner_alive,
    owner_named,
    target_of,
    work_path,
)
from specops_dag.delivery.store import Store, render
from specops_dag.errors import BlockedError, StateError, UsageError, WriteConflict
from specops_dag.files import now_iso, sha256_file, write_bytes_atomic
from specops_dag.gitflow import keep_harness_clean
from specops_dag.graph import topological_order
from specops_dag.locking import this_process
from specops_dag.workflow.catalog import Catalog, load_snapshot

SNAPSHOT_DIR = "snapshot"


def case_twin(store: Store, delivery: str) -> str | None:
    """An existing delivery whose id differs from `delivery` only in case."""
    if not store.phases.is_dir():
        return None
    return next((d.name for d in store.phases.iterdir() if d.is_dir() and d.name != delivery
                 and d.name.casefold() == delivery.casefold()), None)


def new_delivery(store: Store, catalog: Catalog, workflow_id: str, delivery: str, request: str,
                 target: Path | None = None, platforms: tuple[str, ...] | None = None,
                 before_write: Callable[[], None] | None = None,
                 validation: str | None = None, budget_tokens: int | None = None,
                 judge: str | None = None, budget_usd: float | None = None,
                 target_policy: TargetRecord | None = None) -> Delivery:
    """Create `phases/<delivery>/` with its snapshot and pending steps, all or nothing.
    `target_policy` is the .NET target policy resolved for the target repository (frozen in
    the snapshot; None: each validation resolves validation.yaml's own). `platforms` bind the
    skills with `when: {platforms: [...]}`; None: those the target repository shows
    (`platforms_for`).

    `before_write` runs once every input is validated and before any file is written (the CLI
    registers the Dagster partition there)."""
    check_delivery_id(delivery)
    if workflow_id not in catalog.workflows:
        raise UsageError(f"unknown workflow `{workflow_id}` (known: "
                         f"{', '.join(sorted(catalog.workflows))}); see `specops check`")
    if not request.strip():
        raise UsageError("the request is empty; pass --request TEXT or --request-file FILE")
    if store.exists(delivery) or store.delivery_dir(delivery).exists():
        raise UsageError(f"delivery `{delivery}` already exists (phases/{delivery}/); pick "
                         f"another id or see `specops status {delivery}`")
    twin = case_twin(store, delivery)
    if twin is not None:
        raise UsageError(f"delivery `{delivery}` differs only in case from the existing delivery "
                         f"`{twin}` (phases/{twin}/); their folders and `feat-` branches would "
                         "collide on a case-insensitive file system, pick another id")
    repo_path = (target or store.root).resolve()
    if not repo_path.is_dir():
        raise UsageError(f"--target {target}: not a directory; pass the .NET repository to change")
    origin = platforms_for(catalog, workflow_id, delivery, repo_path, platforms)
    store.read_index()  # a broken phases/index.json stops `new` before anything is written
    if before_write is not None:
        before_write()
    store.phases.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".new-{delivery}-", dir=store.phases))
    try:
        snapshot = freeze_snapshot(catalog, workflow_id, staging, tuple(origin), root=store.root)
        snapshot.target = target_policy
        state = initial_state(store, catalog, workflow_id, delivery, request, repo_path,
                              tuple(origin), snapshot)
        state.platforms_from = origin
        for step in state.steps if validation else []:
            step.validation = validation
        state.budget_tokens = budget_tokens or catalog.workflows[workflow_id].budget.tokens
        state.budget_usd = budget_usd or catalog.workflows[workflow_id].budget.usd
        state.judge = judge  # type: ignore[assignment] — the CLI offers the two judges only
        (staging / "request.md").write_text(request, encoding="utf-8")
        for lock in (".lock", ".run.lock"):  # the delivery's locks exist from the start:
            (staging / lock).touch()  # taking them later never changes the tree
        write_bytes_atomic(staging / "index.json", render(state))
        with store.lock(".index.lock", "phases/index.json"):
            if store.delivery_dir(delivery).exists():
                raise WriteConflict(f"write conflict: phases/{delivery}/ appeared while creating "
                                    "it; nothing was changed")
            os.rename(staging, store.delivery_dir(delivery))
        store.update_index(state)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    keep_harness_clean(store.root)  # GitPython only for a git harness root
    return state


def platforms_for(catalog: Catalog, workflow_id: str, delivery: str, repo: Path,
                  given: tuple[str, ...] | None) -> dict[str, str]:
    """{platform: where from} of a new delivery: `given` (`--platform`) as it is, else what the
    target repository shows (`detect_platforms`; not looked for when no skill of the workflow
    is bound `when: {platforms: [...]}`). A given platform no such skill names is refused."""
    named = catalog.platforms_of(workflow_id)
    if given is None:
        return detect_platforms(repo, delivery) if named else {}
    for platform in given:
        if platform not in named:
            raise UsageError(f"--platform {platform}: no skill of workflow `{workflow_id}` is "
                             f"bound with it (its skills' platforms: {', '.join(named) or 'none'})"
                             "; pass one of those, or leave --platform out to detect them from "
                             "the repository")
    return dict.fromkeys(given, EXPLICIT)


def freeze_snapshot(catalog: Catalog, workflow_id: str, into: Path,
                    platforms: tuple[str, ...], *, root: Path) -> Snapshot:
    """Copy every file the workflow uses under `into/snapshot/` and record path + sha256; bind
    each phase's skills whose `when` names one of `platforms` (or has none). The harness files
    a run reads besides the definitions are frozen too (`freeze_harness_files`, from `root`)."""
    files = []
    for src in catalog.files_of(workflow_id):
        copy = Path(SNAPSHOT_DIR) / src.rel
        (into / copy).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src.path, into / copy)
        files.append(SnapshotFile(kind=src.kind, id=src.id, path=src.display,
                                  sha256=sha256_file(into / copy), copy=copy.as_posix()))
    by_id = {f.id: f for f in files if f.kind == "skill"}
    skills = {}
    for phase_id in catalog.phase_ids_of(workflow_id):
        phase = catalog.phases[phase_id]
        skills[phase_id] = [
            BoundSkill(id=s.id, load=s.load, path=by_id[s.id].copy_path, sha256=by_id[s.id].sha256)
            for s in phase.execution.skills
            if s.when is None or set(s.when.platforms) & set(platforms)]
    edges = [e.model_dump(by_alias=True) for e in bound_edges(catalog, skills)]
    if by_id and ("skill-graph", "graph") in catalog.sources:
        graph_src = catalog.source("skill-graph", "graph")
        copy = Path(SNAPSHOT_DIR) / graph_src.rel
        (into / copy).parent.mkdir(parents=True, exist_ok=True)
        (into / copy).write_text(yaml.safe_dump({"edges": edges}, sort_keys=False), "utf-8")
        # sha256 of the source, so drift is told against it; the copy holds only bound edges,
        # so its own hash is what `check_snapshot` holds it to.
        files.append(SnapshotFile(kind="skill-graph", id="graph", path=graph_src.display,
                                  sha256=sha256_file(graph_src.path), copy=copy.as_posix(),
                                  copy_sha256=sha256_file(into / copy)))
    files += freeze_harness_files(root, into)
    reviews = {n.id: n.review.phase_for(platforms)  # each review's evaluator, chosen once
               for n in catalog.workflows[workflow_id].nodes if n.review}
    return Snapshot(workflow=workflow_id, files=files, skills=skills, reviews=reviews)


def freeze_harness_files(root: Path, into: Path) -> list[SnapshotFile]:
    """Copy under `into/snapshot/` the files a run reads besides the definitions: the common
    work rules (built in), the TDD hook's rules (`workflow_defs/hooks.json`) and the price table
    (`prices.yaml`) of the harness root. An optional one that is absent is recorded so (sha256
    None): creating it later is drift too. The price table is checked first, as runs will read
    it (`specops new` checks hooks.json, the hook's own to parse, before it gets here)."""
    files = []
    for kind, shown, source in ((WORK_RULES_KIND, f"{BUILTIN_PREFIX}work-rules.md", WORK_RULES),
                                (HOOK_RULES_KIND, HOOK_RULES, root / HOOK_RULES),
                                (PRICES_KIND, pricing.PRICES_FILE, root / pricing.PRICES_FILE)):
        copy = Path(SNAPSHOT_DIR) / source.name
        try:
            body = source.read_bytes()
        except FileNotFoundError:
            if kind == WORK_RULES_KIND:
                raise
            files.append(SnapshotFile(kind=kind, id=kind, path=shown, sha256=None,
                                      copy=copy.as_posix()))
            continue
        except OSError as err:
            raise UsageError(f"{shown}: cannot be read ({err.strerror}); make it readable or "
                             "remove it, then run `specops new` again") from None
        write_bytes_atomic(into / copy, body)
        if kind == PRICES_KIND:
            pricing.merge_prices(into / copy, shown, pricing.DEFAULT_PRICES)
        files.append(SnapshotFile(kind=kind, id=kind, path=shown, sha256=sha256_file(into / copy),
                                  copy=copy.as_posix()))
    return files


def bound_edges(catalog: Catalog, skills: dict[str, list[BoundSkill]]) -> list:
    """The skill-graph edges a snapshot keeps: each phase that binds an edge's source binds its
    target too (a platform skill left unbound takes its edges along), and one phase binds it."""
    ids = [{s.id for s in bound} for bound in skills.values()]
    return [e for e in catalog.graph.edges
            if any(e.source in phase for phase in ids)
            and all(e.to in phase for phase in ids if e.source in phase)]


def initial_state(store: Store, catalog: Catalog, workflow_id: str, delivery: str, request: str,
                  target: Path, platforms: tuple[str, ...], snapshot: Snapshot) -> Delivery:
    wf = catalog.workflows[workflow_id]
    nodes = {n.id: n for n in wf.nodes}  # a loaded workflow's ids are unique
    steps = []
    for i, node_id in enumerate(topological_order({n.id: n.needs for n in wf.nodes})):
        node = nodes[node_id]
        phase = catalog.phases[node.phase]
        gates = [g for g in (node.gates.before, phase.execution.gates.before) if g]
        if not node.needs and wf.gates.before:
            gates.insert(0, wf.gates.before)
        for up in node.needs:
            up_node = nodes[up]
            gates += [g for g in (up_node.gates.after,
                                  catalog.phases[up_node.phase].execution.gates.after) if g]
        context = list(dict.fromkeys([*phase.context_files, *node.context_files]))
        steps.append(Step(step=i, name=node.id, phase=node.phase, needs=list(node.needs),
                          context_files=context, validation=phase.validation_mode,
                          gates=list(dict.fromkeys(gates))))
    stamp = now_iso()
    rel_target = (target.relative_to(store.root.resolve()).as_posix() or "."
                  if target.is_relative_to(store.root.resolve()) else str(target))
    state = Delivery(project=store.root.resolve().name, phase=delivery, workflow=workflow_id,
                     request=request, target=rel_target, platforms=list(platforms),
                     created_at=stamp, updated_at=stamp, snapshot=snapshot, steps=steps)
    state.log("created", detail=f"workflow {workflow_id}")
    state.status = derive_status(state.steps)
    return state


def snapshot_catalog(store: Store, state: Delivery) -> Catalog:
    """The definitions frozen at creation: later runs use these, never the current defaults.
    Each phase is read when it is first looked up (`load_snapshot`)."""
    root = store.delivery_dir(state.phase) / SNAPSHOT_DIR
    return load_snapshot(root, display_base=store.root)


def target_path(store: Store, state: Delivery) -> Path:
    return target_of(store.root, state)


def workdir(store: Store, state: Delivery, step: Step | None = None) -> Path:
    """Where the agent of `step` works (its own worktree when it may run beside other nodes),
    else the delivery's worktree once it exists, else the target itself."""
    return work_path(store.root, state, step)


def downstream_of(state: Delivery, node: str) -> list[str]:
    """`node` and every step that transitively needs it, in step order."""
    hit = {node}
    for step in state.steps:  # steps are in topological order
        if hit & set(step.needs):
            hit.add(step.name)
    return [s.name for s in state.steps if s.name in hit]


def current_owner(lease: Path | None = None) -> Owner:
    """This process as a step's owner; `lease`: where it renews its owner record
    (`Store.lease`), so another host can judge it."""
    me = this_process()
    return Owner(pid=me.pid, create_time=me.started or 0.0, host=me.host, boot_id=me.boot_id,
                 lease=str(lease) if lease is not None else None)


# Set by `specops worker` for the Celery worker it starts (cli/worker.py): the worker's name, which
# a step run in that worker records in `ran_on` and `specops status` shows.
WORKER_ENV = "SPECOPS_WORKER"


def ran_on(owner: Owner) -> RanOn:
    """Where the attempt `owner` claimed runs: its host and pid, and the Celery worker's name
    when this process is one (WORKER_ENV)."""
    return RanOn(host=owner.host, pid=owner.pid, worker=os.environ.get(WORKER_ENV) or None)


def owns(owner: Owner | None) -> bool:
    """Is `owner` this process (a pid is unique on its host while it lives)?"""
    me = this_process()
    return owner is not None and (owner.host, owner.pid, owner.boot_id) == (
        me.host, me.pid, me.boot_id)


def reopen(store: Store, delivery: str, node: str, reason: str = "") -> list[str]:
    """Node + transitive downstream → pending; their handoffs move to `revisions`."""
    with store.transaction(delivery) as state:
        if state.get_step(node).status == "pending":
            raise StateError(f"step `{node}` of `{delivery}` is `pending`: there is nothing to "
                             f"reopen; `specops run {delivery}` runs it")
        names = downstream_of(state, node)
        steps = {s.name: s for s in state.steps}  # one look-up per name, also for 10,000 steps
        for name in names:
            step = steps[name]
            if step.status == "running" and owner_alive(step.owner):
                raise WriteConflict(f"write conflict: step `{name}` of `{delivery}` is running "
                                    f"({owner_named(step.owner)}); wait for it to finish, then "
                                    "reopen")
        stamp = now_iso()
        for name in names:
            step = steps[name]
            files = move_aside(store, state, step, len(step.revisions) + 1)
            if step.handoff or step.completed_at or files:
                step.revisions.append(Revision(
                    handoff=step.handoff, consumed=step.consumed, commits=step.commits,
                    completed_at=step.completed_at, attempts=step.attempts, reopened_at=stamp,
                    reason=reason or f"reopened from `{node}`", files=files))
            state.reopen(step, (reason if name == node else f"{reason} (reopened from `{node}`)")
                         if reason else None)
        state.log("reopened", node, f"{', '.join(names)}" + (f": {reason}" if reason else ""))
    return names


REVISIONS = ".revisions"  # phases/<d>/.revisions/<node>/<n>/: a reopened run's own files


def step_record(delivery: str, node: str) -> str:
    """The step record a node's prompt names under WRITE, from the root of its work tree."""
    return f"docs/phase/{delivery}/{node}.md"


def task_record(delivery: str, node: str, task: str) -> str:
    """The task record a fan-out task's prompt names under WRITE, from the root of its tree."""
    return f"docs/phase/{delivery}/{node}-{task}.md"


def move_aside(store: Store, state: Delivery, step: Step, number: int) -> str | None:
    """Move what the node's last run left in `phases/<d>/<node>/` (its artifacts, risk file,
    prompt, logs) to `phases/<d>/.revisions/<node>/<number>/`, in the harness root and in the
    delivery worktree's committed copy alike, and its step and task records
    (`docs/phase/<d>/<node>.md`, `<node>-<task>.md` of the work tree it ran in) to the same
    paths under that folder, so a re-run
    starts from nothing of its own and nothing of the old run counts as its output. Returns that
    folder, or None when the node left nothing there."""
    node = step.name
    folder = store.delivery_dir(state.phase) / node
    held = folder.is_dir() and any(folder.iterdir())
    records = old_step_records(store, state, step)
    if not held and not records:
        return None
    aside = store.delivery_dir(state.phase) / REVISIONS / node / str(number)
    if held:
        shutil.rmtree(aside, ignore_errors=True)  # left by a reopen killed before its state write
        aside.parent.mkdir(parents=True, exist_ok=True)
        folder.rename(aside)
        folder.mkdir()
    else:  # the step record alone (what a killed reopen moved before it is kept)
        aside.mkdir(parents=True, exist_ok=True)
    copy = workdir(store, state) / "phases" / state.phase if state.worktree else None
    if copy is not None and (copy / node).is_dir():
        (copy / REVISIONS / node).mkdir(parents=True, exist_ok=True)
        shutil.rmtree(copy / REVISIONS / node / str(number), ignore_errors=True)
        (copy / node).rename(copy / REVISIONS / node / str(number))
    for rel, record in records:  # the delivery's tree first: its record is the one committed
        for into in (aside, *([copy / REVISIONS / node / str(number)] if copy else [])):
            if not (into / rel).exists():
                (into / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(record, into / rel)
        record.unlink()
    return aside.relative_to(store.root).as_posix() + "/"


def old_step_records(store: Store, state: Delivery, step: Step) -> list[tuple[str, Path]]:
    """(path from the tree's root, file) of each record the last run of `step` left — its step
    record and its fan-out tasks' records — in the delivery's work tree (the worktree of
    feat-<d>, or a plain-folder target itself) and in the node's own worktree while it has one
    (`step.worktree`, until its work is merged)."""
    trees = dict.fromkeys((workdir(store, state),
                           *([workdir(store, state, step)] if step.worktree else [])))
    rels = [step_record(state.phase, step.name),
            *(task_record(state.phase, step.name, t.id) for t in step.tasks)]
    return [(rel, tree / rel) for tree in trees for rel in rels if (tree / rel).is_file()]


def resume(store: Store, delivery: str, node: str) -> Step:
    """error|blocked → pending, removing error_message/failed_at or blocked_reason/blocked_at."""
    with store.transaction(delivery) as state:
        step = state.get_step(node)
        if step.status not in ("error", "blocked"):
            raise StateError(f"step `{node}` of `{delivery}` is `{step.status}`; resume takes an "
                             "`error` or `blocked` step"
                             + (f" (reopen a completed one with `specops reopen {delivery} "
                                f"{node}`)" if step.status == "completed" else ""))
        state.resume(step)
        return step


def push_delivery(store: Store, delivery: str) -> str:
    """Push feat-<delivery> to origin once every step is completed, no risk is open and an
    unused external-write approval allows it. The push uses that approval up (`used_at`,
    `used_by`), claimed under the lock before pushing and given back if the push fails, so the
    next push needs an approval of its own."""
    with store.transaction(delivery) as state:
        check_pushable(state)
        index = max(i for i, a in enumerate(state.approvals) if a.gate == "external-write")
        approval = state.approvals[index]
        from specops_dag import gitflow  # GitPython only when pushing: `specops status` stays fast

        worktree = workdir(store, state)
        approval.used_at = now_iso()
        approval.used_by = f"push {state.branch} {gitflow.head(worktree)}"
    try:
        summary = gitflow.push(worktree, delivery)
    except gitflow.GitError:
        with store.transaction(delivery) as fresh:  # git pushed nothing: the approval stands
            fresh.approvals[index].used_at = fresh.approvals[index].used_by = None
        raise
    with store.transaction(delivery) as fresh:
        fresh.log("pushed", detail=f"{state.branch} to origin: {summary}; used the "
                  f"external-write approval of {approval.at}")
    return summary


def check_pushable(state: Delivery) -> None:
    """Why `specops run D --push` must not push now (a BlockedError), in the order to fix it."""
    delivery = state.phase
    risks = open_risks(state)
    if risks:
        files = ", ".join(f"{r.path} (raised by `{r.node}`)" for r in risks)
        raise BlockedError(f"not pushed: open risk: {files}; decide it with `specops approve "
                           f"{delivery} risk --note ...` (or `--reject --note ...`), then "
                           f"`specops run {delivery} --push`")
    if state.status != "completed":
        raise BlockedError(f"not pushed: delivery `{delivery}` is `{state.status}`; push happens "
                           "after the last step completes")
    decisions = [a for a in state.approvals if a.gate == "external-write"]
    if decisions and decisions[-1].decision == "approved" and decisions[-1].used_at:
        raise BlockedError(f"not pushed: the external-write approval of {decisions[-1].at} was "
                           f"used by the push at {decisions[-1].used_at} "
                           f"({decisions[-1].used_by}); each push needs its own approval: "
                           f"approve with `specops approve {delivery} external-write --note ...`, "
                           f"then `specops run {delivery} --push`")
    if not gate_open(state, "external-write"):
        raise BlockedError(f"not pushed: awaiting approval: external-write; approve with "
                           f"`specops approve {delivery} external-write --note ...`, then "
                           f"`specops run {delivery} --push`")
    if not state.worktree:
        raise UsageError(f"not pushed: the target of `{delivery}` is not a git repository")
