"""annotator_evaluate: an annotator's retrieval scored against a dataset's positive sets."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.models import PositivePair, PositiveSet, PositiveSource
from mitl.annotators import build_annotator
from mitl.retrieval.topk import retrieve_t2i
from pipeline.corpus import corpus_load

pytestmark = pytest.mark.django_db


def evaluate(*args: str) -> dict:
    out = StringIO()
    call_command("annotator_evaluate", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_scores_match_a_direct_retrieval_against_the_original_links(dataset, annotators):
    result = evaluate("small", "tfidf", "--queries-from", "original", "--against", "original",
                      "--k", "1", "--k", "3")  # fmt: skip

    loaded = corpus_load(dataset=dataset)
    annotator = build_annotator(kind="bow", name="tfidf", config={})
    annotator.prepare(loaded.corpus)
    top = retrieve_t2i(annotator, range(loaded.corpus.n_captions), 3, n_images=40)
    own = loaded.corpus.caption_image
    hits_at_1 = (top.indices[:, 0] == own).mean()
    hits_at_3 = (top.indices == own[:, None]).any(axis=1).mean()

    assert result["queries"] == 200
    assert result["scores"]["original"]["recall@1"] == pytest.approx(hits_at_1)
    assert result["scores"]["original"]["recall@3"] == pytest.approx(hits_at_3)
    # one positive per caption query: precision@1 equals recall@1
    assert result["scores"]["original"]["precision@1"] == pytest.approx(hits_at_1)


def test_queries_come_from_the_set_and_a_wider_set_scores_higher(dataset, annotators):
    original = PositiveSet.objects.get(dataset=dataset, name="original")
    queries = list(dataset.captions.order_by("ext_id").values_list("ext_id", flat=True)[:20])
    wide = PositiveSet.objects.create(
        dataset=dataset, name="everything", source=PositiveSource.IMPORTED,
        queries={"i2t": [], "t2i": queries},
    )  # fmt: skip
    PositivePair.objects.bulk_create(
        PositivePair(positive_set=wide, image=image, caption=caption)
        for image in dataset.images.all()
        for caption in dataset.captions.filter(ext_id__in=queries)
    )

    result = evaluate("small", "tfidf", "--queries-from", "everything",
                      "--against", "original", "--against", "everything", "--k", "5")  # fmt: skip

    assert result["queries"] == 20
    assert result["scores"]["everything"]["precision@5"] == 1.0
    assert result["scores"]["original"]["precision@5"] <= 0.2
    assert original.pairs.count() == 200


def test_unknown_sets_and_annotators_are_refused_clearly(dataset, annotators):
    with pytest.raises(CommandError, match="has no positive set 'cxc'"):
        evaluate("small", "tfidf", "--queries-from", "cxc", "--against", "original")
    with pytest.raises(CommandError, match="no annotator named 'clip'"):
        evaluate("small", "clip", "--queries-from", "original", "--against", "original")
