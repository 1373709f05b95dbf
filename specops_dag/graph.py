"""The directed-graph walks of workflow `needs` and .NET ProjectReference graphs: find_cycle,
topological_order and transitive_needs, each iterative (an explicit stack, Kahn's algorithm), so a
graph of any depth is fine. A graph is a mapping of node → the nodes it needs; this module imports
only the standard library."""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable, Iterator, Mapping, Set
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


def find_cycle(graph: Mapping[K, Iterable[K]]) -> list[K] | None:
    """The first cycle of `graph` (needs naming no node are ignored), as nodes ending where they
    start, or None. Depth-first from each node in the mapping's order, each node's needs in their
    order: `{a: [b], b: [a]}` gives `[a, b, a]`."""
    color: dict[K, int] = {}  # 1 = on the current path, 2 = done
    for start in graph:
        if start in color:
            continue
        color[start] = 1
        path, edges = [start], [iter(graph[start])]
        while edges:
            for nxt in edges[-1]:
                if nxt not in graph:
                    continue
                if color.get(nxt) == 1:
                    return path[path.index(nxt):] + [nxt]
                if nxt not in color:
                    color[nxt] = 1
                    path.append(nxt)
                    edges.append(iter(graph[nxt]))
                    break
            else:
                color[path.pop()] = 2
                edges.pop()
    return None


def topological_order(graph: Mapping[K, Iterable[K]]) -> list[K]:
    """The nodes of `graph`, each after every node it needs; of the nodes ready to go, the first
    in the mapping's order goes next. Needs naming no node are ignored; a cycle raises
    ValueError."""
    keys = list(graph)
    index = {k: i for i, k in enumerate(keys)}
    waiting: list[int] = []
    dependents: list[list[int]] = [[] for _ in keys]
    for i, k in enumerate(keys):
        needs = {index[x] for x in graph[k] if x in index}
        waiting.append(len(needs))
        for j in needs:
            dependents[j].append(i)
    ready = [i for i, count in enumerate(waiting) if count == 0]  # ascending: already a heap
    out: list[K] = []
    while ready:
        i = heapq.heappop(ready)
        out.append(keys[i])
        for j in dependents[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, j)
    if len(out) != len(keys):
        left = [k for k, count in zip(keys, waiting, strict=True) if count]
        raise ValueError(f"needs cycle among {left}")
    return out


def transitive_needs(graph: Mapping[K, Iterable[K]]) -> dict[K, Set[K]]:
    """node → every node it needs, directly or through other nodes (needs naming no node are
    ignored; a cycle raises ValueError). Each set is a read-only view of one bit mask, so a
    10,000-node chain takes 8 MB, not the 2 GB of 50 million entries in Python sets."""
    keys = list(graph)
    index = {k: i for i, k in enumerate(keys)}
    needs = {k: [x for x in graph[k] if x in index] for k in keys}
    masks: dict[K, int] = {}
    for k in topological_order(needs):
        mask = 0
        for x in needs[k]:
            mask |= masks[x] | 1 << index[x]
        masks[k] = mask
    return {k: NodeSet(keys, index, masks[k]) for k in keys}


class NodeSet(Set[K]):
    """A set of a graph's nodes as a bit mask over their order (bit i = the i-th node)."""

    __slots__ = ("keys", "index", "mask")

    def __init__(self, keys: list[K], index: Mapping[K, int], mask: int) -> None:
        self.keys, self.index, self.mask = keys, index, mask

    def __contains__(self, item: object) -> bool:
        i = self.index.get(item)  # type: ignore[call-overload]
        return i is not None and self.mask >> i & 1 == 1

    def __iter__(self) -> Iterator[K]:
        """The nodes in the graph's order."""
        mask = self.mask
        while mask:
            low = mask & -mask
            yield self.keys[low.bit_length() - 1]
            mask ^= low

    def __len__(self) -> int:
        return self.mask.bit_count()

    def __repr__(self) -> str:
        return f"NodeSet({list(self)!r})"
