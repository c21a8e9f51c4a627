"""An annotator that replays an external model's output: a score matrix or ranked lists.

Any retrieval model can take part without running inside the platform: export its scores, or
its rankings, for the dataset keyed by the dataset's external ids and point the annotator at
the file. Pure Python: no Django import.

Config (exactly one of `scores` and `rankings`)
    `scores`: a `.npz` file holding the arrays `scores` (real numbers, one row per image, one
    column per caption), `image_ids` and `caption_ids` (the external ids of the rows and
    columns); or a `.npy` file holding only the matrix, with the config keys `image_ids` and
    `caption_ids` naming JSON files that each hold a list of external ids.
    `rankings`: a `.json` file
    `{"i2t": {"<image id>": [caption ids, best first]}, "t2i": {"<caption id>": [image ids]}}`;
    either part may be left out.

Score matrix
    similarity(i, c) is the file's score for the ids of i and c, compared as float32. Rows and
    columns are matched to the corpus by external id, whatever their order in the file; every
    id of the corpus must be there (the error says how many are missing and names the first),
    ids the corpus lacks are ignored. NaN is refused.

Rankings
    Retrieval ranks both directions with one similarity, so the lists must become one score per
    pair. A list only says "above": in image i's i2t list each caption is above the next, and
    the last listed caption is above every other caption paired with i; likewise for caption
    c's t2i list among the images paired with c. Listed pairs (those in some list) and these
    constraints form a directed graph; with level(i, c) the length of the longest chain of
    constraints leading down to (i, c),

        similarity(i, c) = -level(i, c) for a listed pair, and UNLISTED = -1e9 otherwise.

    Every constraint then holds strictly, so `retrieve_i2t` returns a listed image's captions
    exactly in the file's order, followed by the rest, and `retrieve_t2i` does the same for a
    listed caption. With one direction only, the level is the 0-based rank (score -rank) and the
    other direction follows from it: for a caption query, images that ranked it higher come
    first. Queries without a list rank by whatever the other lists imply, then by row.

    One score per pair can reproduce both directions only if their lists agree: image i putting
    caption a above b, caption b putting image j above i, ..., and so on back to (i, a) is a
    cycle no single number per pair satisfies. Lists cut from one score matrix never do this;
    lists from direction-specific re-ranking or normalisation can. Such a file is refused, the
    error naming a pair on a cycle: register the directions as two annotators with one file
    each, or export the scores instead.

    Query ids the corpus lacks are ignored, and so are target ids (the remaining targets keep
    their order), but a file none of whose queries is in the corpus is refused.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph

from mitl.annotators.base import Annotator, AnnotatorError, Corpus, as_rows

UNLISTED = np.float32(-1e9)
# Levels are scored as float32, which holds every integer below 2**24 exactly.
_MAX_LEVEL = 1 << 24
# Corpus image rows checked for NaN at a time, to bound the temporaries.
_CHECK_ROWS = 1024
_ID_PATTERN = re.compile(r"-?[0-9]+")
_DIRECTIONS = ("i2t", "t2i")


@dataclass(frozen=True)
class ScoreMatrix:
    """A file's score matrix and, for every corpus row and column, its place in the file."""

    values: np.ndarray  # (file images, file captions), maybe memory-mapped
    image_index: np.ndarray  # int64, corpus image row → file row
    caption_index: np.ndarray  # int64, corpus caption row → file column

    @property
    def shape(self) -> tuple[int, int]:
        """Return (corpus images, corpus captions)."""
        return len(self.image_index), len(self.caption_index)

    def block(self, images: np.ndarray, captions: np.ndarray) -> np.ndarray:
        """Return the float32 scores of these corpus rows and columns."""
        file_rows = self.image_index[images]
        file_columns = self.caption_index[captions]
        return np.asarray(self.values[np.ix_(file_rows, file_columns)], dtype=np.float32)


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


def parse_id(value: Any) -> int | None:
    """Return `value` as an external id (an integer, or a string of digits), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, str) and _ID_PATTERN.fullmatch(value.strip()):
        return int(value)
    return None


def parse_ids(values: Any, what: str, source: Path) -> np.ndarray:
    """Return `values` as int64 external ids, or raise AnnotatorError naming `source`."""
    try:
        array = np.asarray(values)
    except ValueError:  # ragged nesting
        array = np.asarray(values, dtype=object)
    if array.ndim != 1:
        raise AnnotatorError(f"'{source}': {what} must be a flat list of ids")
    if np.issubdtype(array.dtype, np.integer) or array.size == 0:
        return array.astype(np.int64)
    # Report offending items as given: numpy may have turned 900 into 900.0 next to a float.
    items = list(values) if isinstance(values, list | tuple) else array.tolist()
    parsed = [parse_id(item) for item in items]
    if None in parsed:
        bad = items[parsed.index(None)]
        raise AnnotatorError(f"'{source}': {what} must hold integer ids, found {bad!r}")
    return np.asarray(parsed, dtype=np.int64)


def id_array(values: Any, what: str, source: Path) -> np.ndarray:
    """Return `values` as distinct int64 external ids, or raise AnnotatorError naming `source`."""
    ids = parse_ids(values, what, source)
    ordered = np.sort(ids)
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    if len(repeated):
        raise AnnotatorError(f"'{source}': {what} repeats the id {repeated[0]}")
    return ids


class IdIndex:
    """Finds the row of external ids among a fixed array of distinct ids."""

    def __init__(self, ids: np.ndarray) -> None:
        """Index `ids`, whose position is the row."""
        self.order = np.argsort(ids, kind="stable")
        self.ordered = ids[self.order]

    def rows(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return (row of each id, whether it is present); absent ids get row 0."""
        if not len(self.ordered):
            return np.zeros(len(ids), dtype=np.int64), np.zeros(len(ids), dtype=bool)
        found_at = np.minimum(np.searchsorted(self.ordered, ids), len(self.ordered) - 1)
        present = self.ordered[found_at] == ids
        return np.where(present, self.order[found_at], 0).astype(np.int64), present


def positions_in(
    file_ids: np.ndarray, corpus_ids: np.ndarray, what: str, source: Path
) -> np.ndarray:
    """Return the file position of every corpus id; a missing one raises AnnotatorError."""
    positions, present = IdIndex(file_ids).rows(corpus_ids)
    if not present.all():
        missing = corpus_ids[~present]
        raise AnnotatorError(
            f"'{source}': {len(missing)} of the dataset's {len(corpus_ids)} {what} ids are "
            f"missing (first: {missing[0]})"
        )
    return positions


def read_json(path: Path) -> Any:
    """Return the parsed JSON in `path`, or raise AnnotatorError naming it."""
    try:
        with path.open(encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AnnotatorError(f"'{path}': cannot read it as JSON: {exc}") from exc


def load_npz(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (scores, image ids, caption ids) from an `.npz` file."""
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise AnnotatorError(f"'{path}': cannot read it as .npz: {exc}") from exc
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise AnnotatorError(f"'{path}': holds a single array, not an .npz archive")
    with archive:
        missing = [key for key in ("scores", "image_ids", "caption_ids") if key not in archive]
        if missing:
            raise AnnotatorError(f"'{path}': the archive lacks the array(s) {', '.join(missing)}")
        try:
            return archive["scores"], archive["image_ids"], archive["caption_ids"]
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise AnnotatorError(f"'{path}': cannot read it as .npz: {exc}") from exc


def load_npy(path: Path) -> np.ndarray:
    """Return the array of an `.npy` file, memory-mapped so only the rows used are read."""
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise AnnotatorError(f"'{path}': cannot read it as .npy: {exc}") from exc
    if not isinstance(array, np.ndarray):
        array.close()
        raise AnnotatorError(f"'{path}': is an .npz archive, not a single .npy array")
    return array


def check_matrix(values: np.ndarray, n_images: int, n_captions: int, source: Path) -> None:
    """Raise AnnotatorError unless `values` is a real (n_images, n_captions) matrix."""
    if values.ndim != 2 or values.shape != (n_images, n_captions):
        raise AnnotatorError(
            f"'{source}': scores must have shape (image ids, caption ids) = "
            f"{(n_images, n_captions)}, got {values.shape}"
        )
    if not (np.issubdtype(values.dtype, np.integer) or np.issubdtype(values.dtype, np.floating)):
        raise AnnotatorError(f"'{source}': scores must be real numbers, got dtype {values.dtype}")


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


class PrecomputedAnnotator(Annotator):
    """Scores read from a file an external model wrote: a matrix, or ranked lists."""

    kind = "precomputed"
    config_keys = ("scores", "rankings", "image_ids", "caption_ids")

    def __init__(self, *, name: str, config: Mapping[str, Any]) -> None:
        """Check that exactly one source file is named, of a known type, and that it exists."""
        super().__init__(name=name, config=config)
        chosen = [key for key in ("scores", "rankings") if key in self.config]
        if len(chosen) != 1:
            raise self._fail("give exactly one of the config keys 'scores' and 'rankings'")
        self.source = self._path_option(chosen[0])
        suffix = self.source.suffix.lower()
        allowed = {"scores": (".npz", ".npy"), "rankings": (".json",)}[chosen[0]]
        if suffix not in allowed:
            raise self._fail(
                f"'{self.source}': unknown file type for '{chosen[0]}' "
                f"(expected {' or '.join(allowed)})"
            )
        id_keys = [key for key in ("image_ids", "caption_ids") if key in self.config]
        if suffix == ".npy" and len(id_keys) != 2:
            raise self._fail(
                "an .npy score matrix needs the config keys 'image_ids' and 'caption_ids'"
            )
        if suffix != ".npy" and id_keys:
            raise self._fail(f"config key '{id_keys[0]}' only goes with an .npy score matrix")
        self.id_files = {key: self._path_option(key) for key in id_keys}
        self._table: ScoreMatrix | RankLevels | None = None

    def _fail(self, message: str) -> AnnotatorError:
        """Return an AnnotatorError that names this annotator."""
        return AnnotatorError(f"{self.kind} annotator '{self.name}': {message}")

    def _path_option(self, key: str) -> Path:
        """Return the config value `key` as the path of an existing file."""
        value = self.config[key]
        if not isinstance(value, str) or not value.strip():
            raise self._fail(f"config key '{key}' must be a file path, got {value!r}")
        path = Path(value).expanduser()
        if not path.is_file():
            raise self._fail(f"'{path}' (config key '{key}') is not an existing file")
        return path

    def prepare(self, corpus: Corpus) -> None:
        """Read the file and match it to the corpus by external id."""
        try:
            if self.source.suffix.lower() == ".json":
                self._table = self._read_rankings(corpus)
            else:
                self._table = self._read_matrix(corpus)
        except AnnotatorError as exc:
            raise self._fail(str(exc)) from exc

    def _read_matrix(self, corpus: Corpus) -> ScoreMatrix:
        """Load the score matrix and index it by the corpus' rows and columns."""
        if self.source.suffix.lower() == ".npz":
            values, image_ids, caption_ids = load_npz(self.source)
        else:
            values = load_npy(self.source)
            image_ids = read_json(self.id_files["image_ids"])
            caption_ids = read_json(self.id_files["caption_ids"])
        # With an .npy matrix the ids come from their own JSON files; errors name those.
        images = id_array(image_ids, "image_ids", self.id_files.get("image_ids", self.source))
        captions = id_array(
            caption_ids, "caption_ids", self.id_files.get("caption_ids", self.source)
        )
        check_matrix(values, len(images), len(captions), self.source)
        matrix = ScoreMatrix(
            values=values,
            image_index=positions_in(images, corpus.image_ids, "image", self.source),
            caption_index=positions_in(captions, corpus.caption_ids, "caption", self.source),
        )
        every_caption = np.arange(corpus.n_captions)
        for start in range(0, corpus.n_images, _CHECK_ROWS):
            rows = np.arange(start, min(start + _CHECK_ROWS, corpus.n_images))
            nan_rows = np.isnan(matrix.block(rows, every_caption)).any(axis=1)
            if nan_rows.any():
                first = corpus.image_ids[rows[nan_rows][0]]
                raise AnnotatorError(f"'{self.source}': scores hold NaN (image id {first})")
        return matrix

    def _read_rankings(self, corpus: Corpus) -> RankLevels:
        """Parse the ranked lists and turn them into levels, refusing contradictory ones."""
        data = read_json(self.source)
        if not isinstance(data, Mapping) or not data or set(data) - set(_DIRECTIONS):
            raise AnnotatorError(
                f"'{self.source}': expected an object with the keys 'i2t' and/or 't2i'"
            )
        empty = RankedLists.empty()
        i2t, t2i = empty, empty
        if "i2t" in data:
            i2t = parse_rankings(
                data["i2t"], "i2t", corpus.image_ids, corpus.caption_ids, self.source
            )
        if "t2i" in data:
            t2i = parse_rankings(
                data["t2i"], "t2i", corpus.caption_ids, corpus.image_ids, self.source
            )
        if i2t.in_corpus + t2i.in_corpus == 0:
            raise AnnotatorError(
                f"'{self.source}': none of its {i2t.in_file + t2i.in_file} queries is in the "
                "dataset (queries are keyed by the dataset's external ids)"
            )
        graph = rank_graph(i2t, t2i, corpus.n_images, corpus.n_captions)
        levels = longest_path_levels(len(graph.nodes), graph.sources, graph.targets)
        if (levels < 0).any():
            node = cycle_node(len(graph.nodes), graph.sources, graph.targets)
            image, caption = divmod(int(graph.nodes[node]), corpus.n_captions)
            raise AnnotatorError(
                f"'{self.source}': the i2t and t2i lists contradict each other, so no single "
                "score per pair reproduces both (the pair of image id "
                f"{corpus.image_ids[image]} and caption id {corpus.caption_ids[caption]} is "
                "ranked above itself through a cycle); give each direction its own annotator, "
                "or export scores instead"
            )
        if len(levels) and levels.max() + 1 >= _MAX_LEVEL:
            raise AnnotatorError(f"'{self.source}': the rankings are too deep to score exactly")
        shifted = sparse.csr_array(
            (
                (levels + 1).astype(np.float32),
                (graph.nodes // corpus.n_captions, graph.nodes % corpus.n_captions),
            ),
            shape=(corpus.n_images, corpus.n_captions),
        )
        return RankLevels(levels=shifted)

    def similarity(self, image_rows: np.ndarray, caption_rows: np.ndarray) -> np.ndarray:
        """Return the float32 score block read from the file (see the module docstring)."""
        if self._table is None:
            raise RuntimeError(f"{self.kind} annotator '{self.name}': call prepare() first")
        n_images, n_captions = self._table.shape
        images = as_rows(image_rows, n_images, "image")
        captions = as_rows(caption_rows, n_captions, "caption")
        return self._table.block(images, captions)
