"""Pooling annotators' top-k lists into de-duplicated candidates that remember every proposal."""

from __future__ import annotations

import itertools

import pytest

from mitl.pooling import ProposalSpec, RankedList, pool_candidates

# Two image queries (10: image 1, 11: image 2) and one caption query (20: caption 102).
# Annotators 7 and 8. Pairs are (image id, caption id).
LISTS = [
    RankedList(10, 7, ((1, 101), (1, 102), (1, 103)), (0.9, 0.8, 0.7)),
    RankedList(10, 8, ((1, 102), (1, 104), (1, 101)), (0.95, 0.6, 0.5)),
    RankedList(11, 7, ((2, 201), (2, 202), (2, 203)), (0.4, 0.3, 0.2)),
    RankedList(20, 7, ((3, 102), (1, 102), (2, 102)), (0.99, 0.98, 0.97)),
]


def by_pair(candidates):
    return {(c.image_id, c.caption_id): c for c in candidates}


def summary(candidates):
    """A comparable description of a pooling result, in output order."""
    return [
        (
            c.image_id,
            c.caption_id,
            c.query_id,
            [(p.annotator_id, p.query_id, p.rank, p.score) for p in c.proposals],
        )
        for c in candidates
    ]


def test_a_pair_proposed_by_two_annotators_becomes_one_candidate_with_both_proposals():
    pooled = by_pair(pool_candidates(LISTS[:2], k=3))
    assert sorted(pooled) == [(1, 101), (1, 102), (1, 103), (1, 104)]
    assert pooled[(1, 101)].proposals == [
        ProposalSpec(annotator_id=7, query_id=10, rank=1, score=0.9),
        ProposalSpec(annotator_id=8, query_id=10, rank=3, score=0.5),
    ]


def test_a_pair_from_an_image_query_and_a_caption_query_merges_and_keeps_both_origins():
    pooled = by_pair(pool_candidates(LISTS, k=3))
    proposals = pooled[(1, 102)].proposals
    assert [(p.query_id, p.annotator_id, p.rank, p.score) for p in proposals] == [
        (10, 7, 2, 0.8),
        (10, 8, 1, 0.95),
        (20, 7, 2, 0.98),
    ]


def test_every_proposal_of_every_list_is_kept_exactly_once():
    pooled = pool_candidates(LISTS, k=3)
    kept = sorted(
        (p.query_id, p.annotator_id, p.rank, c.image_id, c.caption_id)
        for c in pooled
        for p in c.proposals
    )
    expected = sorted(
        (ranked.query_id, ranked.annotator_id, rank, *pair)
        for ranked in LISTS
        for rank, pair in enumerate(ranked.pairs, start=1)
    )
    assert kept == expected


def test_pairs_are_unique_across_candidates():
    pooled = pool_candidates(LISTS, k=3)
    pairs = [(c.image_id, c.caption_id) for c in pooled]
    assert len(pairs) == len(set(pairs)) == 9


def test_ranks_are_one_based():
    pooled = pool_candidates(LISTS, k=3)
    ranks = {p.rank for c in pooled for p in c.proposals}
    assert ranks == {1, 2, 3}


def test_scores_are_plain_floats():
    ranked = RankedList(1, 1, ((1, 2),), (3,))
    (candidate,) = pool_candidates([ranked], k=1)
    assert type(candidate.proposals[0].score) is float
    assert candidate.proposals[0].score == 3.0


@pytest.mark.parametrize("k", [1, 2])
def test_only_the_top_k_of_each_list_are_taken(k):
    pooled = pool_candidates(LISTS, k=k)
    for c in pooled:
        assert all(p.rank <= k for p in c.proposals)
    taken = {pair for ranked in LISTS for pair in ranked.pairs[:k]}
    assert {(c.image_id, c.caption_id) for c in pooled} == taken


def test_a_pair_below_k_in_one_list_is_not_a_proposal_of_that_list():
    # (1, 101) is rank 3 for annotator 8: with k=2 only annotator 7's proposal remains.
    pooled = by_pair(pool_candidates(LISTS[:2], k=2))
    assert [p.annotator_id for p in pooled[(1, 101)].proposals] == [7]
    assert (1, 103) not in pooled  # rank 3 for annotator 7


def test_a_k_larger_than_the_lists_takes_everything():
    assert len(pool_candidates(LISTS, k=50)) == 9


def test_candidates_come_out_by_query_then_annotator_then_rank():
    pooled = pool_candidates(LISTS, k=3)
    assert [(c.image_id, c.caption_id) for c in pooled] == [
        (1, 101),  # query 10, annotator 7, ranks 1..3
        (1, 102),
        (1, 103),
        (1, 104),  # query 10, annotator 8: only its new pair
        (2, 201),  # query 11
        (2, 202),
        (2, 203),
        (3, 102),  # query 20: (1, 102) already pooled
        (2, 102),
    ]


def test_the_result_does_not_depend_on_the_order_of_the_lists():
    expected = summary(pool_candidates(LISTS, k=3))
    for permutation in itertools.permutations(LISTS):
        assert summary(pool_candidates(list(permutation), k=3)) == expected


def test_the_first_query_proposing_a_pair_owns_the_candidate():
    # Feed the caption query's list first: the candidate still belongs to the lower query id.
    pooled = by_pair(pool_candidates(reversed(LISTS), k=3))
    assert pooled[(1, 102)].query_id == 10
    assert pooled[(3, 102)].query_id == 20
    assert pooled[(2, 102)].query_id == 20


def test_a_generator_of_lists_is_accepted():
    pooled = pool_candidates((ranked for ranked in LISTS), k=3)
    assert len(pooled) == 9


def test_no_lists_give_no_candidates():
    assert pool_candidates([], k=5) == []


def test_pairs_and_scores_of_different_length_within_k_are_refused():
    broken = RankedList(1, 1, ((1, 2), (1, 3)), (0.5,))
    with pytest.raises(ValueError):
        pool_candidates([broken], k=2)
