"""Concept failure metrics against the paper's worked examples, hand-worked cases, brute force."""

from __future__ import annotations

import itertools
import random

import networkx as nx
import pytest

from mitl.explain.concepts import (
    ConceptError,
    ConceptObject,
    ImageConcepts,
    captions_concepts,
    instances_concepts,
    labels_concepts,
)
from mitl.explain.mentions import caption_nouns
from mitl.explain.metrics import (
    AREA_FLOOR,
    concept_agreement,
    failure_metrics,
    max_weight_pairs,
    min_weight_area_pairs,
    non_common_similarity,
    relative_area_difference,
    size_disagreement,
)
from mitl.relevance.wordnet import wordnet_available

needs_wordnet = pytest.mark.skipif(
    not wordnet_available(), reason="WordNet (Debian wordnet-base) is not installed"
)


def image(image_id: int, *objects: tuple[str, float | None]) -> ImageConcepts:
    return ImageConcepts(image_id, tuple(ConceptObject(c, a) for c, a in objects), "instances")


def table_similarity(table: dict[frozenset[str], float]):
    def similarity(a: str, b: str) -> float:
        return 1.0 if a == b else table.get(frozenset((a, b)), 0.0)

    return similarity


def test_concept_agreement_of_the_papers_dog_examples():
    assert concept_agreement({"dog", "ball", "park"}, {"dog", "frisbee", "park"}) == 2 / 3
    assert concept_agreement({"dog", "ball", "park"}, {"cat", "fish"}) == 0.0
    assert concept_agreement(set(), {"cat"}) is None


@needs_wordnet
def test_the_papers_zebra_failure_gives_ca_3_of_11_and_ncs_0_139():
    from mitl.explain.synsets import category_similarity

    truth = ["trunk", "hill", "tree", "sky", "field", "branch", "head", "leg", "leaf"]
    truth += ["zebra", "mane"]
    retrieved = ["grassland", "field", "zebra", "mane", "grass"]
    assert concept_agreement(truth, retrieved) == pytest.approx(3 / 11)
    ncs, pairs = non_common_similarity(truth, retrieved, category_similarity)
    # The paper's matching: hill–grassland (ps 1/9) and tree–grass (ps 1/6), mean 0.139.
    assert {(p.truth, p.retrieved) for p in pairs} == {("hill", "grassland"), ("tree", "grass")}
    assert ncs == pytest.approx((1 / 9 + 1 / 6) / 2)
    assert round(ncs, 3) == 0.139


def test_ncs_prefers_the_closer_non_common_concept():
    similarity = table_similarity(
        {frozenset(("ball", "frisbee")): 0.5, frozenset(("ball", "cat")): 0.1}
    )
    close, _ = non_common_similarity(
        {"dog", "ball", "park"}, {"dog", "frisbee", "park"}, similarity
    )
    far, _ = non_common_similarity({"dog", "ball", "park"}, {"dog", "cat", "park"}, similarity)
    assert close == 0.5 and far == 0.1
    assert non_common_similarity({"dog"}, {"dog", "cat"}, similarity) == (None, [])


def brute_force_max(left, right, weight):
    small, large = (left, right) if len(left) <= len(right) else (right, left)
    best = 0.0
    for chosen in itertools.permutations(large, len(small)):
        pairs = zip(small, chosen, strict=True)
        total = sum(weight(a, b) if len(left) <= len(right) else weight(b, a) for a, b in pairs)
        best = max(best, total)
    return best


@pytest.mark.parametrize("seed", range(40))
def test_max_weight_matching_equals_brute_force_and_networkx_general_matching(seed):
    rng = random.Random(seed)
    left = [f"g{k}" for k in range(rng.randint(1, 5))]
    right = [f"r{k}" for k in range(rng.randint(1, 5))]
    weights = {(a, b): rng.choice([0.05, 0.1, 0.2, 0.25, 1 / 3, 0.5]) for a in left for b in right}
    pairs = max_weight_pairs(left, right, lambda a, b: weights[(a, b)])
    assert len(pairs) == min(len(left), len(right))
    assert len({p.truth for p in pairs}) == len(pairs) == len({p.retrieved for p in pairs})
    total = sum(p.weight for p in pairs)
    assert total == pytest.approx(brute_force_max(left, right, lambda a, b: weights[(a, b)]))
    graph = nx.Graph()
    graph.add_weighted_edges_from((a, b, w) for (a, b), w in weights.items())
    general = nx.max_weight_matching(graph)
    assert total == pytest.approx(sum(graph[a][b]["weight"] for a, b in general))


def test_concept_enumeration_of_the_papers_ten_dogs():
    truth = image(1, *[("dog", None)] * 10, ("frisbee", None))
    fewer_dogs = image(2, ("dog", None), ("frisbee", None))
    ball = image(3, *[("dog", None)] * 10, ("ball", None))
    similarity = table_similarity({})
    assert failure_metrics(truth, fewer_dogs, similarity).ce == 9
    assert failure_metrics(truth, fewer_dogs, similarity).count_differences == (("dog", 10, 1),)
    assert failure_metrics(truth, ball, similarity).ce == 0


def test_relative_area_difference_is_relative_to_the_smaller_box():
    assert relative_area_difference(0.1, 0.2) == pytest.approx(1.0)
    assert relative_area_difference(0.3, 0.1) == pytest.approx(2.0)
    assert relative_area_difference(0.0, 0.0) == 0.0
    # A degenerate box (COCO has some) is floored at AREA_FLOOR, so it stays finite.
    assert relative_area_difference(0.0, 0.1) == pytest.approx((0.1 - AREA_FLOOR) / AREA_FLOOR)


@pytest.mark.parametrize("seed", range(30))
def test_min_weight_area_matching_equals_brute_force(seed):
    rng = random.Random(seed)
    truth = [rng.choice([0.01, 0.02, 0.05, 0.1, 0.2]) for _ in range(rng.randint(1, 5))]
    retrieved = [rng.choice([0.01, 0.03, 0.05, 0.15, 0.4]) for _ in range(rng.randint(1, 5))]
    differences = min_weight_area_pairs(truth, retrieved)
    assert len(differences) == min(len(truth), len(retrieved))
    small, large = (truth, retrieved) if len(truth) <= len(retrieved) else (retrieved, truth)
    best = min(
        sum(relative_area_difference(a, b) for a, b in zip(small, chosen, strict=True))
        for chosen in itertools.permutations(large, len(small))
    )
    assert sum(differences) == pytest.approx(best)


def test_size_disagreement_sums_category_means_and_counts_pairs_over_the_threshold():
    # mane: 1 pair, difference 2.3 (≥ 1); zebra: 2 pairs, 0.5 and 0.0; field: 1 pair, 1.0.
    truth = image(1, ("mane", 0.1), ("zebra", 0.1), ("zebra", 0.2), ("field", 0.2))
    retrieved = image(
        2, ("mane", 0.33), ("mane", 0.9), ("zebra", 0.15), ("zebra", 0.2), ("field", 0.4)
    )
    sd, above, matches = size_disagreement(truth, retrieved, {"mane", "zebra", "field"})
    assert matches == 4 and above == 2
    assert sd == pytest.approx(2.3 + (0.5 + 0.0) / 2 + 1.0)
    metrics = failure_metrics(truth, retrieved, table_similarity({}))
    assert metrics.sd_rate == pytest.approx(2 / 4)
    # A zebra of 0.1 pairs with the 0.15 one (0.5), not with 0.2 (1.0): the cheaper matching.
    assert min_weight_area_pairs([0.1, 0.2], [0.15, 0.2]) == pytest.approx([0.5, 0.0])


def test_size_disagreement_is_undefined_without_boxes():
    truth = labels_concepts(1, ["dog"])
    retrieved = labels_concepts(2, ["dog", "cat"])
    assert size_disagreement(truth, retrieved, {"dog"}) == (None, None, 0)
    assert failure_metrics(truth, retrieved, table_similarity({})).sd_rate is None


def test_query_informed_keeps_only_what_the_query_mentions_on_the_truth_side():
    truth = image(1, ("dog", 0.2), ("frisbee", 0.01), ("tree", 0.3), ("sky", 0.4))
    retrieved = image(2, ("dog", 0.2), ("ball", 0.01), ("bench", 0.1))
    similarity = table_similarity({frozenset(("frisbee", "ball")): 0.5})
    agnostic = failure_metrics(truth, retrieved, similarity)
    informed = failure_metrics(
        truth, retrieved, similarity, mentioned=frozenset({"dog", "frisbee"})
    )
    assert agnostic.ca == pytest.approx(1 / 4)
    assert informed.ca == pytest.approx(1 / 2)
    assert informed.missing == ("frisbee",)
    assert informed.extra == ("ball", "bench")
    assert [(p.truth, p.retrieved, p.weight) for p in informed.ncs_pairs] == [
        ("frisbee", "ball", 0.5)
    ]


def test_instances_concepts_reads_rows_and_refuses_bad_ones():
    found = instances_concepts(7, [{"category": "Dog", "area": 0.25, "attributes": ["brown"]}])
    assert found.objects == (ConceptObject("dog", 0.25, ("brown",)),)
    assert found.has_boxes and found.source == "instances"
    with pytest.raises(ConceptError, match="image 7: instance 0 has no category"):
        instances_concepts(7, [{"area": 0.2}])
    with pytest.raises(ConceptError, match=r"area 1\.5 is not in \[0, 1\]"):
        instances_concepts(7, [{"category": "dog", "area": 1.5}])


@needs_wordnet
def test_caption_nouns_count_number_words_and_plurals():
    nouns = caption_nouns("Two men and three brown dogs chasing geese near a bench")
    assert nouns == {"man": 2, "dog": 3, "goose": 2, "bench": 1}
    concepts = captions_concepts(1, ["A dog on a bench.", "Two dogs in a park."])
    assert concepts.counts == {"dog": 2, "bench": 1, "park": 1}
    assert concepts.source == "captions" and not concepts.has_boxes


@needs_wordnet
def test_categories_mentioned_follow_hypernyms_down_not_sideways():
    from mitl.explain.mentions import categories_mentioned

    categories = ["person", "horse", "dog", "dining table", "animal"]
    mentioned = categories_mentioned("A man riding a horse near a dining table", categories)
    # A man is a kind of person, and a horse a kind of animal; a dog is not mentioned.
    assert mentioned == {"person", "horse", "dining table", "animal"}


@needs_wordnet
def test_every_listed_category_synset_exists():
    from mitl.explain.synsets import CATEGORY_SYNSETS
    from mitl.relevance.wordnet import wordnet

    for name in CATEGORY_SYNSETS.values():
        assert wordnet().synset(name).pos() == "n"


@needs_wordnet
def test_caption_nouns_keep_visible_things_not_names_places_or_abstractions():
    text = "A man's harley davidson by a group of tables and two kites on a sunny day, left side"
    # "group", "day" and "side" are not things in the picture; "harley" is not in WordNet;
    # "s" of "man's" is no word; "a group of tables" counts no table, so the plural gives 2.
    assert caption_nouns(text) == {"man": 1, "table": 2, "kite": 2}


def test_attribute_agreement_sees_the_colour_and_size_that_ca_cannot():
    def shape(image_id: int, *objects: tuple[str, tuple[str, ...]]) -> ImageConcepts:
        return ImageConcepts(
            image_id, tuple(ConceptObject(c, 0.1, a) for c, a in objects), "instances"
        )

    truth = shape(1, ("circle", ("red", "large")), ("square", ("blue", "small")))
    retrieved = shape(2, ("circle", ("green", "large")), ("square", ("blue", "small")))
    metrics = failure_metrics(truth, retrieved, table_similarity({}))
    assert metrics.ca == 1.0  # the same shapes…
    assert metrics.aa == pytest.approx(3 / 4)  # …but the circle is green: 3 of 4 pairs kept
    assert metrics.attribute_misses == ("red circle",)
    # Only common categories count: a missing square's attributes are CA's business.
    lone = shape(3, ("circle", ("red", "large")))
    assert failure_metrics(truth, lone, table_similarity({})).aa == 1.0
    assert (
        failure_metrics(
            labels_concepts(1, ["dog"]), labels_concepts(2, ["dog"]), table_similarity({})
        ).aa
        is None
    )


def test_an_unrelated_image_gets_no_ce_or_sd_rather_than_a_perfect_zero():
    truth = image(1, ("dog", 0.2), ("dog", 0.1))
    unrelated = image(2, ("car", 0.3))
    one_dog = image(3, ("dog", 0.2))
    similarity = table_similarity({})
    far = failure_metrics(truth, unrelated, similarity)
    assert (far.ce, far.sd, far.sd_rate) == (None, None, None)
    near = failure_metrics(truth, one_dog, similarity)
    assert near.ce == 1 and near.sd == 0.0
    # Class labels carry no counts: CE is undefined rather than always 0.
    labels = failure_metrics(
        labels_concepts(1, ["dog"]), labels_concepts(2, ["dog", "cat"]), similarity
    )
    assert labels.ce is None


def test_a_zero_area_box_keeps_every_summary_finite():
    from mitl.explain.failures import ExplainInputs, explain_direction

    concepts = {1: image(1, ("dog", 0.0)), 2: image(2, ("dog", 0.2))}
    inputs = ExplainInputs(
        positives={"t2i": {10: [1]}, "i2t": {}},
        caption_image={10: 1},
        concepts=concepts,
        similarity=table_similarity({}),
    )
    result = explain_direction("t2i", {10: [2, 1]}, inputs)
    sd = result["agnostic"]["means"]["sd"]
    assert sd == pytest.approx((0.2 - AREA_FLOOR) / AREA_FLOOR)
    assert sum(result["agnostic"]["histograms"]["sd"]["counts"]) == 1


@needs_wordnet
def test_caption_words_of_one_sense_are_one_concept():
    concepts = captions_concepts(1, ["Two people on a couch.", "A person on a sofa, three stars."])
    # people → person, couch → sofa; the table's names (star) keep their own name.
    assert concepts.counts == {"person": 2, "sofa": 1, "star": 3}
