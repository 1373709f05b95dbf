"""The records of a delivery's state (DESIGN §5) — `phases/index.json` and
`phases/<delivery>/index.json` as pydantic models — and the allowed step transitions. No file IO:
`store` reads and writes them; nothing here knows Dagster or how a step runs."""

# No `from __future__ import annotations` here: pydantic would evaluate every field's string
# annotation as it builds each class, a quarter of this module's import (status, dry-run).
from typing import Annotated, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from specops_dag.delivery.queries import get_step
from specops_dag.errors import StateError
from specops_dag.files import now_iso

Count = Annotated[int, Field(ge=0)]  # attempts, step numbers: never negative

SCHEMA_VERSION = 1
StepStatus = Literal["pending", "running", "completed", "error", "blocked"]
Via = Literal["run", "resume", "reopen", "approve"]  # the operations that move a step

# (from, to) -> the operations allowed to make that move (DESIGN §5).
TRANSITIONS: dict[tuple[str, str], frozenset[str]] = {
    ("pending", "running"): frozenset({"run"}),
    ("running", "running"): frozenset({"run"}),  # an interrupted attempt taken over, or a retry
    ("running", "completed"): frozenset({"run"}),
    ("running", "error"): frozenset({"run"}),
    ("running", "blocked"): frozenset({"run"}),
    ("pending", "blocked"): frozenset({"run"}),
    ("error", "pending"): frozenset({"resume", "reopen"}),
    ("blocked", "pending"): frozenset({"resume", "reopen", "approve"}),
    ("completed", "pending"): frozenset({"reopen"}),
    ("pending", "pending"): frozenset({"reopen"}),
    ("running", "pending"): frozenset({"reopen"}),  # only when its owner is gone
}


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


M = TypeVar("M", bound=Model)


class FileRef(Model):
    path: str
    sha256: str


# The harness files `specops new` freezes beside the definitions, by their snapshot kind (the
# hook, standard library only, spells the hooks.json kind itself: `hooks.tdd.FROZEN_KIND`).
WORK_RULES_KIND, HOOK_RULES_KIND, PRICES_KIND = "work-rules", "hooks", "prices"


class SnapshotFile(Model):
    """A file `specops new` froze into `phases/<d>/snapshot/`: a definition, the skill graph's
    bound edges, or a harness file a run reads (`work-rules`, `hooks`, `prices`)."""

    kind: str
    id: str
    path: str  # the source, as messages name it
    sha256: str | None  # the source's; None: an optional harness file that was absent
    copy_path: str = Field(alias="copy")  # where the copy is (or, absent, must stay absent)
    copy_sha256: str | None = None  # the copy's own, when it is not the source's bytes

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    @model_serializer(mode="wrap")
    def _without_copy_hash(self, handler: SerializerFunctionWrapHandler) -> dict:
        # a snapshot frozen before copies had hashes of their own writes back byte-identically
        data = handler(self)
        if self.copy_sha256 is None:
            data.pop("copy_sha256", None)
        return data


class BoundSkill(Model):
    id: str
    load: str
    path: str
    sha256: str


class TargetRecord(Model):
    """The target policy frozen at `specops new` (`validation.sdk.TargetPolicy` as data)."""

    framework: str
    newer_sdk: bool
    newer_runtime: bool
    origin: str


class Snapshot(Model):
    workflow: str
    files: list[SnapshotFile]
    skills: dict[str, list[BoundSkill]] = {}
    target: TargetRecord | None = None  # None: created before target policies; resolved per run
    # node -> the evaluator phase its `review:` chose for the delivery's platforms at `new`
    # (none recorded: created before platform reviews, whose `phase` is the only choice)
    reviews: dict[str, str] = {}

    def frozen(self, kind: str) -> SnapshotFile | None:
        """The entry of a harness file frozen at `specops new` (`work-rules`, `hooks`, `prices`);
        None for a snapshot frozen before that file was."""
        return next((f for f in self.files if f.kind == kind), None)


class Owner(Model):
    """The process that marked a step running (`locking.owner_alive` judges it)."""

    pid: int
    create_time: float
    host: str
    boot_id: str | None = None  # None: recorded before boot ids were
    lease: str | None = None  # the absolute path of its owner record, renewed while it runs


class RanOn(Model):
    """Where a step's last attempt ran: the host and pid of the process that claimed it, and the
    Celery worker's name when `specops worker` started that process. Kept when the attempt ends
    (its `owner` is cleared then)."""

    host: str
    pid: int
    worker: str | None = None  # SPECOPS_WORKER of that process: None outside a Celery worker


class Revision(Model):
    handoff: dict[str, FileRef] = {}
    consumed: dict[str, FileRef] = {}
    commits: dict[str, str | None] = {}
    completed_at: str | None = None
    attempts: Count = 0
    reopened_at: str
    reason: str
    files: str | None = None  # where the run's own files went (`phases/<d>/.revisions/<node>/<n>/`)


class Usage(Model):
    """Tokens of one attempt (codex reports them cumulative per thread; one thread per attempt)."""

    attempt: int
    thread_id: str | None = None
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0
    role: Literal["generator", "evaluator"] = "generator"  # whose session (a review round's)
    task: str | None = None  # a fan-out task's session: the task id
    model: str | None = None  # the model it ran, as codex reported it (else `-m`, else config)
    provider: str | None = None  # the model provider's id, as codex reported it; None: unreported


# How an attempt ended (issue 21): one reason each. `infrastructure` (the provider failed: HTTP
# 5xx, rate limits, a cut stream, a reconnect loop) is retried under its own budget and does not
# count against the agent calls; `environment` and `budget` stop the step for a person.
AttemptReason = Literal["completed", "verification-failed", "agent-error", "timeout", "idle",
                        "infrastructure", "environment", "budget"]


class InfraRetry(Model):
    """One codex session the provider failed, retried after `wait_s` (`execution.infra_retries`)."""

    at: str
    session: str  # `<node>`, `<node>.<task>`, `<node>.review`, `<node>.contract`…
    reason: str
    wait_s: float


class IntegrityFinding(Model):
    """One change the test-integrity guard found (`validation.integrity.Finding`), and whether
    an approved risk waived it."""

    path: str
    line: int | None = None
    rule: str
    change: str
    tests: list[str] = []
    waived: bool = False


class ProofTest(Model):
    """One test the step added or changed, and its outcome at the base and at the head."""

    name: str  # as the head's TRX names it (`Ns.Class.Method`; `Class.Method` when none does)
    path: str
    line: int | None = None
    change: Literal["added", "changed"]
    base: Literal["failed", "did not compile", "passed", "skipped", "not run"]
    head: Literal["failed", "passed", "skipped", "not run"]
    waived: bool = False  # it passes at the base, and an approved risk names it


class ProofRecord(Model):
    """The fail-before, pass-after proof of a step's tests (`validation.proof.Proof` as data):
    TRX paths relative to the harness root."""

    base_commit: str
    verdict: Literal["proven", "passes at base", "no test added or changed", "not finished"]
    detail: str
    tests: list[ProofTest] = []
    compile_error: str | None = None  # the base's first error when it did not compile
    base_trx: list[str] = []
    head_trx: list[str] = []
    duration_s: float = 0.0


class AttemptRecord(Model):
    """How one attempt ended: its reason, the provider failures retried inside it, its time."""

    attempt: int
    reason: AttemptReason
    detail: str = ""
    infra_retries: list[InfraRetry] = []
    started_at: str | None = None
    ended_at: str
    duration_s: float = 0.0
    counted: bool = True  # False: an infrastructure ending that gave the agent call back


METADATA_PENDING = "pending"  # commits.metadata between completion and the metadata commit


class Record(Model):
    """A record written as it was given: only the fields it was made with (or read from the file
    with) are written back, so a field a writer never sets stays absent — a round that never got
    a report, a preflight not read from its cache — and an index.json written before these
    records were typed reads and writes back byte-identically."""

    @model_serializer(mode="wrap")
    def _as_given(self, handler: SerializerFunctionWrapHandler) -> dict:
        return {k: v for k, v in handler(self).items() if k in self.model_fields_set}


class CommandRecord(Record):
    """One dotnet call of a validation (`validation.dotnet.Run.dotnet`)."""

    stage: str
    command: str
    exit_code: int | None = None
    duration_s: float = 0.0
    timed_out: bool = False


class ProjectRecord(Record):
    """The TRX totals of one test project (`validation.dotnet.run_tests`)."""

    project: str
    verdict: str
    total: int = 0
    executed: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failed_tests: list[str] = []
    skipped_tests: list[str] = []
    trx: str | None = None


class NamesSideBySide(Record):
    base: list[str] = []
    attempt: list[str] = []


class CountSideBySide(Record):
    base: int = 0
    attempt: int = 0


class BaselineRecord(Record):
    """Base and attempt side by side under `judge: regressions` (`validation.baseline.compare`)."""

    base_commit: str | None = None
    warnings: NamesSideBySide = NamesSideBySide()
    failing_tests: NamesSideBySide = NamesSideBySide()
    skipped_tests: NamesSideBySide = NamesSideBySide()
    executed: CountSideBySide = CountSideBySide()
    new_warnings: list[str] = []
    new_failing_tests: list[str] = []
    new_skipped_tests: list[str] = []


class ValidationRecord(Model):
    """An attempt's validation verdict as its step keeps it: `validation.dotnet.ValidationReport`
    as data (the same fields, in order; a test holds them equal)."""

    passed: bool
    mode: str
    stage: str
    message: str
    command: str | None = None
    exit_code: int | None = None
    total: int = 0
    executed: int = 0
    passed_tests: int = 0
    failed: int = 0
    skipped: int = 0
    failing_tests: list[str] = []
    logs: list[str] = []
    tail: str = ""
    target_found: bool = True
    notes: list[str] = []
    blame: str = "attempt"
    judge: str = "absolute"
    sdk_version: str | None = None
    target: str | None = None  # the target policy's framework (net8.0, net10.0)
    commands: list[CommandRecord] = []  # every dotnet call: command, stage, exit code, duration
    projects: list[ProjectRecord] = []  # TRX totals per test project, failed and skipped names
    warnings: list[str] = []  # build warnings seen (regressions judge), repo-relative
    baseline: BaselineRecord | None = None  # base and attempt side by side (regressions judge)


class PreflightRecord(Record, ValidationRecord):
    """The base tree's validation before a step's first agent call (`validation.preflight`): the
    ValidationReport's fields, then where and when it ran; `cache` only when read from it."""

    commit: str | None = None  # the base commit validated (None: a folder outside git)
    checked_at: str | None = None
    cached: bool = False  # reused from the cache of a passing base, not run for this step
    cache: str | None = None  # that cache file


class ReviewUsage(Model):
    """The tokens of a review round's evaluator sessions together (`Usage` without attempt and
    role: the round is the attempt, the role is the evaluator's; no task: a review is of a node)."""

    thread_id: str | None = None
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0


class QaCheckRecord(Record):
    """One probe or page of a round's QA (`validation.qa.QaCheck` as data)."""

    id: str
    kind: Literal["probe", "page"]
    status: Literal["passed", "failed", "skipped"]
    detail: str
    files: list[str] = []


class QaRecord(Record):
    """A round's QA against the running application: `validation.qa.QaReport.as_record()` (its
    fields but the logs, checks last)."""

    status: Literal["passed", "failed", "skipped"]
    reason: str
    stage: str
    commit: str | None = None
    tree: str | None = None
    url: str | None = None
    evidence: str | None = None
    duration_s: float = 0.0
    notes: list[str] = []  # how the application was run, e.g. on a newer runtime
    checks: list[QaCheckRecord] = []


class ReviewRecord(Record):
    """One evaluator round of a node with `review:`, in the order its writers set the fields.
    A round stopped before the evaluator's report (QA required but skipped, the session's
    environment failed) has no scores, report or denials."""

    round: int
    verdict: Literal["PASS", "BLOCK", "MALFORMED"]
    reason: str
    scores: dict[str, int] = {}  # criterion id -> 0..10, declared order
    report: str | None = None  # the saved report, relative to the harness root
    sandbox_denials: list[str] = []  # commands the read-only sandbox refused
    thread_id: str | None = None
    transcript: str | None = None  # the session's JSONL, relative to the harness root
    reasked: str | None = None  # why the round's first report could not be read
    usage: ReviewUsage | None = None
    qa_status: Literal["passed", "failed", "skipped"] | None = None
    qa: QaRecord | None = None


class ContractRecord(Model):
    """A sprint contract (`execution.contract`) as agreed, or the last one proposed: where it is,
    its sha256, the tests it names, and the evaluator's rounds on it."""

    path: str  # relative to the harness root
    sha256: str
    tests: list[str] = []
    agreed: bool = False
    rounds: int = 0
    reason: str = ""  # the evaluator's last reason


TaskStatus = Literal["pending", "running", "built", "merged", "failed", "blocked"]


class TaskRecord(Model):
    """One task of a fan-out node (`execution.fan_out`): its own codex sessions (at most
    MAX_ATTEMPTS calls), worktree and branch; `built` = validated on its own tree and committed
    there, waiting for its merge into the node's tree; `merged` = in the node's tree and the
    node's validation passed after the merge."""

    id: str
    title: str
    needs: list[str] = []
    paths: list[str] = []
    tests: list[str] = []
    status: TaskStatus = "pending"
    attempts: Count = 0
    base_commit: str | None = None
    branch: str | None = None
    worktree: str | None = None
    commits: dict[str, str | None] = {}  # product (on its branch) / merge (into the node's tree)
    usage: list[Usage] = []
    last_failure: str | None = None
    error: str | None = None  # why it failed for good or is blocked
    started_at: str | None = None
    finished_at: str | None = None
    contract: ContractRecord | None = None
    duration_s: float = 0.0  # its sessions and their verification, together
    merge_s: float = 0.0  # its merges into the node's tree with the node's validation
    infra_retries: list[InfraRetry] = []  # its sessions the provider failed, retried
    owner: Owner | None = None  # the process running its sessions (cleared when it stops)
    ran_on: RanOn | None = None  # where its last session ran (kept)


class Step(Model):
    step: Count
    name: str
    phase: str
    needs: list[str] = []
    status: StepStatus = "pending"
    context_files: list[str] = []
    validation: str = "full"
    attempts: Count = 0
    started_at: str | None = None
    completed_at: str | None = None
    error_message: str | None = None
    failed_at: str | None = None
    blocked_reason: str | None = None
    blocked_at: str | None = None
    last_failure: str | None = None
    handoff: dict[str, FileRef] = {}
    consumed: dict[str, FileRef] = {}
    revisions: list[Revision] = []
    usage: list[Usage] = []
    summary: str | None = None
    base_commit: str | None = None
    commits: dict[str, str | None] = {}  # product / metadata SHAs of the completing attempt
    validation_report: ValidationRecord | None = None
    reviews: list[ReviewRecord] = []  # evaluator rounds, oldest first
    gates: list[str] = []
    owner: Owner | None = None
    ran_on: RanOn | None = None  # where its last attempt ran (set at the claim, kept after it)
    feedback: str | None = None  # a person's reopen reason or gate rejection, for the next prompt
    delivery_handoff: str | None = None  # sha256 of docs/phase/<d>/handoff.md as it completed
    preparation: str | None = None  # what the executor did to the worktree before attempt 1
    preflight: PreflightRecord | None = None  # the base tree's validation before the first call
    # A node that may run beside others works in its own worktree on its own branch
    # (`feat-<d>+<node>`, from the merge of its upstream nodes' results), merged into
    # feat-<d> when it completes; `worktree` is set while that worktree exists.
    worktree: str | None = None
    branch: str | None = None
    result_commit: str | None = None  # the commit holding this node's completed work
    tasks: list[TaskRecord] = []  # a fan-out node's tasks, in task order
    contract: ContractRecord | None = None  # its sprint contract (`execution.contract`)
    attempt_log: list[AttemptRecord] = []  # how each attempt ended, oldest first
    integrity: list[IntegrityFinding] = []  # the guard's findings on the last verified attempt
    proof: ProofRecord | None = None  # the fail-before, pass-after proof of that attempt
    evidence: FileRef | None = None  # its evidence.json, written as it completed


class Event(Model):
    at: str
    event: str
    step: str | None = None
    detail: str = ""


class Approval(Model):
    gate: str
    decision: Literal["approved", "rejected"]
    note: str = ""
    at: str
    revision: int = 0  # > 0: this decision changed an earlier one on the same gate
    used_at: str | None = None  # when the action it allowed used it up (each push needs its own)
    used_by: str | None = None  # what used it: `push feat-<delivery> <commit>`
    by: str | None = None  # who decided: `user@host` of the process that recorded it


class Risk(Model):
    """A `risk` gate raised at run time by an agent (a risk.md in its node folder) or a check."""

    node: str
    path: str
    raised_at: str
    # the file as it was raised: an approval decides that text, and an edit after it is a new
    # risk (None in a state written before the field: such a file is never taken as decided)
    sha256: str | None = None


class Delivery(Model):
    schema_version: int = SCHEMA_VERSION
    project: str
    phase: str
    workflow: str
    status: StepStatus = "pending"
    request: str
    target: str
    platforms: list[str] = []
    # where each platform came from: the target's project file that shows it, or `--platform`
    platforms_from: dict[str, str] = {}
    worktree: str | None = None  # relative to the harness root when inside it
    branch: str | None = None
    base_commit: str | None = None  # feat-<d> when its worktree was made: where root nodes start
    created_at: str
    updated_at: str
    snapshot: Snapshot
    steps: list[Step]
    history: list[Event] = []
    approvals: list[Approval] = []
    risks: list[Risk] = []
    budget_tokens: int | None = Field(default=None, gt=0)  # token budget (workflow or `new`)
    budget_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)  # USD (same)
    judge: Literal["absolute", "regressions"] | None = None  # `new --judge`: over every phase's

    def get_step(self, name: str) -> Step:
        return get_step(self, name)

    def log(self, event: str, step: str | None = None, detail: str = "") -> None:
        self.history.append(Event(at=now_iso(), event=event, step=step, detail=detail))

    # The step transitions (DESIGN §5). Each one checks the move against TRANSITIONS, logs it and
    # sets the fields the new status implies; nothing else sets `status`.

    def move(self, step: Step, to: StepStatus, via: Via) -> None:
        """Change a step's status if DESIGN §5 allows `via` to make that move; log it."""
        allowed = TRANSITIONS.get((step.status, to), frozenset())
        if via not in allowed:
            raise StateError(f"phases/{self.phase}/index.json: steps[{step.step}] "
                             f"(`{step.name}`): `{via}` cannot move a `{step.status}` step to "
                             f"`{to}`")
        if step.status != to:
            self.log(f"{step.status}->{to}", step.name, via)
        step.status = to

    def start(self, step: Step, owner: Owner) -> None:
        """→ running: one more attempt, owned by `owner` (an interrupted one is taken over)."""
        self.move(step, "running", "run")
        step.attempts += 1
        step.started_at = step.started_at or now_iso()
        step.owner = owner

    def block(self, step: Step, reason: str) -> None:
        """pending|running → blocked: a gate, a budget or the environment; a person acts."""
        self.move(step, "blocked", "run")
        step.blocked_reason, step.blocked_at = reason, now_iso()

    def unblock(self, step: Step) -> None:
        """blocked → pending: the gate it waited for is approved."""
        self.move(step, "pending", "approve")
        step.blocked_reason = step.blocked_at = None

    def give_back(self, step: Step, reason: str) -> None:
        """running → blocked by the provider's failure: the agent call it made is given back
        (an `infrastructure` ending does not count against MAX_ATTEMPTS)."""
        self.block(step, reason)
        step.attempts = max(0, step.attempts - 1)

    def complete(self, step: Step, handoff: dict[str, FileRef], summary: str | None,
                 delivery_handoff: str | None) -> None:
        """running → completed with its handoffs; the failure and feedback it answered go."""
        self.move(step, "completed", "run")
        step.handoff, step.last_failure, step.feedback = handoff, None, None
        step.delivery_handoff = delivery_handoff
        step.summary = summary or step.summary
        step.completed_at = now_iso()
        self.log("completed", step.name, f"attempt {step.attempts}")

    def fail(self, step: Step, message: str) -> None:
        """running → error: its budget is spent or it cannot go on; `resume` starts it anew."""
        self.move(step, "error", "run")
        step.owner = None
        step.error_message, step.failed_at = message, now_iso()

    def resume(self, step: Step) -> None:
        """error|blocked → pending with a fresh attempt budget."""
        self.move(step, "pending", "resume")
        step.error_message = step.failed_at = step.blocked_reason = step.blocked_at = None
        step.attempts = 0
        for task in step.tasks:  # a fan-out's failed tasks get a fresh budget; merged ones stay
            if task.status in ("failed", "blocked"):
                task.status, task.attempts, task.error = "pending", 0, None

    def reopen(self, step: Step, feedback: str | None) -> None:
        """→ pending with nothing of its last run: no handoff, commits, owner or attempts."""
        self.move(step, "pending", "reopen")
        step.handoff, step.consumed, step.commits = {}, {}, {}
        step.base_commit = step.validation_report = step.delivery_handoff = None
        step.result_commit = step.contract = None
        step.tasks, step.attempt_log, step.integrity = [], [], []
        step.evidence = step.proof = None
        step.preparation = step.preflight = None
        step.started_at = step.completed_at = step.owner = step.ran_on = None
        step.error_message = step.failed_at = step.blocked_reason = step.blocked_at = None
        step.attempts, step.last_failure = 0, None
        if feedback:
            step.feedback = feedback


class IndexEntry(Model):
    id: str
    workflow: str
    status: StepStatus
    created_at: str
    updated_at: str


class Index(Model):
    schema_version: int = SCHEMA_VERSION
    deliveries: list[IndexEntry] = []


def derive_status(steps: list[Step]) -> StepStatus:
    statuses = {s.status for s in steps}
    if statuses == {"completed"}:
        return "completed"
    for status in ("running", "error", "blocked"):
        if status in statuses:
            return status  # type: ignore[return-value]
    return "pending"
