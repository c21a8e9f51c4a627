"""Turn ranked lists into one score per pair for the precomputed annotator.

The rule (the "Rankings" section of `mitl.annotators.precomputed`): each list says which
pair is ranked above which; listed pairs and these constraints form a directed graph, and a
listed pair scores minus its level, the length of the longest chain of constraints leading
down to it; a pair no list names scores UNLISTED. Lists of the two directions that contradict
each other form a cycle, which `cycle_node` locates for the error. Pure Python: no Django.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph

from mitl.annotators.base import AnnotatorError
from mitl.annotators.precomputed_files import IdIndex, parse_id, parse_ids

UNLISTED = np.float32(-1e9)


@dataclass(frozen=True)
class RankLevels:
    """The level + 1 of every listed pair, as an (n_images, n_captions) sparse matrix."""

    levels: sparse.csr_array  # 0 means "not listed", so levels are stored shifted by one

    @property
    def shape(self) -> tuple[int, int]:
        """Return (corpus images, corpus captions)."""
        return self.levels.shape

    def block(self, images: np.ndarray, captions: np.ndarray) -> np.ndarray:
        """Return -level for listed pairs and UNLISTED for the others (float32)."""
        shifted = self.levels[images][:, captions].toarray()
        listed = shifted > 0
        scores = np.full(shifted.shape, UNLISTED, dtype=np.float32)
        scores[listed] = 1.0 - shifted[listed]
        return scores


class RankedLists(NamedTuple):
    """One direction's lists in corpus rows, one entry per (query, target), list after list."""

    queries: np.ndarray  # int64 query row of each entry; a list's entries are contiguous
    targets: np.ndarray  # int64 target row of each entry, best first within a list
    in_file: int  # queries the file holds for this direction
    in_corpus: int  # of which the corpus holds

    @classmethod
    def empty(cls) -> RankedLists:
        """Return a direction without lists."""
        none = np.zeros(0, dtype=np.int64)
        return cls(queries=none, targets=none, in_file=0, in_corpus=0)


def parse_rankings(
    part: Any, direction: str, query_ids: np.ndarray, target_ids: np.ndarray, source: Path
) -> RankedLists:
    """Return one direction's ranked lists in corpus rows.

    Queries and targets the corpus lacks are dropped; a repeated query or target is an error,
    since it would order a pair against itself.
    """
    if not isinstance(part, Mapping):
        raise AnnotatorError(f"'{source}': '{direction}' must map query ids to lists of ids")
    query_row = {value: row for row, value in enumerate(query_ids.tolist())}
    keys: list[Any] = []
    rows: list[int] = []
    lists: list[np.ndarray] = []
    seen: set[int] = set()
    for key, targets in part.items():
        query = parse_id(key)
        if query is None or query in seen:
            problem = "is not an integer id" if query is None else "is named twice"
            raise AnnotatorError(f"'{source}': '{direction}' query {key!r} {problem}")
        seen.add(query)
        if not isinstance(targets, list):
            raise AnnotatorError(f"'{source}': '{direction}' query {key!r} must map to a list")
        keys.append(key)
        rows.append(query_row.get(query, -1))
        lists.append(parse_ids(targets, f"the '{direction}' list of {key!r}", source))
    if not lists:
        return RankedLists.empty()
    list_of = np.repeat(np.arange(len(lists)), [len(ids) for ids in lists])
    ids = np.concatenate(lists)
    # Repeats inside one list show up as equal neighbours once sorted by (list, id).
    order = np.lexsort((ids, list_of))
    repeats = np.flatnonzero((np.diff(list_of[order]) == 0) & (np.diff(ids[order]) == 0))
    if len(repeats):
        first = order[repeats[0]]
        raise AnnotatorError(
            f"'{source}': the '{direction}' list of {keys[list_of[first]]!r} repeats the id "
            f"{ids[first]}"
        )
    targets, present = IdIndex(target_ids).rows(ids)
    queries = np.asarray(rows, dtype=np.int64)[list_of]
    keep = present & (queries >= 0)
    return RankedLists(
        queries=queries[keep],
        targets=targets[keep],
        in_file=len(keys),
        in_corpus=sum(row >= 0 for row in rows),
    )


class RankGraph(NamedTuple):
    """Listed pairs (keys image row * n_captions + caption row) and "ranked above" edges."""

    nodes: np.ndarray  # sorted int64 pair keys
    sources: np.ndarray  # node indices: each source must score above its target
    targets: np.ndarray


def unique_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (sorted distinct values, position of each value among them).

    Sort-based: numpy's hash-based `unique` is many times slower on millions of int64 keys.
    """
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.ones(len(values), dtype=bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    inverse = np.empty(len(values), dtype=np.int64)
    inverse[order] = np.cumsum(starts) - 1
    return ordered[starts], inverse


def direction_edges(
    queries: np.ndarray, positions: np.ndarray, node_queries: np.ndarray, n_queries: int
) -> tuple[np.ndarray, np.ndarray]:
    """Return the edges one direction's lists impose on the listed pairs.

    Each listed target is above the next, and a list's last target is above every other listed
    pair of the same query. `queries` and `positions` give the query row and the node of every
    list entry (lists contiguous, best first); `node_queries` the query row of every node, one
    of `n_queries` (images for i2t, captions for t2i).
    """
    if not len(queries):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    same_list = queries[:-1] == queries[1:]
    in_a_list = np.zeros(len(node_queries), dtype=bool)
    in_a_list[positions] = True
    ends = np.flatnonzero(np.r_[~same_list, True])
    last_of_query = np.full(n_queries, -1, dtype=np.int64)
    last_of_query[queries[ends]] = positions[ends]
    # The other pairs of a listed query: nodes of that query no list of this direction holds.
    last = last_of_query[node_queries]
    below = np.flatnonzero((last >= 0) & ~in_a_list)
    sources = np.concatenate([positions[:-1][same_list], last[below]])
    targets = np.concatenate([positions[1:][same_list], below])
    return sources, targets


def rank_graph(i2t: RankedLists, t2i: RankedLists, n_images: int, n_captions: int) -> RankGraph:
    """Return the listed pairs of both directions and the constraints between them."""
    width = max(n_captions, 1)
    keys = np.concatenate([i2t.queries * width + i2t.targets, t2i.targets * width + t2i.queries])
    nodes, positions = unique_inverse(keys)
    split = len(i2t.queries)
    row_edges = direction_edges(i2t.queries, positions[:split], nodes // width, n_images)
    column_edges = direction_edges(t2i.queries, positions[split:], nodes % width, n_captions)
    return RankGraph(
        nodes=nodes,
        sources=np.concatenate([row_edges[0], column_edges[0]]),
        targets=np.concatenate([row_edges[1], column_edges[1]]),
    )


def longest_path_levels(n_nodes: int, sources: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Return each node's longest-path depth in the graph of edges sources → targets.

    Nodes on or below a cycle have no depth and get -1. Whole layers are peeled at once (every
    node whose predecessors are all done), so the number of numpy passes is the depth, not the
    number of nodes.
    """
    order = np.argsort(sources, kind="stable")
    successors = targets[order]
    starts = np.searchsorted(sources[order], np.arange(n_nodes + 1))
    remaining = np.bincount(targets, minlength=n_nodes)
    levels = np.full(n_nodes, -1, dtype=np.int64)
    layer = np.flatnonzero(remaining == 0)
    depth = 0
    while layer.size:
        levels[layer] = depth
        counts = starts[layer + 1] - starts[layer]
        total = int(counts.sum())
        if total == 0:
            break
        # Positions of every out-edge of the layer: each node's run of successors, back to back.
        offsets = np.repeat(starts[layer] - (np.cumsum(counts) - counts), counts)
        reached = np.sort(successors[offsets + np.arange(total)])
        firsts = np.flatnonzero(np.r_[True, reached[1:] != reached[:-1]])
        reached, hits = reached[firsts], np.diff(np.r_[firsts, total])
        remaining[reached] -= hits
        layer = reached[remaining[reached] == 0]
        depth += 1
    return levels


def cycle_node(n_nodes: int, sources: np.ndarray, targets: np.ndarray) -> int:
    """Return the index of the first node on a cycle; the graph must hold one."""
    graph = sparse.csr_array((np.ones(len(sources)), (sources, targets)), shape=(n_nodes, n_nodes))
    _, component = csgraph.connected_components(graph, directed=True, connection="strong")
    # A strongly connected component of two or more nodes is where the cycles are.
    return int(np.flatnonzero(np.bincount(component)[component] > 1)[0])
