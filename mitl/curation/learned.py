"""The `learned` adjudication: a logistic fusion of the annotators' rankings, refit every round.

Continuous active learning in the manner of Cormack and Grossman (TREC Total Recall,
2015–2016), with the annotators' rankings as the only evidence: every judged pair so far
trains one logistic model per direction, and the next round takes the unjudged pairs it
rates most likely positive, over all queries at once. The features come in groups
(`feature_blocks`; `FEATURE_GROUPS` are the ones read): per annotator 1/√rank and whether
it ranks the pair (`rank`), its score within the list and gap to the list's best
(`score`), the share of annotators that rank the pair (`share`) or put it in their top 5
(`agreement`), and the query's own yield so far (Laplace-smoothed, and for a training pair
without its own answer), since queries differ in how many positives they have, with that
yield times the pair's best 1/√rank (`yield`), and evidence from alike pairs
(`Neighbourhood`): how alike is the nearest other query for which the pair's target was
judged positive, and negative (`neighbour`: a near-duplicate image's accepted caption), and
the nearest other target judged for the pair's query (`sibling`). Before both classes have
`MIN_CLASS` examples, pairs are taken in reciprocal-rank-fusion order instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .rankings import Pair, QueryRankings, fused_ranking

MIN_CLASS = 5  # judged positives and negatives a direction needs before a model is fit
L2 = 1.0  # ridge penalty of the logistic fit (features are in [0, 1])
NEWTON_STEPS = 25
AGREEMENT_K = 5  # `agreement`: annotators that put the pair in their top this many
NEIGHBOUR_DEPTH = 50  # likeness (`Neighbourhood`) reads every annotator's top this many
FEATURE_GROUPS_ALL = ("rank", "score", "share", "agreement", "yield", "neighbour", "sibling")
# The groups that read verdicts on alike queries and alike targets (`Neighbourhood`).
EVIDENCE_KINDS = {"neighbour": "query", "sibling": "target"}
# The groups the model reads (docs/curation.md has the comparison that chose them).
FEATURE_GROUPS: tuple[str, ...] = FEATURE_GROUPS_ALL


def logistic_fit(features: np.ndarray, labels: np.ndarray, l2: float = L2) -> np.ndarray:
    """Weights of an L2-penalised logistic regression by Newton's method (intercept first).

    The intercept is not penalised. Deterministic; converges in a few steps on the small,
    bounded feature sets used here.
    """
    x = np.hstack([np.ones((len(features), 1)), features])
    weights = np.zeros(x.shape[1])
    penalty = np.full(x.shape[1], l2)
    penalty[0] = 0.0
    for _ in range(NEWTON_STEPS):
        p = 1.0 / (1.0 + np.exp(-(x @ weights)))
        gradient = x.T @ (p - labels) + penalty * weights
        hessian = (x * (p * (1 - p))[:, None]).T @ x + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hessian, gradient)
        weights -= step
        if np.abs(step).max() < 1e-8:
            break
    return weights


def logistic_predict(weights: np.ndarray, features: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-(weights[0] + features @ weights[1:])))


def _rank_columns(
    query: QueryRankings, annotators: Sequence[int]
) -> tuple[list[Pair], np.ndarray, np.ndarray]:
    """Every pair some annotator ranks (first-ranked order), its ranks and normalised scores.

    Returns the pairs, a (pairs × annotators) matrix of 1-based ranks (0: not ranked) and one
    of scores rescaled to [0, 1] within the annotator's list (best 1, worst 0; NaN where the
    annotator does not rank the pair or gave no scores).
    """
    index: dict[Pair, int] = {}
    placed: list[tuple[list[int], np.ndarray | None]] = []
    for annotator in annotators:
        ranked = query.lists.get(annotator, ())
        positions = [index.setdefault(pair, len(index)) for pair in ranked]
        raw = query.scores.get(annotator, ())
        scaled = None
        if len(raw) >= len(positions) and positions:
            values = np.asarray(raw[: len(positions)], dtype=float)
            spread = values.max() - values.min()
            scaled = (values - values.min()) / spread if spread > 0 else np.ones(len(values))
        placed.append((positions, scaled))
    ranks = np.zeros((len(index), len(annotators)))
    scores = np.full((len(index), len(annotators)), np.nan)
    for column, (positions, scaled) in enumerate(placed):
        ranks[positions, column] = np.arange(1, len(positions) + 1)
        if scaled is not None:
            scores[positions, column] = scaled
    return list(index), ranks, scores


def query_yields(judged: np.ndarray, answers: np.ndarray) -> np.ndarray:
    """The query's yield so far for each of its pairs, Laplace-smoothed.

    A judged pair's yield leaves its own answer out: with it the feature would hold the
    label, and the model would trust it too much.
    """
    positives, count = answers[judged].sum(), judged.sum()
    return np.where(judged, (1 + positives - answers) / (1 + count), (1 + positives) / (2 + count))


def query_anchor(query: QueryRankings) -> tuple[int, int] | None:
    """The item every ranked pair shares (side 0: an image query, 1: a caption query).

    The direction says which side when the query has one (a single pair shares both).
    """
    pairs = [pair for ranked in query.lists.values() for pair in ranked]
    sides = {"i2t": (0,), "t2i": (1,)}.get(query.group, (0, 1))
    for side in sides:
        if pairs and all(pair[side] == pairs[0][side] for pair in pairs):
            return side, pairs[0][side]
    return None


@dataclass
class Neighbourhood:
    """What the verdicts on alike queries and alike targets say, for `neighbour`, `sibling`.

    Two queries are alike as far as the annotators' top `NEIGHBOUR_DEPTH` targets overlap
    (Jaccard): two near-duplicate images get the same captions proposed. Two targets are
    alike as far as the queries that rank them there overlap. A pair's `neighbour` evidence
    is the likeness of the most alike other query judged with the same target, once with a
    positive verdict and once with a negative one; its `sibling` evidence the likeness of
    the most alike other target judged for the same query, the same two ways. A pair's own
    verdict is never its evidence.
    """

    near: dict[tuple[int, int], frozenset[int]]  # (side, query item) → its top targets
    audience: dict[tuple[int, int], frozenset[int]]  # (side, target) → query items ranking it
    by_target: dict[tuple[int, int], list[tuple[int, bool]]]  # → (query item, positive)
    by_query: dict[tuple[int, int], list[tuple[int, bool]]]  # (side, item) → (target, positive)
    likeness: dict[tuple[str, int, int, int], float]

    @classmethod
    def build(
        cls, queries: Sequence[QueryRankings], outcomes: Mapping[Pair, bool]
    ) -> Neighbourhood:
        near: dict[tuple[int, int], frozenset[int]] = {}
        for query in queries:
            anchor = query_anchor(query)
            if anchor is not None:
                side = anchor[0]
                top = (p[1 - side] for r in query.lists.values() for p in r[:NEIGHBOUR_DEPTH])
                near[anchor] = frozenset(top)
        audience: dict[tuple[int, int], set[int]] = {}
        for (side, item), targets in near.items():
            for target in targets:
                audience.setdefault((side, target), set()).add(item)
        by_target: dict[tuple[int, int], list[tuple[int, bool]]] = {}
        by_query: dict[tuple[int, int], list[tuple[int, bool]]] = {}
        for pair, positive in outcomes.items():
            for side in (0, 1):
                if (side, pair[side]) in near:
                    by_target.setdefault((side, pair[1 - side]), []).append((pair[side], positive))
                    by_query.setdefault((side, pair[side]), []).append((pair[1 - side], positive))
        frozen = {key: frozenset(items) for key, items in audience.items()}
        return cls(near, frozen, by_target, by_query, {})

    def _alike(self, kind: str, side: int, first: int, second: int) -> float:
        key = (kind, side, min(first, second), max(first, second))
        if key not in self.likeness:
            sets = self.near if kind == "query" else self.audience
            a, b = sets.get((side, first), frozenset()), sets.get((side, second), frozenset())
            self.likeness[key] = len(a & b) / len(a | b) if a or b else 0.0
        return self.likeness[key]

    def columns(self, query: QueryRankings, pairs: Sequence[Pair], kind: str) -> np.ndarray:
        """(pairs × 2): the most alike other query (`kind` "query") or other target
        ("target") judged with this pair's target or query: its likeness with a YES, a NO."""
        evidence = np.zeros((len(pairs), 2))
        anchor = query_anchor(query)
        if anchor is None:
            return evidence
        side, item = anchor
        for row, pair in enumerate(pairs):
            target = pair[1 - side]
            mine, others = (
                (item, self.by_target.get((side, target), ()))
                if kind == "query"
                else (target, self.by_query.get(anchor, ()))
            )
            for other, positive in others:
                if other != mine:
                    value = self._alike(kind, side, mine, other)
                    column = 0 if positive else 1
                    evidence[row, column] = max(evidence[row, column], value)
        return evidence


def feature_blocks(
    ranks: np.ndarray,
    scores: np.ndarray,
    query_yield: np.ndarray,
    groups: Sequence[str],
    evidence: Mapping[str, np.ndarray] | None = None,
) -> np.ndarray:
    """The feature rows of pairs from their ranks, scores and query yield, group by group.

    `rank`: per annotator 1/√rank and "ranks it"; `score`: per annotator its score within
    the list (0 when unranked) and the gap to the list's best (1 when unranked); `share`:
    the share of annotators that rank it; `agreement`: the share that put it in their top
    `AGREEMENT_K`; `yield`: the query's yield, and it times the best 1/√rank, so that a rich
    query lifts its top ranks more than its deep ones; `neighbour` and `sibling`: the two
    columns each of `Neighbourhood.columns` (`evidence` by group; zeros when not given).
    An unranked pair's row has ranks 0.
    """
    n = max(ranks.shape[1], 1)
    inverse = np.where(ranks > 0, np.maximum(ranks, 1) ** -0.5, 0.0)
    ranked = (ranks > 0).astype(float)
    blocks: list[np.ndarray] = []
    for group in groups:
        if group == "rank":
            blocks.append(np.stack([inverse, ranked], axis=2).reshape(len(ranks), -1))
        elif group == "score":
            known = np.nan_to_num(scores, nan=0.0)
            gap = np.where(np.isnan(scores), 1.0, 1.0 - known)
            blocks.append(np.stack([known, gap], axis=2).reshape(len(ranks), -1))
        elif group == "share":
            blocks.append(ranked.sum(axis=1, keepdims=True) / n)
        elif group == "agreement":
            top = ((ranks > 0) & (ranks <= AGREEMENT_K)).sum(axis=1, keepdims=True)
            blocks.append(top / n)
        elif group == "yield":
            best = inverse.max(axis=1, initial=0.0)
            blocks.append(np.stack([query_yield, query_yield * best], axis=1))
        elif group in EVIDENCE_KINDS:
            given = (evidence or {}).get(group)
            blocks.append(np.zeros((len(ranks), 2)) if given is None else given)
        else:
            raise ValueError(f"unknown feature group {group!r} (known: {FEATURE_GROUPS_ALL})")
    return np.hstack(blocks) if blocks else np.zeros((len(ranks), 0))


def query_features(
    query: QueryRankings,
    annotators: Sequence[int],
    outcomes: Mapping[Pair, bool],
    groups: Sequence[str] | None = None,
    neighbourhood: Neighbourhood | None = None,
) -> tuple[list[Pair], np.ndarray, np.ndarray]:
    """The features (`feature_blocks`) of every pair some annotator ranks for this query.

    Returns the pairs (first-ranked order), their rows, and which of them are judged.
    """
    pairs, ranks, scores = _rank_columns(query, annotators)
    judged = np.array([pair in outcomes for pair in pairs], dtype=bool)
    answers = np.array([bool(outcomes.get(pair, False)) for pair in pairs], dtype=float)
    groups = FEATURE_GROUPS if groups is None else groups
    evidence = {}
    for group in set(groups) & set(EVIDENCE_KINDS):
        neighbourhood = neighbourhood or Neighbourhood.build([query], outcomes)
        evidence[group] = neighbourhood.columns(query, pairs, EVIDENCE_KINDS[group])
    rows = feature_blocks(ranks, scores, query_yields(judged, answers), groups, evidence)
    return pairs, rows, judged


@dataclass(frozen=True)
class GroupModel:
    """One group's (direction's) untaken ranked pairs and the logistic fusion's view of them.

    `probabilities` is None when the group has too few judged examples of either kind for a
    fit. `tail` then too: each query's predicted rate for a pair no annotator ranks (every
    rank feature 0, the query's own yield), an extrapolation that only orders the queries.
    """

    rows: list[tuple[int, Pair]]  # (query id, pair) of every untaken ranked pair
    probabilities: np.ndarray | None
    tail: dict[int, float] | None  # query id → predicted rate of an unranked pair


def group_model(
    queries: Sequence[QueryRankings],
    outcomes: Mapping[Pair, bool],
    taken: set[Pair],
    groups: Sequence[str] | None = None,
) -> GroupModel:
    """Fit the logistic fusion on one group's judged pairs; predict its untaken ranked pairs."""
    groups = FEATURE_GROUPS if groups is None else groups
    annotators = sorted({a for q in queries for a in q.lists})
    rows: list[tuple[int, Pair]] = []
    features: list[np.ndarray] = []
    train_x: list[np.ndarray] = []
    train_y: list[float] = []
    yields: dict[int, float] = {}
    wanted = set(groups) & set(EVIDENCE_KINDS)
    neighbourhood = Neighbourhood.build(queries, outcomes) if wanted else None
    for query in queries:
        pairs, matrix, judged = query_features(query, annotators, outcomes, groups, neighbourhood)
        answers = [float(outcomes[pair]) for pair, seen in zip(pairs, judged, strict=True) if seen]
        yields[query.query_id] = (1 + sum(answers)) / (2 + len(answers))
        train_x.append(matrix[judged])
        train_y += answers
        keep = [i for i, pair in enumerate(pairs) if not judged[i] and pair not in taken]
        rows += [(query.query_id, pairs[i]) for i in keep]
        features.append(matrix[keep])
    labels = np.array(train_y)
    if not rows or not (labels.sum() >= MIN_CLASS and (1 - labels).sum() >= MIN_CLASS):
        return GroupModel(rows, None, None)
    weights = logistic_fit(np.vstack(train_x), labels)
    probabilities = logistic_predict(weights, np.vstack(features))
    nobody = np.zeros((len(yields), len(annotators)))  # no annotator ranks these pairs
    unranked = feature_blocks(nobody, nobody + np.nan, np.array(list(yields.values())), groups)
    tail = dict(zip(yields, logistic_predict(weights, unranked).tolist(), strict=True))
    return GroupModel(rows, probabilities, tail)


def learned_order(
    rankings: Sequence[QueryRankings],
    outcomes: Mapping[Pair, bool],
    taken: set[Pair],
) -> list[tuple[int, Pair]]:
    """Every untaken ranked pair as (query id, pair), most likely positive first.

    One model per group (direction). A group without enough judged examples of both kinds
    is ordered by reciprocal rank fusion, query after query in turn (round-robin by fused
    rank), so the first round spreads over queries.
    """
    rows: list[tuple[int, Pair]] = []  # (query id, pair), scored by (−p, depth) below
    scores: list[np.ndarray] = []
    depths: list[np.ndarray] = []
    for group in sorted({q.group for q in rankings}):
        queries = [q for q in rankings if q.group == group]
        model = group_model(queries, outcomes, taken)
        if not model.rows:
            continue  # every ranked pair of this group is judged or taken
        if model.probabilities is not None:
            rows += model.rows
            scores.append(-model.probabilities)
            depths.append(np.zeros(len(model.rows), dtype=np.int64))
            continue
        candidates = set(model.rows)
        for query in queries:
            fused = [p for p in fused_ranking(query.lists) if (query.query_id, p) in candidates]
            # Round-robin: the i-th pair of every query before any query's (i+1)-th.
            rows += [(query.query_id, p) for p in fused]
            scores.append(np.full(len(fused), -0.5))
            depths.append(np.arange(len(fused), dtype=np.int64))
    if not rows:
        return []
    keys = np.array([(q, i, c) for q, (i, c) in rows], dtype=np.int64)
    # Most likely first; ties by depth, query, pair (lexsort's last key is its first).
    ranking = np.lexsort(
        (keys[:, 2], keys[:, 1], keys[:, 0], np.concatenate(depths), np.concatenate(scores))
    )
    order: list[tuple[int, Pair]] = []
    seen: set[Pair] = set()
    for index in ranking.tolist():
        query_id, pair = rows[index]
        if pair not in seen:
            seen.add(pair)
            order.append((query_id, pair))
    return order
