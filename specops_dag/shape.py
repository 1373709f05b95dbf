"""Validated reads without pydantic, for the commands that must answer at once.

`schemas.json` holds the JSON Schemas pydantic generates for the models on disk (the delivery
state, the delivery index, workflow and phase definitions). `canonical` accepts a parsed JSON
value only when it is exactly what the model would dump after validating it: every field present
in the model's order, every value of the exact type (an int where an int belongs, never `1.0` or
`"1"`), every constraint of the schema met. For such a value, pydantic's validate-then-dump
changes nothing, so reading it through `canonical` and through the model says the same thing.
Anything else, including a schema keyword this module does not know, is `NotCanonical`: the
caller hands the read over to the pydantic models, which accept it (coercing) or report the
exact error. Files specops writes are always canonical; hand-edited ones usually are not.

The schemas are generated (`python -m specops_dag.shape`); a test keeps the file equal to what
the models generate. Standard library only.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import SimpleNamespace

from .reading import sha256, sha256_file

SCHEMAS = Path(__file__).resolve().parent / "schemas.json"
IGNORED = frozenset({"title", "description", "default", "required", "$defs"})
KNOWN = IGNORED | {"$ref", "anyOf", "type", "properties", "additionalProperties",
                   "patternProperties", "const", "enum", "items", "minItems", "minLength",
                   "minimum", "maximum", "pattern"}


class NotCanonical(Exception):
    """The value is not one the model would dump as is; read it through the model instead."""


@cache
def schemas() -> dict:
    return json.loads(SCHEMAS.read_text(encoding="utf-8"))


def canonical(value: object, kind: str) -> object:
    """A read-only view of `value` (objects as attribute namespaces, maps as dicts, arrays as
    lists) if it is a canonical `kind` ("delivery", "index", "workflow", "phase")."""
    return checker(kind)(value)


Check = Callable[[object], object]


@cache
def checker(kind: str) -> Check:
    schema = schemas()["models"][kind]
    return Compiler(schema.get("$defs", {})).compile(schema)


def refuse(why: str) -> Check:
    def check(value: object) -> object:
        raise NotCanonical(why)
    return check


class Compiler:
    """Turns a schema into one function per node, once per process: a 100-node delivery is
    checked in a few milliseconds."""

    def __init__(self, defs: dict) -> None:
        self.defs = defs
        self.refs: dict[str, Check] = {}

    def compile(self, schema: dict) -> Check:
        if not KNOWN.issuperset(schema):
            return refuse(f"schema keyword(s) {sorted(set(schema) - KNOWN)}")
        if "$ref" in schema:
            return self.ref(schema["$ref"].removeprefix("#/$defs/"))
        if "anyOf" in schema:
            return self.any_of([self.compile(option) for option in schema["anyOf"]])
        check = self.typed(schema)
        if "const" in schema or "enum" in schema:
            allowed = [schema["const"]] if "const" in schema else schema["enum"]
            return self.one_of(allowed, check)
        return check

    def ref(self, name: str) -> Check:
        if name not in self.refs:
            self.refs[name] = refuse("recursive $ref")  # models on disk are not recursive
            self.refs[name] = self.compile(self.defs[name])
        return self.refs[name]

    @staticmethod
    def any_of(options: list[Check]) -> Check:
        def check(value: object) -> object:
            for option in options:
                try:
                    return option(value)
                except NotCanonical:
                    continue
            raise NotCanonical("no option of anyOf")
        return check

    @staticmethod
    def one_of(allowed: list, typed: Check) -> Check:
        def check(value: object) -> object:
            if not any(same(value, a) for a in allowed):
                raise NotCanonical("const/enum")
            return typed(value)
        return check

    def typed(self, schema: dict) -> Check:
        kind = schema.get("type")
        if kind == "object":
            return self.model(schema) if "properties" in schema else self.mapping(schema)
        if kind == "array":
            return self.array(schema)
        if kind == "string":
            return self.string(schema)
        if kind in ("integer", "number"):
            return self.number(int if kind == "integer" else float, schema)
        if kind == "boolean":
            return self.exact(bool)
        if kind == "null":
            return self.exact(type(None))
        if kind is None and ("const" in schema or "enum" in schema):
            return lambda value: value
        return refuse(f"type {kind!r}")

    @staticmethod
    def exact(cls: type) -> Check:
        def check(value: object) -> object:
            if type(value) is not cls:
                raise NotCanonical(cls.__name__)
            return value
        return check

    def model(self, schema: dict) -> Check:
        """A model: every field, in the model's order, nothing else."""
        if schema.get("additionalProperties") is not False:
            return refuse("a model that allows extra fields")
        names = tuple(schema["properties"])
        fields = [(name, self.compile(sub)) for name, sub in schema["properties"].items()]

        def check(value: object) -> object:
            if type(value) is not dict or tuple(value) != names:
                raise NotCanonical("fields")
            return SimpleNamespace(**{name: field(value[name]) for name, field in fields})
        return check

    def mapping(self, schema: dict) -> Check:
        extra = schema.get("additionalProperties", True)
        patterns = schema.get("patternProperties", {})
        if len(patterns) > 1 or (patterns and extra is not True) or extra is False:
            return refuse("a map with several key rules")
        key_pattern = next(iter(patterns), None)
        key_ok = None if key_pattern is None else matcher(key_pattern)
        item = (self.compile(patterns[key_pattern]) if patterns
                else self.compile(extra) if type(extra) is dict else None)

        def check(value: object) -> object:
            if type(value) is not dict:
                raise NotCanonical("object")
            if key_ok is not None and not all(key_ok(k) for k in value):
                raise NotCanonical("key pattern")
            return dict(value) if item is None else {k: item(v) for k, v in value.items()}
        return check

    def array(self, schema: dict) -> Check:
        least = schema.get("minItems", 0)
        item = self.compile(schema["items"]) if "items" in schema else None

        def check(value: object) -> object:
            if type(value) is not list or len(value) < least:
                raise NotCanonical("array")
            return list(value) if item is None else [item(v) for v in value]
        return check

    @staticmethod
    def string(schema: dict) -> Check:
        least = schema.get("minLength", 0)
        pattern_ok = matcher(schema["pattern"]) if "pattern" in schema else None

        def check(value: object) -> object:
            if type(value) is not str or len(value) < least:
                raise NotCanonical("string")
            if pattern_ok is not None and not pattern_ok(value):
                raise NotCanonical("pattern")
            if not value.isascii():
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:  # a lone surrogate from a `\ud800` escape
                    raise NotCanonical("surrogate") from None
            return value
        return check

    @staticmethod
    def number(cls: type, schema: dict) -> Check:
        """`int` exactly (never a bool or 1.0); `float` exactly (pydantic dumps a float field's
        1 as 1.0)."""
        low, high = schema.get("minimum"), schema.get("maximum")

        def check(value: object) -> object:
            if type(value) is not cls:
                raise NotCanonical(cls.__name__)
            if (low is not None and value < low) or (high is not None and value > high):
                raise NotCanonical("bounds")
            return value
        return check


def matcher(pattern: str) -> Callable[[str], bool]:
    """Pydantic's (Rust regex) search, compiled once: its `$` ends the text, where Python's also
    matches before a final newline."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    search = re.compile(pattern).search
    return lambda text: search(text) is not None


def same(a: object, b: object) -> bool:
    return type(a) is type(b) and a == b


LOADER = ("catalog.py", "definition.py", "fastyaml.py")  # what turns snapshot files into models


def loader_key() -> str:
    """The sha256 of the definition loader's source: a compiled catalog is trusted only when the
    same loader would read the snapshot today."""
    digest = sha256()
    for name in LOADER:
        digest.update((SCHEMAS.parent / name).read_bytes())
    return digest.hexdigest()


DIGEST_HEAD = b'{"digest": "'  # catalog.json opens with its digest: 64 hex digits, then `",\n`
BODY_AT = len(DIGEST_HEAD) + 64 + 3


def tree_hashes(folder: Path) -> dict[str, str]:
    """sha256 of every file under `folder`, by POSIX path relative to it."""
    base = str(folder)
    out = {}
    for parent, _, names in os.walk(base):
        prefix = parent[len(base) + 1:].replace(os.sep, "/")
        for name in names:
            out[f"{prefix}/{name}" if prefix else name] = sha256_file(os.path.join(parent, name))
    return out


def compiled_catalog(snapshot: Path, workflows: dict, phases: dict) -> str:
    """The text of `catalog.json`: the snapshot catalog's model dumps, keyed to the files and
    the loader they came from. Its first line is the sha256 of the rest (read as `{` + the rest),
    so a reader checks the bytes it has without serializing anything again."""
    body = json.dumps({"loader": loader_key(), "snapshot": tree_hashes(snapshot),
                       "workflows": workflows, "phases": phases}, ensure_ascii=False)
    rest = body[1:] + "\n"
    digest = sha256(b"{" + rest.encode("utf-8")).hexdigest()
    return f'{DIGEST_HEAD.decode()}{digest}",\n{rest}'


def read_compiled(path: Path, snapshot: Path) -> SimpleNamespace | None:
    """The catalog views in `catalog.json` if it still describes `snapshot` exactly, as this
    loader would read it; None when the models must read the snapshot instead."""
    if not path.is_file():
        return None
    raw = path.read_bytes()
    if (raw[:len(DIGEST_HEAD)] != DIGEST_HEAD or raw[BODY_AT - 3:BODY_AT] != b'",\n'
            or raw[len(DIGEST_HEAD):BODY_AT - 3].decode("ascii")
            != sha256(b"{" + raw[BODY_AT:]).hexdigest()):
        return None
    data = json.loads(raw.decode("utf-8"))
    if type(data) is not dict or list(data) != ["digest", "loader", "snapshot", "workflows",
                                                "phases"]:
        return None
    if data["loader"] != loader_key() or data["snapshot"] != tree_hashes(snapshot):
        return None
    if type(data["workflows"]) is not dict or type(data["phases"]) is not dict:
        return None
    return SimpleNamespace(workflows=Views(data["workflows"], "workflow"),
                           phases=Views(data["phases"], "phase"))


class Views:
    """Definitions by id, each checked by `canonical` when first looked up: a dry run reads one
    phase of a hundred. A lookup raises KeyError or NotCanonical, and the caller hands over."""

    def __init__(self, raw: dict, kind: str) -> None:
        self.raw, self.kind, self.seen = raw, kind, {}

    def __getitem__(self, key: str) -> object:
        if key not in self.seen:
            self.seen[key] = canonical(self.raw[key], self.kind)
        return self.seen[key]


def generate() -> dict:
    """The schemas of the models, as `schemas.json` must hold them (imports pydantic)."""
    from .definition import Phase, Workflow
    from .state import SCHEMA_VERSION, Delivery, Index

    models = {"delivery": Delivery, "index": Index, "workflow": Workflow, "phase": Phase}
    return {"schema_version": SCHEMA_VERSION,
            "models": {k: m.model_json_schema(by_alias=True) for k, m in models.items()}}


def render(data: dict) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    SCHEMAS.write_text(render(generate()), encoding="utf-8")
    print(f"wrote {SCHEMAS}")
