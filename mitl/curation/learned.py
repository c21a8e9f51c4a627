"""The `learned` adjudication: a logistic fusion of the annotators' ranks, refit every round.

Continuous active learning in the manner of Cormack and Grossman (TREC Total Recall,
2015–2016), with the annotators' rankings as the only features: every judged pair so far
trains one logistic model per direction, and the next round takes the unjudged pairs it
rates most likely positive, over all queries at once. Per pair and annotator, the features
are 1/√rank (0 when the annotator does not rank the pair) and whether it ranks it at all;
then the share of annotators that rank it, the query's own yield so far (Laplace-smoothed,
and for a training pair without its own answer), since queries differ in how many
positives they have, and that yield times the pair's best 1/√rank. Before both classes have
`MIN_CLASS` examples, pairs are taken in reciprocal-rank-fusion order instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .rankings import Pair, QueryRankings, fused_ranking

MIN_CLASS = 5  # judged positives and negatives a direction needs before a model is fit
L2 = 1.0  # ridge penalty of the logistic fit (features are in [0, 1])
NEWTON_STEPS = 25


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


def pair_features(
    query: QueryRankings, annotators: Sequence[int], query_yield: float
) -> dict[Pair, np.ndarray]:
    """The features of every pair some annotator ranks for this query.

    Per annotator 1/√rank and "ranks it"; then the share of annotators that rank it, the
    query's yield, and the yield times the best 1/√rank, so that a rich query can lift its
    top ranks more than its deep ones (where rankings hold few positives whatever the query).
    """
    width = 2 * len(annotators) + 3
    features: dict[Pair, np.ndarray] = {}
    for column, annotator in enumerate(annotators):
        for rank, pair in enumerate(query.lists.get(annotator, ()), start=1):
            row = features.get(pair)
            if row is None:
                row = features[pair] = np.zeros(width)
            row[2 * column] = rank**-0.5
            row[2 * column + 1] = 1.0
    for row in features.values():
        query_features_set(row, len(annotators), query_yield)
    return features


def query_features_set(row: np.ndarray, n_annotators: int, query_yield: float) -> None:
    """Fill a row's last three features: annotator share, query yield, their interaction."""
    row[-3] = row[1 : 2 * n_annotators : 2].sum() / n_annotators
    row[-2] = query_yield
    row[-1] = query_yield * row[0 : 2 * n_annotators : 2].max()


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
    scored: list[tuple[float, int, int, Pair]] = []
    groups = sorted({q.group for q in rankings})
    for group in groups:
        queries = [q for q in rankings if q.group == group]
        annotators = sorted({a for q in queries for a in q.lists})
        rows: list[tuple[int, Pair, np.ndarray]] = []
        train_x, train_y = [], []
        for query in queries:
            ranked = {p for pairs in query.lists.values() for p in pairs}
            judged = [outcomes[p] for p in ranked if p in outcomes]
            positives, count = sum(judged), len(judged)
            query_yield = (1 + positives) / (2 + count)
            for pair, row in pair_features(query, annotators, query_yield).items():
                if pair in outcomes:
                    # Leave the pair's own answer out of its query's yield: with it the
                    # feature would hold the label, and the model would trust it too much.
                    left_out = (1 + positives - outcomes[pair]) / (1 + count)
                    query_features_set(row, len(annotators), left_out)
                    train_x.append(row)
                    train_y.append(float(outcomes[pair]))
                elif pair not in taken:
                    rows.append((query.query_id, pair, row))
        labels = np.array(train_y)
        if not rows:
            continue  # every ranked pair of this group is judged or taken
        if labels.sum() >= MIN_CLASS and (1 - labels).sum() >= MIN_CLASS:
            weights = logistic_fit(np.array(train_x), labels)
            probabilities = logistic_predict(weights, np.array([row for *_, row in rows]))
            scored += [
                (-float(p), 0, query_id, pair)
                for (query_id, pair, _), p in zip(rows, probabilities, strict=True)
            ]
        else:
            candidates = {(query_id, pair) for query_id, pair, _ in rows}
            for query in queries:
                fused = [p for p in fused_ranking(query.lists) if (query.query_id, p) in candidates]
                # Round-robin: the i-th pair of every query before any query's (i+1)-th.
                scored += [(-0.5, depth, query.query_id, p) for depth, p in enumerate(fused)]
    scored.sort()
    order: list[tuple[int, Pair]] = []
    seen: set[Pair] = set()
    for *_, query_id, pair in scored:
        if pair not in seen:
            seen.add(pair)
            order.append((query_id, pair))
    return order
