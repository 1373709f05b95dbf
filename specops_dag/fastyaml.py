"""`yaml.safe_load`, about twice as fast for definition files: libyaml composes the node tree and
plain mappings, sequences, strings and core scalars are built in one pass, where PyYAML's
SafeConstructor spends several Python calls per node. Anything else — merge keys, a
self-containing alias, timestamps, binary, set/omap or unknown tags, unhashable keys — is handed
to PyYAML's own safe loader, so results are exactly `yaml.safe_load`'s. Errors are libyaml's
`yaml.YAMLError`s (the catalog re-reads a broken file with the pure loader for its messages).
"""

from __future__ import annotations

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, SequenceNode

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML was built with it
PREFIX = "tag:yaml.org,2002:"
STR, MAP, SEQ, MERGE = (PREFIX + t for t in ("str", "map", "seq", "merge"))
SCALARS = {PREFIX + "int": SafeConstructor.construct_yaml_int,
           PREFIX + "float": SafeConstructor.construct_yaml_float,
           PREFIX + "bool": SafeConstructor.construct_yaml_bool,
           PREFIX + "null": SafeConstructor.construct_yaml_null}
_SCALAR_MAKER = SafeConstructor()


class _Unusual(Exception):
    """The document needs PyYAML's full constructor."""


def safe_load(text: str) -> object:
    """The document in `text` as `yaml.safe_load` returns it; raises `yaml.YAMLError`."""
    node = yaml.compose(text, Loader=LOADER)
    if node is None:
        return None
    try:
        return _build(node, set())
    except _Unusual:
        return yaml.load(text, Loader=LOADER)
    except TypeError:  # an unhashable key: let PyYAML raise its ConstructorError
        return yaml.load(text, Loader=LOADER)


def _build(node: Node, open_nodes: set[int]) -> object:
    tag = node.tag
    if tag == STR:
        return node.value
    if tag == MAP and isinstance(node, MappingNode):
        if id(node) in open_nodes:
            raise _Unusual
        open_nodes.add(id(node))
        mapping = {}
        for key, value in node.value:
            if key.tag == MERGE:
                raise _Unusual
            mapping[_build(key, open_nodes)] = _build(value, open_nodes)
        open_nodes.discard(id(node))
        return mapping
    if tag == SEQ and isinstance(node, SequenceNode):
        if id(node) in open_nodes:
            raise _Unusual
        open_nodes.add(id(node))
        items = [_build(item, open_nodes) for item in node.value]
        open_nodes.discard(id(node))
        return items
    make = SCALARS.get(tag)
    if make is None:
        raise _Unusual
    return make(_SCALAR_MAKER, node)
