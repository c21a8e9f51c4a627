"""The data of `bench_estimate.py`: the demo's synthetic dataset with every positive known.

The truth is `mitl.synthetic`'s (300 scenes, 1,500 captions, the pair rule of
`mitl.synthetic.truth`), with each caption positive for its own image (the `original`
pairs: known positives, never judged). The demo's queries are drawn the same way (100
images, 100 captions) and four machine annotators rank every target of every query by a
noisy score correlated with the truth, as real retrieval models do: a positive adds the
annotator's strength (scaled by how hard its query and its target are), every pair gets a
shared "looks alike" part (so the annotators make the same mistakes) and the annotator's
own noise. So positives crowd at the top of the rankings, some sit deep, and a good share
fall outside every annotator's kept depth (100), where only the random sample can see them.

The crowd answers the truth, or a fixed corruption of it (`crowd_error`: the chance that a
positive pair is called negative, and that a negative one is called positive, drawn once
per pair, so a pair always gets the same verdict): the estimate's target is what the crowd
would say, and the annotators' scores follow the real truth, not the crowd's mistakes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from common import REPO_ROOT  # noqa: F401  (puts the project on the path)

from mitl.curation.estimate import QueryUniverse
from mitl.curation.rankings import Pair, QueryRankings
from mitl.synthetic.generation import generate
from mitl.synthetic.truth import truth_matrix

N_IMAGES = 300  # the demo's dataset (pipeline.demo.demo_run's default)
N_QUERIES = 100  # per direction, as the demo's batch
DEPTH = 100  # mitl.config.ADAPTIVE_RANKING_DEPTH: how deep adaptive rankings are kept
STRENGTHS = (0.6, 0.9, 1.2, 1.5)  # the four annotators, weakest first
SHARED = 0.8  # weight of the noise every annotator shares
DIRECTIONS = ("i2t", "t2i")


@dataclass
class World:
    """One seed's dataset, queries, rankings, known positives and crowd verdicts."""

    verdicts: np.ndarray  # images × captions: what the crowd says (known pairs included)
    truth: np.ndarray  # images × captions: the synthetic truth (known pairs included)
    rankings: list[QueryRankings]
    known: set[Pair]
    queries: dict[str, list[int]]  # direction → query items (image or caption index)
    best_rank: dict[int, dict[Pair, int]]  # query id → pair → best rank over annotators
    item: dict[int, int]  # query id → its image (i2t) or caption (t2i) index
    direction: dict[int, str]

    @property
    def n_images(self) -> int:
        return self.verdicts.shape[0]

    @property
    def n_captions(self) -> int:
        return self.verdicts.shape[1]

    def targets(self, direction: str) -> np.ndarray:
        return np.arange(self.n_captions if direction == "i2t" else self.n_images)

    def in_direction(self, pair: Pair, direction: str) -> bool:
        """Whether the pair belongs to a query of this direction (a population member)."""
        members = self._members[direction]
        return (pair[0] if direction == "i2t" else pair[1]) in members

    def __post_init__(self) -> None:
        self._members = {d: set(items) for d, items in self.queries.items()}
        self._query_of = {(d, i): q for q, (d, i) in zip(self.item, self._keys(), strict=True)}

    def _keys(self) -> list[tuple[str, int]]:
        return [(self.direction[q], self.item[q]) for q in self.item]

    def queries_of(self, pair: Pair) -> list[int]:
        """The queries whose population holds the pair: its image's, its caption's."""
        found = [self._query_of.get(("i2t", pair[0])), self._query_of.get(("t2i", pair[1]))]
        return [q for q in found if q is not None]

    def positives(self, direction: str, truth: bool = False) -> int:
        """Every pair the crowd (or the truth) calls positive in this direction's population."""
        matrix = self.truth if truth else self.verdicts
        if direction == "i2t":
            return int(matrix[self.queries["i2t"]].sum())
        return int(matrix[:, self.queries["t2i"]].sum())

    def universes(self, direction: str, taken: dict[int, set[Pair]]) -> list[QueryUniverse]:
        """Each query's pairs of one direction, as `pipeline.curation.universes_of` builds them."""
        image_side = direction == "i2t"
        return [
            QueryUniverse(
                query_id=q.query_id,
                is_image_query=image_side,
                item_id=self.item[q.query_id],
                n_targets=self.n_captions if image_side else self.n_images,
                ranked=self.best_rank[q.query_id],
                taken=frozenset(taken.get(q.query_id, ())),
            )
            for q in self.rankings
            if q.group == direction
        ]


def world_make(seed: int, *, crowd_error: tuple[float, float] = (0.0, 0.0)) -> World:
    """Build one seed's world (about half a second)."""
    dataset = generate(n_images=N_IMAGES, seed=seed)
    own = np.zeros((N_IMAGES, len(dataset.captions)), dtype=bool)
    for j, caption in enumerate(dataset.captions):
        own[caption.image_id - 1, j] = True
    truth = truth_matrix(dataset) | own
    rng = np.random.default_rng([seed, 2026])
    missed, invented = crowd_error
    draw = np.random.default_rng([seed, 7]).random(truth.shape)  # the crowd's own dice
    verdicts = np.where(truth, draw >= missed, draw < invented) | own
    hardness = rng.uniform(0.5, 1.5, (N_IMAGES, 1)) * rng.uniform(0.5, 1.5, (1, truth.shape[1]))
    shared = SHARED * rng.standard_normal(truth.shape)
    scores = [
        truth * strength * hardness + shared + rng.standard_normal(truth.shape)
        for strength in STRENGTHS
    ]
    queries = {
        "i2t": sorted(rng.choice(N_IMAGES, N_QUERIES, replace=False).tolist()),
        "t2i": sorted(rng.choice(truth.shape[1], N_QUERIES, replace=False).tolist()),
    }
    rankings, best_rank, item, direction = [], {}, {}, {}
    for d in DIRECTIONS:
        for index, query_item in enumerate(queries[d]):
            query_id = index if d == "i2t" else N_QUERIES + index
            lists = {a: _ranked_pairs(s, d, query_item) for a, s in enumerate(scores)}
            rankings.append(QueryRankings(query_id, lists, group=d))
            best_rank[query_id] = _best_ranks(lists)
            item[query_id] = query_item
            direction[query_id] = d
    known = {(i, int(c)) for i in queries["i2t"] for c in np.flatnonzero(own[i])}
    known |= {(int(np.flatnonzero(own[:, c])[0]), c) for c in queries["t2i"]}
    return World(verdicts, truth, rankings, known, queries, best_rank, item, direction)


def _ranked_pairs(scores: np.ndarray, direction: str, query_item: int) -> list[Pair]:
    row = scores[query_item] if direction == "i2t" else scores[:, query_item]
    top = np.argsort(-row, kind="stable")[:DEPTH]
    if direction == "i2t":
        return [(query_item, int(t)) for t in top]
    return [(int(t), query_item) for t in top]


def _best_ranks(lists: dict[int, list[Pair]]) -> dict[Pair, int]:
    best: dict[Pair, int] = {}
    for pairs in lists.values():
        for rank, pair in enumerate(pairs, start=1):
            if rank < best.get(pair, rank + 1):
                best[pair] = rank
    return best
