"""The learned policy's feature groups: their columns, and what a training row may see."""

from __future__ import annotations

import pytest

from mitl.curation.learned import FEATURE_GROUPS_ALL, learned_order, query_features
from mitl.curation.rankings import QueryRankings

# Query 1 (image 1): annotator 7 ranks captions 10, 11, 12 (scores 0.9, 0.5, 0.1);
# annotator 8 ranks 11, 13 (scores 3.0, 1.0; another scale). Pairs in first-ranked order:
# (1,10), (1,11), (1,12), (1,13).
QUERY = QueryRankings(
    1,
    {7: [(1, 10), (1, 11), (1, 12)], 8: [(1, 11), (1, 13)]},
    "i2t",
    scores={7: [0.9, 0.5, 0.1], 8: [3.0, 1.0]},
)
ANNOTATORS = [7, 8]


def test_each_group_adds_its_columns() -> None:
    widths = {"rank": 4, "score": 4, "share": 1, "agreement": 1, "yield": 2}
    widths |= {"neighbour": 2, "sibling": 2}
    for group, width in widths.items():
        pairs, rows, judged = query_features(QUERY, ANNOTATORS, {}, (group,))
        assert pairs == [(1, 10), (1, 11), (1, 12), (1, 13)]
        assert rows.shape == (4, width), group
        assert not judged.any()
    _, rows, _ = query_features(QUERY, ANNOTATORS, {}, FEATURE_GROUPS_ALL)
    assert rows.shape == (4, sum(widths.values()))


def test_score_features_rescale_each_list_and_mark_unranked_pairs_as_far() -> None:
    _, rows, _ = query_features(QUERY, ANNOTATORS, {}, ("score",))
    # Columns: annotator 7's (score, gap), annotator 8's (score, gap).
    assert rows[:, 0] == pytest.approx([1.0, 0.5, 0.0, 0.0])
    assert rows[:, 1] == pytest.approx([0.0, 0.5, 1.0, 1.0])  # (1,13) unranked by 7: gap 1
    assert rows[:, 2] == pytest.approx([0.0, 1.0, 0.0, 0.0])
    assert rows[:, 3] == pytest.approx([1.0, 0.0, 1.0, 1.0])


def test_rankings_without_scores_give_no_score_signal() -> None:
    bare = QueryRankings(1, dict(QUERY.lists), "i2t")
    _, rows, _ = query_features(bare, ANNOTATORS, {}, ("score",))
    assert not rows[:, 0::2].any() and (rows[:, 1::2] == 1).all()


def test_agreement_counts_annotators_with_the_pair_in_their_top_k() -> None:
    deep = QueryRankings(2, {7: [(2, c) for c in range(20, 30)], 8: [(2, 29), (2, 20)]}, "i2t")
    pairs, rows, _ = query_features(deep, ANNOTATORS, {}, ("agreement", "share"))
    by_pair = dict(zip(pairs, rows.tolist(), strict=True))
    assert by_pair[(2, 20)] == [1.0, 1.0]  # rank 1 and rank 2: both top 5
    assert by_pair[(2, 29)] == [0.5, 1.0]  # rank 10 for 7 (not top 5), rank 1 for 8
    assert by_pair[(2, 25)] == [0.0, 0.5]  # rank 6 for 7 only


def test_a_training_rows_yield_leaves_its_own_answer_out() -> None:
    outcomes = {(1, 10): True, (1, 11): False, (1, 12): True}
    pairs, rows, judged = query_features(QUERY, ANNOTATORS, outcomes, ("yield",))
    yields = dict(zip(pairs, rows[:, 0].tolist(), strict=True))
    assert judged.tolist() == [True, True, True, False]
    # Judged: (1 + the other judged positives) / (2 + the other judged pairs), own label out.
    assert yields[(1, 10)] == pytest.approx((1 + 1) / (2 + 2))
    assert yields[(1, 11)] == pytest.approx((1 + 2) / (2 + 2))
    # The positive's yield is lower than the negative's: the feature cannot leak the label.
    assert yields[(1, 10)] < yields[(1, 11)]
    assert yields[(1, 13)] == pytest.approx((1 + 2) / (2 + 3))  # unjudged: every answer


def test_unknown_group_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown feature group"):
        query_features(QUERY, ANNOTATORS, {}, ("rank", "colour"))


def test_score_features_let_the_model_cut_where_the_scores_drop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One annotator, same ranks everywhere; a pair is positive iff its score is high, and
    # how many pairs score high differs by query. Only the score group can see that.
    from mitl.curation import learned

    queries, outcomes = [], {}
    for q in range(30):
        high = 1 + q % 5
        ranked = [(q, c) for c in range(100, 108)]
        scores = [1.0 - 0.01 * i if i < high else 0.3 - 0.01 * i for i in range(8)]
        queries.append(QueryRankings(q, {7: ranked}, "i2t", scores={7: scores}))
        if q < 20:
            outcomes.update({pair: i < high for i, pair in enumerate(ranked)})
    monkeypatch.setattr(learned, "FEATURE_GROUPS", ("rank", "score"))
    order = learned_order(queries, outcomes, taken=set(outcomes))
    expected = sum(1 + q % 5 for q in range(20, 30))
    top = order[:expected]
    assert all(pair[1] - 100 < 1 + pair[0] % 5 for _, pair in top)


def _image_query(query_id: int, image: int, captions: list[int]) -> QueryRankings:
    return QueryRankings(query_id, {7: [(image, c) for c in captions]}, "i2t")


def test_neighbour_evidence_rises_when_a_near_duplicates_pair_was_judged_positive() -> None:
    from mitl.curation.learned import Neighbourhood

    # Images 1 and 2 get the same captions proposed (near-duplicates); image 3 others.
    first = _image_query(1, 1, [10, 11, 12, 13])
    twin = _image_query(2, 2, [11, 10, 12, 13])
    stranger = _image_query(3, 3, [10, 30, 31, 32])
    queries = [first, twin, stranger]
    before = Neighbourhood.build(queries, {}).columns(first, [(1, 10)], "query")
    assert before.tolist() == [[0.0, 0.0]]
    seen = Neighbourhood.build(queries, {(2, 10): True}).columns(first, [(1, 10), (1, 11)], "query")
    assert seen[0, 0] == pytest.approx(1.0)  # the twin's captions are the same four
    assert seen[1].tolist() == [0.0, 0.0]  # no verdict on caption 11 anywhere
    # A YES for the stranger is weaker evidence: its proposals share one caption in seven.
    far = Neighbourhood.build(queries, {(3, 10): True}).columns(first, [(1, 10)], "query")
    assert 0 < far[0, 0] < seen[0, 0]
    # A NO lands in the second column; the pair's own verdict is never its own evidence.
    mixed = Neighbourhood.build(queries, {(2, 10): False, (1, 10): True})
    assert mixed.columns(first, [(1, 10)], "query").tolist() == [[0.0, pytest.approx(1.0)]]


def test_sibling_evidence_rises_when_an_alike_target_was_judged_positive_for_the_query() -> None:
    from mitl.curation.learned import Neighbourhood

    # Captions 10 and 11 are proposed for the same images (alike); caption 12 elsewhere.
    queries = [
        _image_query(1, 1, [10, 11, 12]),
        _image_query(2, 2, [10, 11, 20]),
        _image_query(3, 3, [11, 10, 21]),
        _image_query(4, 4, [12, 22, 23]),
    ]
    first = queries[0]
    hood = Neighbourhood.build(queries, {(1, 10): True})
    columns = hood.columns(first, [(1, 10), (1, 11), (1, 12)], "target")
    assert columns[0].tolist() == [0.0, 0.0]  # its own verdict is not its evidence
    assert columns[1, 0] == pytest.approx(1.0)  # 11 goes with the same three images as 10
    assert 0 < columns[2, 0] < columns[1, 0]  # 12 shares image 1 only: 1 of 4 images
    # Another query's verdict on caption 10 says nothing about this query's siblings.
    other = Neighbourhood.build(queries, {(2, 10): True})
    assert not other.columns(first, [(1, 11)], "target").any()


def test_neighbour_evidence_works_for_caption_queries_too() -> None:
    from mitl.curation.learned import Neighbourhood

    caption = QueryRankings(1, {7: [(i, 50) for i in (1, 2, 3)]}, "t2i")
    paraphrase = QueryRankings(2, {7: [(i, 51) for i in (2, 1, 3)]}, "t2i")
    hood = Neighbourhood.build([caption, paraphrase], {(3, 51): True})
    assert hood.columns(caption, [(3, 50), (1, 50)], "query")[:, 0] == pytest.approx([1.0, 0.0])


def test_neighbour_feature_lets_the_model_follow_near_duplicates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Twenty pairs of twin images; each twin pair shares its proposals, and whether a deep
    # caption is positive is the same for both twins. One twin of each pair is judged, the
    # other on its first half (so training rows see twins agree): the neighbour group lets
    # the model take exactly the judged twin's positives next.
    from mitl.curation import learned

    queries, outcomes, truth = [], {}, {}
    for twin in range(20):
        captions = [1000 + 10 * twin + c for c in range(8)]
        positive = {captions[c] for c in range(8) if (twin + c) % 3 == 0}
        for image in (2 * twin, 2 * twin + 1):
            query = _image_query(image, image, captions)
            queries.append(query)
            for caption in captions:
                truth[(image, caption)] = caption in positive
                if image % 2 == 0 or caption < captions[4]:
                    outcomes[(image, caption)] = caption in positive
    monkeypatch.setattr(learned, "FEATURE_GROUPS", ("rank", "neighbour"))
    order = learned_order(queries, outcomes, taken=set(outcomes))
    wanted = sum(truth[pair] for pair in truth if pair not in outcomes)
    assert all(truth[pair] for _, pair in order[:wanted])
    monkeypatch.setattr(learned, "FEATURE_GROUPS", ("rank",))
    blind = learned_order(queries, outcomes, taken=set(outcomes))
    assert not all(truth[pair] for _, pair in blind[:wanted])


def test_a_caption_query_with_one_ranked_pair_is_anchored_on_its_caption() -> None:
    from mitl.curation.learned import query_anchor

    assert query_anchor(QueryRankings(1, {7: [(3, 50)]}, "t2i")) == (1, 50)
    assert query_anchor(QueryRankings(1, {7: [(3, 50)]}, "i2t")) == (0, 3)
    assert query_anchor(QueryRankings(1, {7: [(3, 50), (4, 51)]}, "")) is None
