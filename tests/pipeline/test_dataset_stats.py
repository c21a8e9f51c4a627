"""Dataset statistics (ECCV Caption Tables 2 and 3): positives over a query subset, the
factor over the original, and precision/recall against the human-verified positives."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from mitl.dataset_stats import (
    QuerySubset,
    SetPairs,
    count_positives,
    dataset_stats,
    stats_as_json,
    stats_table,
)


def subset(images=(), captions=()) -> QuerySubset:
    return QuerySubset(frozenset(images), frozenset(captions))


ORIGINAL = SetPairs("original", "original", frozenset({(1, 11), (1, 12), (2, 21), (3, 31)}))
EXTENDED = SetPairs("extended", "imported", ORIGINAL.pairs | {(1, 21), (2, 11), (3, 11), (1, 31)})
HUMAN = SetPairs("human-a", "human", frozenset({(1, 11), (1, 21), (3, 11), (2, 21)}))


# --- pure counting -------------------------------------------------------------------------


def test_positive_images_sum_over_caption_queries_and_captions_over_image_queries():
    # Caption 11 has images 1, 2, 3 and caption 21 has 1, 2: five positive images.
    # Image 1 has captions 11, 12, 21, 31: four positive captions.
    assert count_positives(EXTENDED.pairs, subset(images=[1], captions=[11, 21])) == (5, 4)


def test_pairs_outside_the_query_subset_are_not_counted():
    assert count_positives(ORIGINAL.pairs, subset()) == (0, 0)
    assert count_positives(ORIGINAL.pairs, subset(images=[9], captions=[99])) == (0, 0)


def test_factors_divide_by_the_original_over_the_same_queries():
    stats = dataset_stats(
        [ORIGINAL, EXTENDED], subset(images=[1, 2], captions=[11, 21]), original="original"
    )
    original, extended = stats.rows
    assert (original.positive_images, original.positive_captions) == (2, 3)
    assert (original.image_factor, original.caption_factor) == (1.0, 1.0)
    assert (extended.positive_images, extended.positive_captions) == (5, 6)
    assert extended.image_factor == pytest.approx(5 / 2)
    assert extended.caption_factor == pytest.approx(6 / 3)
    assert (stats.image_queries, stats.caption_queries) == (2, 2)


def test_without_an_original_set_there_is_no_factor():
    stats = dataset_stats([EXTENDED], subset(images=[1], captions=[11]), original=None)
    assert (stats.rows[0].image_factor, stats.rows[0].caption_factor) == (None, None)


def test_without_human_verified_positives_precision_and_recall_are_not_available():
    stats = dataset_stats([ORIGINAL, EXTENDED], subset([1], [11]), original="original")
    assert all(row.i2t is None and row.t2i is None for row in stats.rows)
    assert stats.human == ()
    table = stats_table(stats, queries_label="all")
    assert "P / R: n/a" in table
    assert table.count("n/a") == 1 + 2 * len(stats.rows)
    assert stats_as_json(stats)["rows"][0]["i2t"] is None


def test_precision_and_recall_against_the_human_positives_per_direction():
    stats = dataset_stats(
        [ORIGINAL, EXTENDED, HUMAN],
        subset(images=[1], captions=[11]),
        original="original",
        human=["human-a"],
    )
    original, extended, human = stats.rows
    # Image query 1: humans verified captions 11 and 21; the original has 11 and 12.
    assert (original.i2t.precision, original.i2t.recall) == (1 / 2, 1 / 2)
    # Caption query 11: humans verified images 1 and 3; the original has image 1.
    assert (original.t2i.precision, original.t2i.recall) == (1.0, 1 / 2)
    # The extended set has captions 11, 12, 21, 31 for image 1 and images 1, 2, 3 for 11.
    assert (extended.i2t.precision, extended.i2t.recall) == (2 / 4, 1.0)
    assert (extended.t2i.precision, extended.t2i.recall) == (2 / 3, 1.0)
    assert (extended.t2i.predicted, extended.t2i.true, extended.t2i.both) == (3, 2, 2)
    assert (human.i2t.precision, human.t2i.recall) == (1.0, 1.0)


def test_precision_and_recall_use_only_the_queries_the_humans_judged():
    everything = subset(images=[1, 2, 3], captions=[11, 21, 31])
    stats = dataset_stats(
        [ORIGINAL, HUMAN],
        everything,
        original="original",
        human=["human-a"],
        human_queries=subset(images=[2], captions=[]),
    )
    original = stats.rows[0]
    assert (stats.human_image_queries, stats.human_caption_queries) == (1, 0)
    assert (original.i2t.precision, original.i2t.recall) == (1.0, 1.0)  # image 2: caption 21
    assert original.t2i is None  # no caption query was judged
    assert original.positive_captions == 4  # the counts still cover every query


def test_the_truth_is_the_union_of_every_human_set():
    other = SetPairs("human-b", "human", frozenset({(1, 12)}))
    stats = dataset_stats(
        [ORIGINAL, HUMAN, other], subset([1], []), original="original", human=["human-a", "human-b"]
    )
    assert stats.rows[0].i2t.true == 3  # (1, 11), (1, 21) and (1, 12)
    assert stats.rows[0].i2t.precision == 1.0


def test_an_unknown_reference_set_is_an_error():
    with pytest.raises(ValueError, match="no positive set named 'human-x'"):
        dataset_stats([ORIGINAL], subset(), original="original", human=["human-x"])


def test_the_table_shows_counts_with_factors_and_percentages():
    stats = dataset_stats(
        [ORIGINAL, EXTENDED, HUMAN], subset([1], [11]), original="original", human=["human-a"]
    )
    table = stats_table(stats, queries_label="the queries of 'x'")
    lines = table.splitlines()
    assert lines[0] == "1 image queries and 1 caption queries (the queries of 'x')"
    extended = next(line for line in lines if line.startswith("extended"))
    assert extended.split() == [
        *["extended", "imported", "3", "(×3.00)", "4", "(×2.00)"],
        *["50.0", "/", "100.0", "66.7", "/", "100.0"],
    ]
    assert "'human-a',\n       over the 1 image and 1 caption queries they judged." in table


# --- the ORM edge and the command ------------------------------------------------------------

TSV = [
    "caption_id\timage_id\tfile_name\tcaption",
    "11\t1\ta.jpg\tOne.",
    "12\t1\ta.jpg\tOne again.",
    "21\t2\tb.jpg\tTwo.",
    "22\t2\tb.jpg\tTwo again.",
    "31\t3\tc.jpg\tThree.",
    "41\t4\td.jpg\tFour.",
]


@pytest.fixture
def tiny(db, tmp_path: Path):
    """Four images, six captions, the original set and an imported set with queries."""
    from annotation.imports.datasets import dataset_import_tsv
    from annotation.models import PositivePair, PositiveSet

    tsv = tmp_path / "captions.tsv"
    tsv.write_text("\n".join(TSV) + "\n")
    dataset = dataset_import_tsv(name="tiny", captions_path=tsv)
    extended = PositiveSet.objects.create(
        dataset=dataset,
        name="extended",
        source="imported",
        queries={"i2t": [1, 2], "t2i": [11, 21, 31]},
    )
    add_pairs(extended, [(1, 11), (1, 12), (2, 21), (2, 22), (3, 31), (4, 41)])
    add_pairs(extended, [(1, 21), (2, 11), (3, 11), (1, 31)])
    assert PositivePair.objects.filter(positive_set=extended).count() == 10
    return dataset


def add_pairs(positive_set, pairs: list[tuple[int, int]]) -> None:
    from annotation.models import Caption, Image, PositivePair

    images = dict(Image.objects.filter(dataset=positive_set.dataset).values_list("ext_id", "pk"))
    captions = dict(
        Caption.objects.filter(dataset=positive_set.dataset).values_list("ext_id", "pk")
    )
    PositivePair.objects.bulk_create(
        [
            PositivePair(positive_set=positive_set, image_id=images[i], caption_id=captions[c])
            for i, c in pairs
        ]
    )


def human_batch_set(dataset, *, image_queries, caption_queries, pairs):
    """A batch with these queries and its aggregated human-verified set (no `queries`)."""
    from annotation.models import Batch, PositiveSet, Query
    from pipeline.aggregate import human_set_name

    batch = Batch.objects.create(dataset=dataset, name="b", config={})
    for ext_id in image_queries:
        Query.objects.create(batch=batch, direction="i2t", image=dataset.images.get(ext_id=ext_id))
    for ext_id in caption_queries:
        Query.objects.create(
            batch=batch, direction="t2i", caption=dataset.captions.get(ext_id=ext_id)
        )
    human = PositiveSet.objects.create(dataset=dataset, name=human_set_name(batch), source="human")
    add_pairs(human, pairs)
    return human


def test_statistics_over_the_queries_of_an_imported_set(tiny):
    from pipeline.dataset_stats import dataset_stats_compute

    stats = dataset_stats_compute(dataset=tiny, queries_from="extended")

    assert (stats.image_queries, stats.caption_queries) == (2, 3)
    original, extended = stats.rows
    assert (original.name, original.positive_images, original.positive_captions) == (
        "original",
        3,
        4,
    )
    assert (extended.positive_images, extended.positive_captions) == (7, 7)
    assert extended.image_factor == pytest.approx(7 / 3)
    assert extended.caption_factor == pytest.approx(7 / 4)


def test_by_default_every_image_and_caption_is_a_query(tiny):
    from pipeline.dataset_stats import dataset_stats_compute

    stats = dataset_stats_compute(dataset=tiny)
    assert (stats.image_queries, stats.caption_queries) == (4, 6)
    original, extended = stats.rows
    assert (original.positive_images, original.positive_captions) == (6, 6)
    assert (extended.positive_images, extended.positive_captions) == (10, 10)


def test_invalid_captions_are_neither_queries_nor_positives(tiny):
    from pipeline.dataset_stats import dataset_stats_compute

    tiny.captions.filter(ext_id=31).update(
        is_invalid=True, invalid_reason="meaningless", invalid_marked_at="2024-01-01T00:00Z"
    )
    stats = dataset_stats_compute(dataset=tiny, queries_from="extended")
    assert stats.caption_queries == 2
    extended = stats.rows[1]
    assert (extended.positive_images, extended.positive_captions) == (5, 6)


def test_a_batch_human_set_is_judged_over_its_batch_queries_only(tiny):
    from pipeline.dataset_stats import dataset_stats_compute

    human = human_batch_set(
        tiny, image_queries=[1], caption_queries=[11], pairs=[(1, 11), (1, 21), (3, 11), (4, 41)]
    )

    stats = dataset_stats_compute(dataset=tiny, queries_from="extended")

    assert stats.human == (human.name,)
    assert [row.name for row in stats.rows] == ["original", "extended", human.name]
    assert (stats.human_image_queries, stats.human_caption_queries) == (1, 1)
    original, extended, _ = stats.rows
    assert (original.i2t.precision, original.i2t.recall) == (1 / 2, 1 / 2)
    assert (original.t2i.precision, original.t2i.recall) == (1.0, 1 / 2)
    assert (extended.i2t.precision, extended.i2t.recall) == (2 / 4, 1.0)
    assert (extended.t2i.precision, extended.t2i.recall) == (2 / 3, 1.0)


def test_command_prints_a_table_and_json(tiny):
    out = StringIO()
    call_command("dataset_stats", "tiny", "--queries-from", "extended", stdout=out)
    table = out.getvalue()
    assert table.startswith(
        "dataset 'tiny': 2 image queries and 3 caption queries (the queries of 'extended')"
    )
    assert "7 (×2.33)" in table and "7 (×1.75)" in table
    assert "P / R: n/a" in table

    out = StringIO()
    call_command("dataset_stats", "tiny", "--json", stdout=out)
    payload = json.loads(out.getvalue())
    assert (payload["dataset"], payload["queries_from"], payload["image_queries"]) == (
        "tiny",
        None,
        4,
    )
    assert [row["name"] for row in payload["rows"]] == ["original", "extended"]
    assert payload["rows"][1]["positive_images"] == 10
    assert payload["rows"][1]["t2i"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "no dataset named 'nope'"),
        (
            ["tiny", "--queries-from", "eccv"],
            r"no positive set 'eccv' \(it has: extended, original\)",
        ),
    ],
)
def test_command_turns_bad_names_into_command_errors(tiny, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("dataset_stats", *args, stdout=StringIO())
