"""`yaml.safe_load`, bounded, and about twice as fast for definition files.

One pass over libyaml's parse events, with a stack instead of recursion, builds plain mappings,
sequences, strings and core scalars and measures the document as it goes: nesting depth and the
number of nodes the built document holds, an alias counted with every node it stands for each time
it is referenced. Past a cap it stops at once with a `LimitError`, before anything is expanded, so
an alias bomb of a few hundred bytes or a file nested 20,000 lists deep costs microseconds, not a
hang or a `RecursionError`. Aliases are shared, as PyYAML shares them. Anything else — merge keys, a
self-containing alias, timestamps, binary, set/omap or unknown tags, unhashable keys, a duplicate
anchor, two documents — is handed to PyYAML's own loader once the whole document has been measured,
so results are exactly `yaml.safe_load`'s. Errors are the parser's `yaml.YAMLError`s (the catalog
re-reads a broken file with the pure loader for its messages, through this same bounded walk).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from yaml.constructor import SafeConstructor
from yaml.events import (
    AliasEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import ScalarNode

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML was built with it
PREFIX = "tag:yaml.org,2002:"
STR, MAP, SEQ = (PREFIX + t for t in ("str", "map", "seq"))
SCALARS = {PREFIX + "int": SafeConstructor.construct_yaml_int,
           PREFIX + "float": SafeConstructor.construct_yaml_float,
           PREFIX + "bool": SafeConstructor.construct_yaml_bool,
           PREFIX + "null": SafeConstructor.construct_yaml_null}
_SCALAR_MAKER = SafeConstructor()

# Caps on one definition file. A 500-node generated workflow (the load benchmark's) is 45 KB,
# 5 levels deep and 8,010 nodes; no file in this repository is nested more than 7 levels. The caps
# leave an order of magnitude above that and still bound the work and memory of everything
# downstream (pydantic walks every node of the built document, an alias once per reference):
MAX_FILE_BYTES = 1024 * 1024  # 1 MiB of text, checked before parsing
MAX_DEPTH = 64                # levels of mappings/sequences, the top-level mapping being level 1
MAX_NODES = 100_000           # scalars, mappings and sequences, aliases counted once per reference

# libyaml refuses more than 1,000 nesting levels itself, sometimes before its first event
_LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"
_NO_KEY = object()


class LimitError(Exception):
    """The file passes one of the caps. `str()` is "what is wrong; what to do". Not a
    `yaml.YAMLError`: a file over a cap must not be re-read by another loader."""


class TooLarge(LimitError):
    def __init__(self, limit: int = MAX_FILE_BYTES) -> None:
        super().__init__(f"larger than {_bytes(limit)}, the limit for a definition file; shorten "
                         "it or remove it")


class TooDeep(LimitError):
    def __init__(self, limit: int = MAX_DEPTH) -> None:
        super().__init__(f"YAML nested more than {limit} levels deep (mappings and sequences); "
                         "flatten the structure")


class TooManyNodes(LimitError):
    def __init__(self, limit: int = MAX_NODES, aliased: bool = False) -> None:
        super().__init__(
            f"YAML aliases expand to more than {limit:,} nodes (an alias bomb?); write the values "
            "out or reference fewer aliases" if aliased else
            f"more than {limit:,} YAML nodes (values, lists and mappings); shorten the file")


def _bytes(n: int) -> str:
    return f"{n // 1024 ** 2} MiB ({n:,} bytes)" if n % 1024 ** 2 == 0 else f"{n:,} bytes"


def read_text(path: Path, limit: int = MAX_FILE_BYTES) -> str:
    """The file's text as `Path.read_text(encoding="utf-8")` returns it (universal newlines).
    Raises `TooLarge` past `limit` bytes, reading no further; `OSError`, `UnicodeDecodeError`."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(limit)
    text = data.decode("utf-8")
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def safe_load(text: str, loader: type = LOADER, *, max_depth: int = MAX_DEPTH,
              max_nodes: int = MAX_NODES) -> object:
    """The document in `text` as `yaml.safe_load` returns it; raises `yaml.YAMLError`, or
    `TooDeep` / `TooManyNodes` as soon as the document passes `max_depth` / `max_nodes`."""
    parser = loader(text)
    try:
        data, unusual = _walk(parser, max_depth, max_nodes)
    except yaml.YAMLError as err:
        if getattr(err, "problem", None) == _LIBYAML_TOO_DEEP:
            raise TooDeep(max_depth) from None
        raise
    finally:
        parser.dispose()
    if unusual:  # measured in full above: PyYAML's own constructor is now bounded too
        return yaml.load(text, Loader=loader)
    return data


def _walk(parser: yaml.SafeLoader, max_depth: int, max_nodes: int) -> tuple[object, bool]:
    """Build the document from the parser's events; `(data, True)` when PyYAML must build it."""
    get_event, resolve = parser.get_event, parser.resolve
    anchors: dict[str, object] = {}
    sizes: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, levels) of its finished node
    scalars: dict[tuple[str, str], object] = {}
    root: object = None
    unusual = aliased = False
    count = depth = documents = 0
    # an open collection: [container, pending key, anchor, count before it, its depth, deepest]
    stack: list[list] = []
    while True:
        event = get_event()
        kind = type(event)
        if kind is ScalarEvent:
            count += 1
            if count > max_nodes:
                raise TooManyNodes(max_nodes, aliased)
            value, tag = event.value, event.tag
            if tag is None or tag == "!":
                tag = resolve(ScalarNode, value, event.implicit)
            if tag == STR:
                obj: object = value
            elif (tag, value) in scalars:
                obj = scalars[tag, value]
            elif (make := SCALARS.get(tag)) is not None:
                obj = scalars[tag, value] = make(_SCALAR_MAKER, ScalarNode(tag, value))
            else:  # merge key, timestamp, binary, unknown tag
                obj, unusual = value, True
            if event.anchor is not None:
                unusual |= event.anchor in anchors
                anchors[event.anchor], sizes[event.anchor] = obj, (1, 0)
        elif kind is MappingStartEvent or kind is SequenceStartEvent:
            count += 1
            depth += 1
            if count > max_nodes:
                raise TooManyNodes(max_nodes, aliased)
            if depth > max_depth:
                raise TooDeep(max_depth)
            obj = [] if kind is SequenceStartEvent else {}
            if event.tag not in (None, "!", SEQ if kind is SequenceStartEvent else MAP):
                unusual = True  # set, omap, pairs, unknown
            anchor = event.anchor
            if anchor is not None:
                unusual |= anchor in anchors
                anchors[anchor] = obj
                sizes.pop(anchor, None)  # open: an alias to it now is self-containing
        elif kind is MappingEndEvent or kind is SequenceEndEvent:
            frame = stack.pop()
            if frame[2] is not None:
                sizes[frame[2]] = (count - frame[3], frame[5] - frame[4] + 1)
            depth -= 1
            if stack and frame[5] > stack[-1][5]:
                stack[-1][5] = frame[5]
            continue
        elif kind is AliasEvent:
            anchor = event.anchor
            if anchor in sizes:
                nodes, levels = sizes[anchor]
                aliased = True
                count += nodes
                if count > max_nodes:
                    raise TooManyNodes(max_nodes, aliased)
                if depth + levels > max_depth:
                    raise TooDeep(max_depth)
                if stack and depth + levels > stack[-1][5]:
                    stack[-1][5] = depth + levels
            else:  # undefined (PyYAML raises) or self-containing (PyYAML builds a cycle)
                count += 1
                unusual = True
            obj = anchors.get(anchor)
        elif kind is DocumentStartEvent:
            documents += 1
            if documents > 1:  # PyYAML raises "expected a single document" right here
                return None, True
            continue
        elif kind is StreamEndEvent:
            return root, unusual
        else:  # stream start, document end
            continue
        if stack:
            top = stack[-1]
            container = top[0]
            if type(container) is list:
                container.append(obj)
            elif top[1] is _NO_KEY:
                top[1] = obj
            else:
                try:
                    container[top[1]] = obj
                except TypeError:  # an unhashable key: PyYAML raises its ConstructorError
                    unusual = True
                top[1] = _NO_KEY
        else:
            root = obj
        if kind is MappingStartEvent or kind is SequenceStartEvent:
            stack.append([obj, _NO_KEY, event.anchor, count - 1, depth, depth])
