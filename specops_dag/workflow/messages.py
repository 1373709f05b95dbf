"""How a pydantic validation error reads to a workflow author: `yaml.path: what; fix`, with the
keys a mapping allows and the kind of value that was written. Formatting only: it reads no file
and decides no rule."""

from __future__ import annotations

import types
import typing
from collections.abc import Iterable

from pydantic import BaseModel


def yaml_path(loc: Iterable[object]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def format_error(model: type[BaseModel], err: dict) -> str:
    """One pydantic error as `<yaml path>: <what> ; <fix>`."""
    loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
    where = yaml_path(loc)
    kind = err["type"]
    if kind == "extra_forbidden":
        allowed = allowed_keys(model, loc[:-1])
        hint = f" (allowed: {', '.join(allowed)})" if allowed else ""
        return f"{where}: unknown key `{loc[-1]}`; remove it or fix the spelling{hint}"
    if kind == "missing":
        return f"{where}: missing required key `{loc[-1]}`; add it"
    msg = err["msg"].removeprefix("Value error, ")
    if kind == "string_pattern_mismatch":
        msg = (f"`{err['input']}` is not a valid id; use lowercase letters, digits, `-` and `_`, "
               "starting with a letter or digit")
    elif kind.endswith(("_type", "_parsing")):  # "Input should be a valid list": say what it was
        msg = f"{msg}, got {yaml_kind(err['input'])}; fix the value"
    return f"{where}: {msg}"


def yaml_kind(value: object) -> str:
    """How a YAML value reads to the person who wrote it."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    shown = str(value) if len(str(value)) <= 40 else str(value)[:37] + "..."
    kind = {bool: "true/false", int: "a number", float: "a number"}.get(type(value), "text")
    return f"{kind} `{shown}`"


def allowed_keys(model: type[BaseModel], loc: list[object]) -> list[str]:
    """The keys the model accepts at `loc` (walking fields, lists and dicts), or [] if unknown."""
    current: object = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel) and isinstance(part, str):
            info = current.model_fields.get(part) or next(
                (f for f in current.model_fields.values() if f.alias == part), None)
            if info is None:
                return []
            current = info.annotation
        elif typing.get_origin(current) in (list, dict):
            current = typing.get_args(current)[-1]
        else:
            return []
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [f.alias or name for name, f in current.model_fields.items()]
    return []


def _unwrap(tp: object) -> object:
    while typing.get_origin(tp) in (typing.Union, types.UnionType, typing.Annotated):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        tp = args[0]
    return tp
