"""Delivery state on disk: reading a state file (size cap, exact errors, migration), the
delivery's own rules checked before use, and `Store` — paths, the per-delivery lock and atomic
transactions over `phases/`. Nothing here knows Dagster or how a step runs."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from specops_dag.delivery.model import SCHEMA_VERSION, Delivery, Index, IndexEntry, M, derive_status
from specops_dag.errors import StateError, UsageError
from specops_dag.files import now_iso, write_bytes_atomic, write_json_atomic
from specops_dag.locking import held, lock_holder  # noqa: F401 — lock_holder: part of this API


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
    return parse_model(read_capped(path, where), where, model)


def read_capped(path: Path, where: str) -> bytes:
    """A state file's bytes, refused past the size cap before anything is read."""
    if path.stat().st_size > MAX_STATE_BYTES:
        raise StateError(f"{where}: larger than {MAX_STATE_BYTES:,} bytes, more than any "
                         "state specops writes; restore it from git")
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


def parse_model(raw: bytes, where: str, model: type[M]) -> M:
    """The bytes of `where` parsed and validated, or a StateError naming the file, the field and
    the fix."""
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
    from specops_dag.delivery.queries import (  # standard library only, like this module's use
        state_problem,
    )

    problem = state_problem(state, delivery)
    if problem:
        raise StateError(f"{where}: {problem}; fix the file or restore it from git")
    return state


# Per state file (its real path): the bytes a store of this process last wrote there and the
# state parsed back from exactly those bytes (the check that what is written reads back as
# valid), not yet handed to anyone. The next read that finds those same bytes, through any
# `Store` of this process (a Dagster run makes one per step), takes it instead of parsing them
# again — equal bytes parse to an equal state, whoever wrote them since.
WRITTEN: dict[str, tuple[bytes, Delivery]] = {}


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
        return self._read(delivery)[0]

    def _read(self, delivery: str) -> tuple[Delivery, bytes | None]:
        """The state, and its bytes when they are exactly what `write` makes of it (the store's
        own last write, found unchanged); None for a file written otherwise (by hand, say)."""
        path = self.index_path(delivery)
        where = f"phases/{delivery}/index.json"
        if not path.is_file():
            raise UsageError(f"unknown delivery `{delivery}`: {where} not found; list deliveries "
                             "with `specops status` or create one with `specops new`")
        raw = read_capped(path, where)
        written = WRITTEN.pop(os.path.realpath(path), None)  # atomic: one reader takes it, once
        if written is not None and written[0] == raw:
            return written[1], raw
        return check_delivery(parse_model(raw, where, Delivery), delivery, where), None

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
            state, before = self._read(delivery)
            if before is None:  # serialised in Rust: cheap at any size
                before = render(state)
            yield state
            after = render(state)
            if after != before:
                self.write(state, after)

    def write(self, state: Delivery, text: bytes | None = None) -> None:
        """Write `state` with its status derived and `updated_at` now. `text` is `render(state)`
        as it is (the transaction's change check): written as it is when neither field moves,
        as for most writes of one step (`updated_at` counts whole seconds)."""
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
        # Rust JSON, the collector paused), and that parse serves the next read of these bytes.
        with collector_paused():
            back = Delivery.model_validate_json(text)
        WRITTEN.pop(key, None)
        write_bytes_atomic(path, text)
        # kept only as a read would accept it; else the next read parses and says what is wrong
        if back.schema_version == SCHEMA_VERSION and state_problem(back, state.phase) is None:
            WRITTEN[key] = (text, back)
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
    spaces, and no JSON string holds a raw newline, so each key's line is found exactly."""
    for key, value in (("status", status), ("updated_at", updated_at)):
        mark = TOP_LEVEL[key]
        start = text.find(mark)
        if start < 0 or not value.isascii() or text.find(mark, start + 1) >= 0:
            return None
        begin = start + len(mark)
        end = text.find(b"\n", begin)
        if end < 0:
            return None
        if text[end - 1:end] == b",":
            end -= 1
        text = text[:begin] + json.dumps(value).encode() + text[end:]
    return text


def render(state: Delivery) -> bytes:
    """The bytes of a state file: pydantic's own JSON, indented, with a final newline."""
    return state.__pydantic_serializer__.to_json(state, indent=2, by_alias=True) + b"\n"
