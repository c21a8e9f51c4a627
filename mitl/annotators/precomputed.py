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

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse

from mitl.annotators.base import Annotator, AnnotatorError, Corpus, as_rows
from mitl.annotators.precomputed_files import (
    ScoreMatrix,
    check_matrix,
    id_array,
    load_npy,
    load_npz,
    positions_in,
    read_json,
)
from mitl.annotators.precomputed_rankings import (
    RankedLists,
    RankLevels,
    cycle_node,
    longest_path_levels,
    parse_rankings,
    rank_graph,
)

# Levels are scored as float32, which holds every integer below 2**24 exactly.
_MAX_LEVEL = 1 << 24
# Corpus image rows checked for NaN at a time, to bound the temporaries.
_CHECK_ROWS = 1024
_DIRECTIONS = ("i2t", "t2i")


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
            arrays = load_npz(self.source, ("scores", "image_ids", "caption_ids"))
            values, image_ids, caption_ids = (
                arrays["scores"],
                arrays["image_ids"],
                arrays["caption_ids"],
            )
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
