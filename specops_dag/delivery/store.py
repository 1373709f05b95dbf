"""Delivery state on disk: reading a state file (size cap, exact errors, migration), the
delivery's own rules checked before use, and `Store` — paths, the per-delivery lock, the leases
of running steps and atomic transactions over `phases/`. Nothing here knows Dagster or how a
step runs."""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from specops_dag.delivery.model import (
    SCHEMA_VERSION,
    Delivery,
    Event,
    Index,
    IndexEntry,
    M,
    Step,
    derive_status,
)
from specops_dag.errors import SpecopsError, StateError, UsageError
from specops_dag.files import now_iso, write_bytes_atomic, write_json_atomic
from specops_dag.locking import OWNERS, Lease, held, lock_holder  # noqa: F401 — lock_holder: API


def migrate(data: dict, where: str) -> dict:
    """The one migration point: upgrade older schema versions here; refuse newer ones."""
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise StateError(f"{where}: schema_version {version!r} is not supported (this specops "
                         f"reads {SCHEMA_VERSION}); upgrade specops-dag or restore the file")
    return data


def restore_advice(where: str, root: Path | None = None) -> str:
    """How to get a broken file of the harness root `root` back (`where`: its path relative to
    that root). Git is named only when it can give the file back: the harness root is a git
    repository and some commit of it holds that path (a metadata commit on feat-<d>); a
    plain-folder root, a file never committed (a delivery before its first metadata commit,
    a separate target's) or an unknown root gets the backup alone."""
    if root is None or not committed(root, where):
        return "restore it from a backup"
    return (f"restore it from a backup, or from git, where a commit holds it (`git log --all -- "
            f"{where}` lists the commits)")


def committed(root: Path, where: str) -> bool:
    """Whether a commit of any ref of the harness root's repository holds the path `where`
    (`git log --all -1 -- <where>`, taken literally); False for a root that is no git
    repository (`gitflow.is_repository`) or when git cannot answer."""
    from specops_dag.gitflow import is_repository, run_git  # only on an error's way out

    if not is_repository(root):
        return False
    try:
        found = run_git(root, "--literal-pathspecs", "log", "--all", "--format=%H", "-1", "--",
                        where)
    except (SpecopsError, OSError):  # git not installed, the root gone
        return False
    return found.ok and bool(found.stdout.strip())


MAX_STATE_BYTES = 64 << 20  # a 3,000-node delivery's state is a few MiB
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abAB]")  # a `\ud800`-style half of a pair


def read_model(path: Path, where: str, model: type[M], root: Path | None = None) -> M:
    """A state file parsed and validated, or a StateError naming the file, the field and the fix
    (`root`: the harness root `where` is relative to, see `restore_advice`)."""
    return parse_model(read_capped(path, where, root), where, model, root)


def read_capped(path: Path, where: str, root: Path | None = None) -> bytes:
    """A state file's bytes, refused past the size cap before anything is read."""
    if path.stat().st_size > MAX_STATE_BYTES:
        raise StateError(f"{where}: larger than {MAX_STATE_BYTES:,} bytes, more than any "
                         f"state specops writes; {restore_advice(where, root)}")
    return path.read_bytes()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Parsing a state allocates thousands of objects and makes no reference cycle, so the cyclic
    collector has nothing to free meanwhile; left on, it re-scans the half-built state many times
    over (a third of the parse at 200 steps). Restored as it was, also on an error."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def parse_model(raw: bytes, where: str, model: type[M], root: Path | None = None) -> M:
    """The bytes of `where` parsed and validated, or a StateError naming the file, the field and
    the fix (`root`: the harness root `where` is relative to, see `restore_advice`)."""
    try:
        if not SURROGATE_ESCAPE.search(raw):  # the common case, parsed and checked in Rust
            try:
                with collector_paused():
                    parsed = model.model_validate_json(raw)
                if getattr(parsed, "schema_version", SCHEMA_VERSION) == SCHEMA_VERSION:
                    return parsed
            except (ValidationError, RecursionError):
                pass  # the path below names exactly what is wrong
        text = raw.decode("utf-8")
        data = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise StateError(f"{where}: not valid JSON ({err}); {restore_advice(where, root)}") from err
    except RecursionError:
        raise StateError(f"{where}: nested too deeply to be a specops state file; "
                         f"{restore_advice(where, root)}") from None
    try:  # only a `\u` escape can hold a lone surrogate: files without one skip the re-dump
        if "\\u" in text:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as err:  # a `\ud800` escape decodes to a lone surrogate
        raise StateError(f"{where}: an escape `\\u{ord(err.object[err.start]):04x}` is half of "
                         "a UTF-16 surrogate pair, not a character; fix the file or "
                         f"{restore_advice(where, root)}") from None
    try:
        return model.model_validate(migrate(data, where) if isinstance(data, dict) else data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        raise StateError(f"{where}: {loc.lstrip('.') or '(top level)'}: {first['msg']}; fix "
                         f"the file or {restore_advice(where, root)}") from err


def check_delivery(state: Delivery, delivery: str, where: str,
                   root: Path | None = None) -> Delivery:
    """The state's own rules, checked before any use (see `reading.state_problem`)."""
    from specops_dag.delivery.queries import (  # standard library only, like this module's use
        state_problem,
    )

    problem = state_problem(state, delivery)
    if problem:
        raise StateError(f"{where}: {problem}; fix the file or {restore_advice(where, root)}")
    return state


# Per state file (its real path): the bytes a store of this process last wrote there and a state
# equal to a fresh parse of exactly those bytes, not yet handed to anyone — parsed back from them
# (`shared` False) or, after a transaction of one step, made of that step and the top level parsed
# back from them and the other steps as the transaction left them (`shared` True: those objects
# are also the transaction's caller's, see `Store.transaction`). The next read that finds those
# same bytes, through any `Store` of this process (a Dagster run makes one per step), takes it
# instead of parsing them again — equal bytes parse to an equal state, whoever wrote them since.
@dataclass(frozen=True)
class Written:
    text: bytes
    state: Delivery
    shared: bool
    layout: Layout | None = None  # where the last transaction of one step found its parts


WRITTEN: dict[str, Written] = {}


class Store:
    """The `phases/` folder of one harness root. Every write goes through `transaction`."""

    def __init__(self, root: Path, lock_timeout_s: float = 10.0) -> None:
        self.root = Path(root)
        self.phases = self.root / "phases"
        self.lock_timeout_s = lock_timeout_s
        self.leases: dict[tuple[str, str], Lease] = {}

    def delivery_dir(self, delivery: str) -> Path:
        return self.phases / delivery

    def index_path(self, delivery: str) -> Path:
        return self.phases / delivery / "index.json"

    def exists(self, delivery: str) -> bool:
        return self.index_path(delivery).is_file()

    def read(self, delivery: str) -> Delivery:
        return self._read(delivery)[0]

    def _read(self, delivery: str, step: str | None = None
              ) -> tuple[Delivery, bytes | None, Layout | None]:
        """The state, and its bytes when they are exactly what `write` makes of it (the store's
        own last write, found unchanged, with where its last transaction of one step found its
        parts); None for a file written otherwise (by hand, say). Only a transaction of one step
        takes a state whose other steps are shared (see `transaction`); any other reader gets a
        state of its own."""
        path = self.index_path(delivery)
        where = f"phases/{delivery}/index.json"
        if not path.is_file():
            raise UsageError(f"unknown delivery `{delivery}`: {where} not found; list deliveries "
                             "with `specops status` or create one with `specops new`")
        raw = read_capped(path, where, self.root)
        key = os.path.realpath(path)
        written = WRITTEN.get(key)
        if written is not None and (step is not None or not written.shared) and \
                WRITTEN.pop(key, None) is written and written.text == raw:  # one reader takes it
            if written.shared:  # the step to change becomes this transaction's own object
                own(written.state, raw, step, written.layout)
            return written.state, raw, written.layout
        return check_delivery(parse_model(raw, where, Delivery, self.root), delivery, where,
                              self.root), None, None

    def read_index(self) -> Index:
        path = self.phases / "index.json"
        if not path.is_file():
            return Index()
        return read_model(path, "phases/index.json", Index, self.root)

    @contextlib.contextmanager
    def lock(self, name: str, what: str) -> Iterator[None]:
        """An exclusive flock on `phases/<name>`. Taking it never writes: a command that fails
        under the lock leaves the tree byte-identical (the file is created once, empty)."""
        with held(self.phases / name, what, self.lock_timeout_s, self.root):
            yield

    def lease(self, delivery: str, node: str) -> Path:
        """Write this process's owner record of its claim of `node` (`phases/<d>/.owners/
        <node>.json`, replacing a dead owner's) and renew it until `release`: another host
        judges the step's owner by it. Taken under the delivery's lock, before the claim is
        written, so no claim is ever without it. Returns its absolute path (the same on every
        host: the harness root is mounted at one path everywhere)."""
        self.release(delivery, node)
        path = Path(os.path.abspath(self.phases / delivery / OWNERS / f"{node}.json"))
        self.leases[delivery, node] = Lease(path)
        return path

    def release(self, delivery: str, node: str) -> None:
        """Stop renewing the owner record of `node` and remove it (if this process took one)."""
        lease = self.leases.pop((delivery, node), None)
        if lease is not None:
            lease.end()

    @contextlib.contextmanager
    def transaction(self, delivery: str, step: str | None = None, *,
                    step_only: bool = False) -> Iterator[Delivery]:
        """Read under the delivery's lock, let the caller change it, write it back atomically
        — only if it changed: a transaction that decides nothing (a completed step reused, a
        step not runnable yet) leaves the files as they were.

        `step` names the one step the caller changes — with the top-level fields, new history
        events and the steps that need it (the risk gate it raises): the transactions of one
        step of a run. What it writes is the whole state rendered, but only what changed of
        those, the top level and the new events are parsed back; the other steps' bytes did not
        change and the next such transaction is handed the same objects. Any other change
        (another step, an event rewritten: a caller changed state it was not handed to change)
        is refused before anything is written: the render of the other steps is that proof.

        `step_only` (with `step`): the caller changes nothing but that step, the top level and
        new events, and what is written is made of those alone (`spliced`): every other step's
        bytes are the ones it read, by construction, so no other step is rendered to prove it
        (a whole render is the largest cost that grows along a chain; a step's claim and its
        metadata commit are such transactions, its verdict renders the whole state). A change
        to another step (even one that needs it) is then not written; the state the next
        transaction is handed still holds it, as it holds a change made after a transaction
        ended: that transaction's render refuses it unless it may change that step."""
        if not self.exists(delivery):
            self.read(delivery)  # raises the "unknown delivery" error
        with self.lock(f"{delivery}/.lock", f"phases/{delivery}/index.json"):
            state, before, layout = self._read(delivery, step)
            if before is None:  # serialised in Rust: cheap at any size
                before = render(state)
            events = len(state.history)
            yield state
            after = (step_only and step is not None and spliced(state, before, step, events,
                                                                layout)) or render(state)
            if after != before:
                self.write(state, after, Scope(step, before, events, layout) if step else None)

    def write(self, state: Delivery, text: bytes | None = None,
              scope: Scope | None = None) -> None:
        """Write `state` with its status derived and `updated_at` now. `text` is `render(state)`
        as it is (the transaction's change check): written as it is when neither field moves,
        as for most writes of one step (`updated_at` counts whole seconds). `scope`: the
        transaction of one step that made the change (see `transaction`)."""
        from specops_dag.delivery.queries import (  # standard library only, like this module's use
            delivery_status,
            state_problem,
        )

        status = delivery_status(state, derive_status(state.steps))  # an open risk: blocked
        stamp = now_iso()
        if text is None or (status, stamp) != (state.status, state.updated_at):
            state.status, state.updated_at = status, stamp
            text = (text is not None and restamped(text, status, stamp)) or render(state)
        path = self.index_path(state.phase)
        key = os.path.realpath(path)
        # What is written must read back as valid state: it is parsed back here (pydantic's
        # Rust JSON, the collector paused) — all of it, or the part a transaction of one step
        # could have changed — and that parse serves the next read of these bytes.
        parsed = scope.parse_back(state, text) if scope is not None else None
        back, layout = parsed if parsed is not None else (None, None)
        if back is None:
            with collector_paused():
                back = Delivery.model_validate_json(text)
        WRITTEN.pop(key, None)
        write_bytes_atomic(path, text)
        # kept only as a read would accept it; else the next read parses and says what is wrong
        # (a state parsed back in part was checked before: its new parts are checked here)
        if back.schema_version == SCHEMA_VERSION and state_problem(
                back, state.phase, layout.spans if layout is not None else None) is None:
            WRITTEN[key] = Written(text, back, shared=scope is not None, layout=layout)
        self.update_index(state)

    def update_index(self, state: Delivery) -> None:
        with self.lock(".index.lock", "phases/index.json"):
            index = self.read_index()
            entry = IndexEntry(id=state.phase, workflow=state.workflow, status=state.status,
                               created_at=state.created_at, updated_at=state.updated_at)
            rest = [e for e in index.deliveries if e.id != state.phase]
            index.deliveries = sorted(rest + [entry], key=lambda e: e.id)
            write_json_atomic(self.phases / "index.json", index.model_dump())


TOP_LEVEL = {key: b'\n  "' + key.encode() + b'": ' for key in ("status", "updated_at")}


def restamped(text: bytes, status: str, updated_at: str) -> bytes | None:
    """`render(state)` once only its top-level `status` and `updated_at` moved, made from `text`
    (its render before they did) without serialising the whole state again; None when `text`
    is not laid out as `render` lays it out. A top-level key is the only one indented by two
    spaces, and no JSON string holds a raw newline, so each key's line is found exactly, among
    the lines before the steps (the rest of the file is not read)."""
    head, cuts = text.find(STEPS), []  # both keys come before the steps
    for key, value in (("status", status), ("updated_at", updated_at)):
        mark = TOP_LEVEL[key]
        start = text.find(mark, 0, head)
        if start < 0 or not value.isascii() or text.find(mark, start + 1, head) >= 0:
            return None
        begin = start + len(mark)
        end = text.find(b"\n", begin)
        if end < 0:
            return None
        if text[end - 1:end] == b",":
            end -= 1
        cuts.append((begin, end, json.dumps(value).encode()))
    cuts.sort()  # one copy of the file, whichever key comes first
    parts, at = [], 0
    for begin, end, value in cuts:
        parts += [text[at:begin], value]
        at = end
    return b"".join([*parts, text[at:]])


# What `render` makes of a state whose steps and history are empty, between the field before
# them and the one after (both exist: `steps` is not the first field, `history` not the last).
EMPTY_ARRAYS = b'\n  "steps": [],\n  "history": [],'


def spliced(state: Delivery, before: bytes, name: str, events: int,
            layout: Layout | None) -> bytes | None:
    """`render(state)` for a transaction that changed only step `name`, the top level and the
    events after the first `events`, made from `before` (the bytes it read): the top level
    rendered without the two arrays, step `name` and the new events rendered alone and indented
    as they sit in the file, every other step and the earlier events taken from `before` as they
    are. None when `before` is not laid out as `render` lays it out."""
    place = located(state, before, name, layout)
    old = regions(before, layout and layout.regions[1])
    if place is None or old is None:
        return None
    at, span = place
    shell = render(state.model_copy(update={"steps": [], "history": []}))
    cut = shell.find(EMPTY_ARRAYS)
    if cut < 0 or shell.find(EMPTY_ARRAYS, cut + 1) >= 0:
        return None
    start, end, first, last = old
    added = [nested(event) for event in state.history[events:]]
    history = before[first:last]
    if added:
        history += (b",\n" if history else b"\n") + b",\n".join(added)
    return b"".join((
        shell[:cut], STEPS, before[start:span[0]], nested(state.steps[at]),
        before[span[1]:end], STEPS_END, history, b"\n  ]" if history else b"]", b",",
        shell[cut + len(EMPTY_ARRAYS):]))


def nested(item: Step | Event) -> bytes:
    """An item of a top-level array as `render` writes it there: its own indented JSON, every
    line moved in by four spaces (no JSON string holds a raw newline)."""
    return b"    " + item.__pydantic_serializer__.to_json(item, indent=2, by_alias=True).replace(
        b"\n", b"\n    ")


def render(state: Delivery) -> bytes:
    """The bytes of a state file: pydantic's own JSON, indented, with a final newline."""
    return state.__pydantic_serializer__.to_json(state, indent=2, by_alias=True) + b"\n"


def own(state: Delivery, text: bytes, step: str | None, layout: Layout | None = None) -> None:
    """Replace `step` in `state` (parsed from `text` but for its shared steps) with a fresh parse
    of its bytes, so that what the transaction changes is no one else's object."""
    place = located(state, text, step, layout)
    if place is not None:
        at, (start, end) = place
        with collector_paused():
            state.steps[at] = Step.model_validate_json(text[start:end])


def located(state: Delivery, text: bytes, name: str | None, layout: Layout | None
            ) -> tuple[int, tuple[int, int]] | None:
    """Step `name`'s index in `state` and its span in `text` (looked at first where `layout`
    recorded it), or None when there is no such step or its bytes are not found."""
    found = next((i for i, s in enumerate(state.steps) if s.name == name), None)
    if found is None:
        return None
    near = layout.spans.get(name) if layout is not None else None
    span = step_span(text, state.steps[found], near and near[0])
    return None if span is None else (found, span)


# Where `render`'s bytes hold what a transaction of one step changes, found from the layout
# alone: a top-level key is the only line indented by two spaces, an item of a top-level array
# begins and ends with the only lines indented by four, and no JSON string holds a raw newline —
# so each mark below is found only where it is meant, and a step only by its own first lines.
STEPS, HISTORY, ARRAY_END = b'\n  "steps": [', b'\n  "history": [', b"\n  ]"
ITEM_END = b"\n    }"
STEPS_END = ARRAY_END + b"," + HISTORY
# The history array ends where the line of the next top-level key begins.
HISTORY_END = ARRAY_END + b',\n  "%s": ' % list(Delivery.model_fields)[
    list(Delivery.model_fields).index("history") + 1].encode()


@dataclass(frozen=True)
class Layout:
    """Where a transaction of one step found the parts it looked at in the bytes it wrote: the
    spans inside the steps array's and the history array's brackets (`regions`) and those of the
    steps it parsed back (`step_span`). The next transaction of those same bytes checks each
    mark where it was (`bytes.startswith` at the offset) instead of searching the file for it:
    finding the 200th step costs what finding the first does."""
    regions: tuple[int, int, int, int]
    spans: dict[str, tuple[int, int]]


def step_span(text: bytes, step: Step, near: int | None = None) -> tuple[int, int] | None:
    """Where `step`'s object is in `text` (the bytes of `render`), or None; looked at first
    where `near` says it begins, then searched for."""
    mark = b'\n    {\n      "step": %d,\n      "name": %s,\n' % (
        step.step, json.dumps(step.name).encode())
    if near is not None and near > 0 and text.startswith(mark, near - 1):
        start = near - 1
    else:
        start = text.find(mark)
    end = text.find(ITEM_END, start) if start >= 0 else -1
    return None if end < 0 else (start + 1, end + len(ITEM_END))


def regions(text: bytes, near: int | None = None) -> tuple[int, int, int, int] | None:
    """The spans inside the steps array's brackets and the history array's, or None; the steps'
    end is looked at first where `near` says, the history's end found from the file's end."""
    start = text.find(STEPS)
    if start < 0:
        return None
    start += len(STEPS)
    if near is not None and near >= start and text.startswith(STEPS_END, near):
        end = near
    else:
        end = text.find(STEPS_END, start)
    if end < 0 or text[start:start + 1] == b"]":
        return None
    first = end + len(STEPS_END)
    last = first if text[first:first + 1] == b"]" else text.rfind(HISTORY_END, first)
    return None if last < 0 else (start, end, first, last)


@functools.cache
def event_list() -> TypeAdapter[list[Event]]:
    """The validator of a list of history events, built once, on the first use."""
    return TypeAdapter(list[Event])


@dataclass(frozen=True)
class Scope:
    """A transaction of one step: its name, the bytes it started from and how many history
    events there were."""
    step: str
    before: bytes
    events: int
    layout: Layout | None = None  # where the parts of `before` are, when the store wrote it

    def parse_back(self, state: Delivery, text: bytes) -> tuple[Delivery, Layout] | None:
        """The state `text` holds, parsed back where this transaction could have changed it: the
        top level, this step, the steps that need it whose bytes changed and the events it
        added; the other steps are `state`'s own objects, whose bytes did not change. Returned
        with where those parts are in `text`. None when `text` or the change does not fit that
        shape (the caller parses all of it back, which also names what is invalid). Raises a
        StateError for a change outside those steps or the history's end (nothing is
        written)."""
        hints = self.layout
        old = regions(self.before, hints and hints.regions[1])
        start = text.find(STEPS)
        if old is None or start < 0:
            return None
        allowed = [i for i, s in enumerate(state.steps)
                   if s.name == self.step or self.step in s.needs]
        spans = []
        # In `text` each of them is where it was in `before`, moved by what changed before it
        # (the bytes between them are the same: checked below) — looked at there first.
        shift = start + len(STEPS) - old[0]
        for i in allowed:
            near = hints.spans.get(state.steps[i].name) if hints is not None else None
            a = step_span(self.before, state.steps[i], near and near[0])
            b = step_span(text, state.steps[i], a[0] + shift) if a is not None else None
            if a is None or b is None:
                return None
            spans.append((a, b))
            shift = b[1] - a[1]
        new = regions(text, old[1] + shift)
        if new is None:
            return None
        # the bytes between the allowed steps are equal: no other step changed
        cuts_old = [old[0], *(x for o, _ in spans for x in o), old[1]]
        cuts_new = [new[0], *(x for _, n in spans for x in n), new[1]]
        if sorted(cuts_old) != cuts_old or sorted(cuts_new) != cuts_new:
            return None
        for k in range(0, len(cuts_old), 2):
            if self.before[cuts_old[k]:cuts_old[k + 1]] != text[cuts_new[k]:cuts_new[k + 1]]:
                raise StateError(f"phases/{state.phase}/index.json: {self.stray(state, text)} "
                                 f"changed in a transaction of step `{self.step}`, which may "
                                 "change only that step and the steps that need it; nothing "
                                 "was written (a defect of specops: report it)")
        kept, added = self.before[old[2]:old[3]], text[new[2]:new[3]]
        if not added.startswith(kept) or (kept and added[len(kept):len(kept) + 1] not in (
                b"", b",")):
            raise StateError(f"phases/{state.phase}/index.json: history: an event was changed "
                             f"or removed in a transaction of step `{self.step}`; history is "
                             "append-only and nothing was written (a defect of specops: report "
                             "it)")
        fresh = added[len(kept) + 1 if kept else 0:]
        shell = text[:new[0]] + text[new[1]:new[2]] + text[new[3]:]
        steps = list(state.steps)
        try:
            with collector_paused():
                back = Delivery.model_validate_json(shell)
                for i, ((a, b), (c, d)) in zip(allowed, spans, strict=True):
                    if state.steps[i].name == self.step or self.before[a:b] != text[c:d]:
                        steps[i] = Step.model_validate_json(text[c:d])
                events = event_list().validate_json(b"[" + fresh + b"\n]") if fresh else []
        except ValidationError:
            return None
        if len(state.history) != self.events + len(events):
            return None
        back.steps = steps
        back.history = state.history[:self.events] + events
        return back, Layout(new, {state.steps[i].name: b for i, (_, b) in zip(allowed, spans,
                                                                                 strict=True)})

    def stray(self, state: Delivery, text: bytes) -> str:
        """The first step whose bytes changed outside this transaction's scope, as `steps[i]
        (`name`)` (the error path: each step is looked up on its own)."""
        for i, step in enumerate(state.steps):
            a, b = step_span(self.before, step) or (0, 0)
            c, d = step_span(text, step) or (0, 0)
            if self.before[a:b] != text[c:d]:
                return f"steps[{i}] (`{step.name}`)"
        return "a step"
