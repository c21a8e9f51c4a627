"""Concept failure metrics of one retrieval failure (paper 000, section 4).

Pure Python. A failure pairs the ground-truth image I_g with the image I_r the model put
first instead; each metric compares their concepts (`mitl.explain.concepts`):

- CA, concept agreement: |V(I_g) ∩ V(I_r)| / |V(I_g)|, higher is better.
- NCS, non-common concept similarity: the maximum-weight bipartite matching between the
  categories only I_g has and those only I_r has, edges weighted by WordNet path
  similarity; the mean weight of the matched pairs, higher is better. Undefined when either
  side has no such category. Path similarities are positive, so a maximum-weight matching
  of the complete bipartite graph pairs every node of the smaller side; it is found as a
  minimum-weight full matching of the negated weights (networkx, Hungarian method).
- CE, concept enumeration: Σ over common categories of |count in I_g − count in I_r|, lower
  is better. Undefined without a common category (an unrelated image would otherwise
  score a perfect 0) and for class labels, which carry no counts.
- SD, size disagreement: per common category, the minimum-weight full matching of its
  objects by area difference; SD sums each category's mean matched difference, and the
  binary SD counts matched pairs whose difference reaches a threshold (also given as a
  share of all matched pairs), lower is better. The paper leaves the area unit open and
  thresholds at "100%"; here the difference of two boxes is relative to the smaller one,
  |A_g − A_r| / min(A_g, A_r), so 1.0 means one box is twice the other; areas are floored
  at AREA_FLOOR so a degenerate box stays finite. Needs boxes and a common category.

AA, attribute agreement, is this product's addition, not the paper's: among the categories
both images have, the share of the ground truth's (category, attribute) pairs, e.g. (circle,
red) or (circle, large), that the retrieved image also has, higher is better. It sees the
colour and size errors CA cannot; it needs attributes (instances that carry them).

Query-informed variants keep, on the ground-truth side, only the categories the query
mentions (`concepts_mentioned`); the retrieved side stays whole, since what came back in
their place is the explanation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import networkx as nx
from networkx.algorithms import bipartite

from mitl.explain.concepts import ImageConcepts

DEFAULT_SIZE_THRESHOLD = 1.0  # relative area difference: one box twice the other
AREA_FLOOR = 1e-6  # of the image: COCO has boxes of zero width or height

Similarity = Callable[[str, str], float]


@dataclass(frozen=True)
class MatchedPair:
    """Two matched concepts (or objects) and the weight of their edge."""

    truth: str
    retrieved: str
    weight: float


@dataclass(frozen=True)
class FailureMetrics:
    """CA, NCS, CE and SD of one failure, with what they were computed from."""

    ca: float | None
    ncs: float | None
    ce: int | None
    sd: float | None
    sd_binary: int | None
    sd_matches: int
    common: tuple[str, ...]
    missing: tuple[str, ...]  # in I_g only
    extra: tuple[str, ...]  # in I_r only
    aa: float | None = None
    attribute_misses: tuple[str, ...] = field(default=())  # "red circle": in I_g only
    ncs_pairs: tuple[MatchedPair, ...] = field(default=())
    count_differences: tuple[tuple[str, int, int], ...] = field(default=())  # (cat, n_g, n_r)

    @property
    def sd_rate(self) -> float | None:
        """Return the share of matched object pairs that disagree in size."""
        if self.sd_binary is None or self.sd_matches == 0:
            return None
        return self.sd_binary / self.sd_matches


def concept_agreement(truth: Iterable[str], retrieved: Iterable[str]) -> float | None:
    """Return |truth ∩ retrieved| / |truth|; None when the ground truth has no concept."""
    truth_set, retrieved_set = set(truth), set(retrieved)
    if not truth_set:
        return None
    return len(truth_set & retrieved_set) / len(truth_set)


def _full_matching(weights: Mapping[tuple[int, int], float]) -> list[tuple[int, int]]:
    """Return the minimum-weight matching of a complete bipartite graph, as (left, right).

    `weights` holds every (left index, right index) edge; the matching pairs each node of
    the smaller side (networkx's Hungarian method, `minimum_weight_full_matching`).
    """
    if not weights:
        return []
    left = sorted({i for i, _ in weights})
    right = sorted({j for _, j in weights})
    graph = nx.Graph()
    graph.add_nodes_from((("g", i) for i in left), bipartite=0)
    graph.add_nodes_from((("r", j) for j in right), bipartite=1)
    graph.add_weighted_edges_from((("g", i), ("r", j), w) for (i, j), w in weights.items())
    smaller = [("g", i) for i in left] if len(left) <= len(right) else [("r", j) for j in right]
    matching = bipartite.minimum_weight_full_matching(graph, top_nodes=smaller)
    return [(i, matching[("g", i)][1]) for i in left if ("g", i) in matching]


def max_weight_pairs(
    left: Sequence[str], right: Sequence[str], similarity: Similarity
) -> list[MatchedPair]:
    """Return the maximum-weight matching of the complete bipartite graph left × right.

    Weights must be non-negative; the matching pairs every node of the smaller side.
    """
    weights = {(i, j): similarity(a, b) for i, a in enumerate(left) for j, b in enumerate(right)}
    # Maximising Σw is minimising Σ(−w) over full matchings of the smaller side.
    matched = _full_matching({edge: -w for edge, w in weights.items()})
    pairs = [MatchedPair(left[i], right[j], weights[(i, j)]) for i, j in matched]
    return sorted(pairs, key=lambda pair: (-pair.weight, pair.truth, pair.retrieved))


def non_common_similarity(
    truth: Iterable[str], retrieved: Iterable[str], similarity: Similarity
) -> tuple[float | None, list[MatchedPair]]:
    """Return (NCS, its matched pairs); NCS is None when either side has nothing unshared."""
    truth_set, retrieved_set = set(truth), set(retrieved)
    only_truth = sorted(truth_set - retrieved_set)
    only_retrieved = sorted(retrieved_set - truth_set)
    pairs = max_weight_pairs(only_truth, only_retrieved, similarity)
    if not pairs:
        return None, []
    return sum(pair.weight for pair in pairs) / len(pairs), pairs


def relative_area_difference(a: float, b: float) -> float:
    """Return |a − b| / min(a, b), each area floored at AREA_FLOOR."""
    a, b = max(a, AREA_FLOOR), max(b, AREA_FLOOR)
    return abs(a - b) / min(a, b)


def min_weight_area_pairs(truth: Sequence[float], retrieved: Sequence[float]) -> list[float]:
    """Return the area differences of the minimum-weight full matching of two object lists."""
    differences = {
        (i, j): relative_area_difference(a, b)
        for i, a in enumerate(truth)
        for j, b in enumerate(retrieved)
    }
    return [differences[edge] for edge in _full_matching(differences)]


def size_disagreement(
    truth: ImageConcepts,
    retrieved: ImageConcepts,
    categories: Iterable[str],
    *,
    threshold: float = DEFAULT_SIZE_THRESHOLD,
) -> tuple[float | None, int | None, int]:
    """Return (SD, binary SD, matched pairs) over `categories`.

    SD is None without boxes or without a category to compare.
    """
    categories = set(categories)
    if not (truth.has_boxes and retrieved.has_boxes) or not categories:
        return None, None, 0
    total, above, matches = 0.0, 0, 0
    for category in sorted(categories):
        differences = min_weight_area_pairs(truth.areas(category), retrieved.areas(category))
        if not differences:
            continue
        total += sum(differences) / len(differences)
        above += sum(1 for d in differences if d >= threshold)
        matches += len(differences)
    return total, above, matches


def attribute_pairs(concepts: ImageConcepts, categories: Iterable[str]) -> set[tuple[str, str]]:
    """Return the (category, attribute) pairs of the image's objects of these categories."""
    wanted = set(categories)
    return {(o.category, a) for o in concepts.objects if o.category in wanted for a in o.attributes}


def attribute_agreement(
    truth: ImageConcepts, retrieved: ImageConcepts, common: Iterable[str]
) -> tuple[float | None, tuple[str, ...]]:
    """Return (AA, the ground truth's attributes the retrieved image lacks, as "red circle")."""
    common = set(common)
    wanted = attribute_pairs(truth, common)
    if not wanted:
        return None, ()
    missing = wanted - attribute_pairs(retrieved, common)
    described = tuple(sorted(f"{attribute} {category}" for category, attribute in missing))
    return 1 - len(missing) / len(wanted), described


def failure_metrics(
    truth: ImageConcepts,
    retrieved: ImageConcepts,
    similarity: Similarity,
    *,
    mentioned: frozenset[str] | None = None,
    size_threshold: float = DEFAULT_SIZE_THRESHOLD,
) -> FailureMetrics:
    """Return every metric of the failure (I_g = truth, I_r = retrieved).

    With `mentioned` (query-informed), the ground-truth side keeps only those categories.
    """
    truth_categories = truth.categories if mentioned is None else truth.categories & mentioned
    retrieved_categories = retrieved.categories
    common = truth_categories & retrieved_categories
    ncs, pairs = non_common_similarity(truth_categories, retrieved_categories, similarity)
    differences = tuple(
        (c, truth.counts[c], retrieved.counts[c])
        for c in sorted(common)
        if truth.counts[c] != retrieved.counts[c]
    )
    sd, sd_binary, sd_matches = size_disagreement(
        truth, retrieved, common, threshold=size_threshold
    )
    aa, attribute_misses = attribute_agreement(truth, retrieved, common)
    return FailureMetrics(
        ca=concept_agreement(truth_categories, retrieved_categories),
        ncs=ncs,
        ce=(
            sum(abs(n_g - n_r) for _, n_g, n_r in differences)
            if common and "labels" not in (truth.source, retrieved.source)
            else None
        ),
        sd=sd,
        sd_binary=sd_binary,
        sd_matches=sd_matches,
        common=tuple(sorted(common)),
        missing=tuple(sorted(truth_categories - retrieved_categories)),
        extra=tuple(sorted(retrieved_categories - truth_categories)),
        aa=aa,
        attribute_misses=attribute_misses,
        ncs_pairs=tuple(pairs),
        count_differences=differences,
    )
