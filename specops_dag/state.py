"""Delivery state on disk (DESIGN §5): `phases/index.json` and `phases/<delivery>/index.json`.

Owns the file models, atomic writes (temp file, fsync, rename), the per-delivery lock and the
allowed step transitions. It knows nothing of Dagster or of how a step runs.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import StateError, UsageError
from .locking import held, lock_holder  # noqa: F401 — lock_holder: part of this API
from .reading import get_step

SCHEMA_VERSION = 1
StepStatus = Literal["pending", "running", "completed", "error", "blocked"]

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


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


M = TypeVar("M", bound=Model)


class FileRef(Model):
    path: str
    sha256: str


class SnapshotFile(Model):
    kind: str
    id: str
    path: str
    sha256: str
    copy_path: str = Field(alias="copy")

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class BoundSkill(Model):
    id: str
    load: str
    path: str
    sha256: str


class Snapshot(Model):
    workflow: str
    files: list[SnapshotFile]
    skills: dict[str, list[BoundSkill]] = {}


class Owner(Model):
    pid: int
    create_time: float
    host: str


class Revision(Model):
    handoff: dict[str, FileRef] = {}
    consumed: dict[str, FileRef] = {}
    commits: dict[str, str | None] = {}
    completed_at: str | None = None
    attempts: int = 0
    reopened_at: str
    reason: str


class Usage(Model):
    """Tokens of one attempt (codex reports them cumulative per thread; one thread per attempt)."""

    attempt: int
    thread_id: str | None = None
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0
    role: Literal["generator", "evaluator"] = "generator"  # whose session (a review round's)


METADATA_PENDING = "pending"  # commits.metadata between completion and the metadata commit


class Step(Model):
    step: int
    name: str
    phase: str
    needs: list[str] = []
    status: StepStatus = "pending"
    context_files: list[str] = []
    validation: str = "full"
    attempts: int = 0
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
    validation_report: dict | None = None
    reviews: list[dict] = []  # evaluator rounds: round, verdict, reason, scores, report path
    gates: list[str] = []
    owner: Owner | None = None
    feedback: str | None = None  # a person's reopen reason or gate rejection, for the next prompt
    delivery_handoff: str | None = None  # sha256 of docs/phase/<d>/handoff.md as it completed
    preparation: str | None = None  # what the executor did to the worktree before attempt 1
    preflight: dict | None = None  # the base tree's validation before the first agent call


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


class Risk(Model):
    """A `risk` gate raised at run time by an agent (a risk.md in its node folder) or a check."""

    node: str
    path: str
    raised_at: str


class Delivery(Model):
    schema_version: int = SCHEMA_VERSION
    project: str
    phase: str
    workflow: str
    status: StepStatus = "pending"
    request: str
    target: str
    platforms: list[str] = []
    worktree: str | None = None  # relative to the harness root when inside it
    branch: str | None = None
    created_at: str
    updated_at: str
    snapshot: Snapshot
    steps: list[Step]
    history: list[Event] = []
    approvals: list[Approval] = []
    risks: list[Risk] = []
    budget_tokens: int | None = None  # the delivery's token budget (workflow or `new`)
    judge: Literal["absolute", "regressions"] | None = None  # `new --judge`: over every phase's

    def get_step(self, name: str) -> Step:
        return get_step(self, name)

    def log(self, event: str, step: str | None = None, detail: str = "") -> None:
        self.history.append(Event(at=now_iso(), event=event, step=step, detail=detail))


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


def move(delivery: Delivery, step: Step, to: StepStatus, via: str) -> None:
    """Change a step's status if DESIGN §5 allows `via` to make that move; log it."""
    allowed = TRANSITIONS.get((step.status, to), frozenset())
    if via not in allowed:
        raise StateError(f"phases/{delivery.phase}/index.json: steps[{step.step}] (`{step.name}`): "
                         f"`{via}` cannot move a `{step.status}` step to `{to}`")
    if step.status != to:
        delivery.log(f"{step.status}->{to}", step.name, via)
    step.status = to


def migrate(data: dict, where: str) -> dict:
    """The one migration point: upgrade older schema versions here; refuse newer ones."""
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise StateError(f"{where}: schema_version {version!r} is not supported (this specops "
                         f"reads {SCHEMA_VERSION}); upgrade specops-dag or restore the file")
    return data


MAX_STATE_BYTES = 64 << 20  # a 3,000-node delivery's state is a few MiB
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abAB]")  # a `\ud800`-style half of a pair


def read_model(path: Path, where: str, model: type[M]) -> M:
    """A state file parsed and validated, or a StateError naming the file, the field and the fix."""
    try:
        if path.stat().st_size > MAX_STATE_BYTES:
            raise StateError(f"{where}: larger than {MAX_STATE_BYTES:,} bytes, more than any "
                             "state specops writes; restore it from git")
        raw = path.read_bytes()
        if not SURROGATE_ESCAPE.search(raw):  # the common case, parsed and checked in Rust
            try:
                parsed = model.model_validate_json(raw)
                if getattr(parsed, "schema_version", SCHEMA_VERSION) == SCHEMA_VERSION:
                    return parsed
            except (ValidationError, RecursionError):
                pass  # the path below names exactly what is wrong
        text = raw.decode("utf-8")
        data = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise StateError(f"{where}: not valid JSON ({err}); restore it from git") from err
    except RecursionError:
        raise StateError(f"{where}: nested too deeply to be a specops state file; restore it "
                         "from git") from None
    try:  # only a `\u` escape can hold a lone surrogate: files without one skip the re-dump
        if "\\u" in text:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as err:  # a `\ud800` escape decodes to a lone surrogate
        raise StateError(f"{where}: an escape `\\u{ord(err.object[err.start]):04x}` is half of "
                         "a UTF-16 surrogate pair, not a character; fix the file or restore it "
                         "from git") from None
    try:
        return model.model_validate(migrate(data, where) if isinstance(data, dict) else data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        raise StateError(f"{where}: {loc.lstrip('.') or '(top level)'}: {first['msg']}; fix "
                         "the file or restore it from git") from err


def check_delivery(state: Delivery, delivery: str, where: str) -> Delivery:
    """The state's own rules, checked before any use (see `reading.state_problem`)."""
    from .reading import state_problem  # standard library only, like this module's use

    problem = state_problem(state, delivery)
    if problem:
        raise StateError(f"{where}: {problem}; fix the file or restore it from git")
    return state


def write_json_atomic(path: Path, data: dict) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    """Temp file in the same folder, fsync, rename, fsync the folder: a reader sees the old or
    the new file, never a torn one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class Store:
    """The `phases/` folder of one harness root. Every write goes through `transaction`."""

    def __init__(self, root: Path, lock_timeout_s: float = 10.0) -> None:
        self.root = Path(root)
        self.phases = self.root / "phases"
        self.lock_timeout_s = lock_timeout_s

    def delivery_dir(self, delivery: str) -> Path:
        return self.phases / delivery

    def index_path(self, delivery: str) -> Path:
        return self.phases / delivery / "index.json"

    def exists(self, delivery: str) -> bool:
        return self.index_path(delivery).is_file()

    def read(self, delivery: str) -> Delivery:
        path = self.index_path(delivery)
        where = f"phases/{delivery}/index.json"
        if not path.is_file():
            raise UsageError(f"unknown delivery `{delivery}`: {where} not found; list deliveries "
                             "with `specops status` or create one with `specops new`")
        return check_delivery(read_model(path, where, Delivery), delivery, where)

    def read_index(self) -> Index:
        path = self.phases / "index.json"
        if not path.is_file():
            return Index()
        return read_model(path, "phases/index.json", Index)

    @contextlib.contextmanager
    def lock(self, name: str, what: str) -> Iterator[None]:
        """An exclusive flock on `phases/<name>`. Taking it never writes: a command that fails
        under the lock leaves the tree byte-identical (the file is created once, empty)."""
        with held(self.phases / name, what, self.lock_timeout_s, self.root):
            yield

    @contextlib.contextmanager
    def transaction(self, delivery: str) -> Iterator[Delivery]:
        """Read under the delivery's lock, let the caller change it, write it back atomically
        — only if it changed: a transaction that decides nothing (a completed step reused, a
        step not runnable yet) leaves the files as they were."""
        if not self.exists(delivery):
            self.read(delivery)  # raises the "unknown delivery" error
        with self.lock(f"{delivery}/.lock", f"phases/{delivery}/index.json"):
            state = self.read(delivery)
            before = state.model_dump_json(by_alias=True)  # serialised in Rust: cheap at any size
            yield state
            if state.model_dump_json(by_alias=True) != before:
                self.write(state)

    def write(self, state: Delivery) -> None:
        from .reading import delivery_status  # standard library only, like this module's use

        state.status = derive_status(state.steps)
        state.status = delivery_status(state)  # an open risk keeps a finished delivery blocked
        state.updated_at = now_iso()
        # What is written must read back as valid state; pydantic's own JSON (Rust) keeps the
        # cost of a write small next to a step however many steps the delivery has.
        text = state.model_dump_json(indent=2, by_alias=True)
        Delivery.model_validate_json(text)
        write_text_atomic(self.index_path(state.phase), text + "\n")
        self.update_index(state)

    def update_index(self, state: Delivery) -> None:
        with self.lock(".index.lock", "phases/index.json"):
            index = self.read_index()
            entry = IndexEntry(id=state.phase, workflow=state.workflow, status=state.status,
                               created_at=state.created_at, updated_at=state.updated_at)
            rest = [e for e in index.deliveries if e.id != state.phase]
            index.deliveries = sorted(rest + [entry], key=lambda e: e.id)
            write_json_atomic(self.phases / "index.json", index.model_dump())
