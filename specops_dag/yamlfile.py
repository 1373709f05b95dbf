"""Reading one definition file as `yaml.safe_load` would, bounded: the file's size is capped
before it is parsed, and the composed node graph is measured (nesting depth, and nodes with every
alias counted once per reference) before anything is constructed, so an alias bomb of a few
hundred bytes or a file nested 20,000 lists deep gets one exact error, not a hang or a
`RecursionError`. Uses libyaml when PyYAML was built with it; imports nothing of this package."""

from __future__ import annotations

from pathlib import Path

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Caps on one definition file. A 500-node generated workflow (the load benchmark's) is 45 KB,
# 5 levels deep and 8,010 nodes; no file in this repository is nested more than 7 levels. The caps
# leave an order of magnitude above that and still bound the work and memory of everything
# downstream (pydantic walks every node of the built document, an alias once per reference):
MAX_FILE_BYTES = 1024 * 1024  # 1 MiB of text, checked before parsing
MAX_DEPTH = 64                # levels of mappings/sequences, the top-level mapping being level 1
MAX_NODES = 100_000           # scalars, mappings and sequences, aliases counted once per reference

# libyaml refuses more than 1,000 nesting levels itself
_LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"


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
    `TooDeep` / `TooManyNodes` when the document passes `max_depth` / `max_nodes`."""
    reader = loader(text)
    try:
        try:
            node = reader.get_single_node()
        except yaml.YAMLError as err:
            if getattr(err, "problem", None) == _LIBYAML_TOO_DEEP:
                raise TooDeep(max_depth) from None
            raise
        except RecursionError:  # the pure-Python composer recurses per level
            raise TooDeep(max_depth) from None
        if node is None:
            return None
        _measure(node, max_depth, max_nodes)
        return reader.construct_document(node)
    finally:
        reader.dispose()


def _measure(root: Node, max_depth: int, max_nodes: int) -> None:
    """Nodes (an alias once per reference) and levels of the document, without recursion. A node
    that contains itself (`&a [*a]`) counts once where it recurs, as PyYAML builds a cycle."""
    sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes, levels) once finished
    open_: set[int] = set()
    stack: list[tuple[Node, list[Node] | None]] = [(root, None)]
    while stack:
        node, children = stack.pop()
        key = id(node)
        if children is None:  # first visit
            if key in sizes or key in open_:
                continue
            if type(node) is ScalarNode:
                sizes[key] = (1, 0)
                continue
            children = ([n for pair in node.value for n in pair] if type(node) is MappingNode
                        else node.value)
            open_.add(key)
            stack.append((node, children))
            stack.extend((child, None) for child in children)
            continue
        open_.discard(key)
        nodes, levels = 1, 0
        for child in children:
            n, lv = sizes.get(id(child), (1, 0))  # (1, 0): a child that contains this node
            nodes += n
            if lv > levels:
                levels = lv
        levels += 1
        if nodes > max_nodes:
            raise TooManyNodes(max_nodes, aliased=len(sizes) + len(open_) + 1 <= max_nodes)
        if levels > max_depth:
            raise TooDeep(max_depth)
        sizes[key] = (nodes, levels)
