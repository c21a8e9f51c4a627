"""Chosen queries: a file, a positive set's queries, and skipping what earlier batches finished."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Batch, BatchState, PositiveSet, PositiveSource
from pipeline.launch import batch_create_with_queries
from tests.batch_queries import ext_ids, query_ids

pytestmark = pytest.mark.django_db


def create_with_queries_file(tmp_path, config: dict, queries: str) -> str:
    """Run batch_create with a config and a queries file; return what it printed."""
    (tmp_path / "batch.json").write_text(json.dumps(config))
    (tmp_path / "queries.json").write_text(queries)
    out = StringIO()
    call_command(
        "batch_create",
        "small",
        "--config",
        str(tmp_path / "batch.json"),
        "--queries",
        str(tmp_path / "queries.json"),
        stdout=out,
    )
    return out.getvalue()


def test_the_command_takes_a_queries_file(dataset, annotators, small_config, tmp_path):
    images, captions = ext_ids(dataset)
    queries = json.dumps({"images": images[:3], "captions": captions[5:7]})

    out = create_with_queries_file(tmp_path, small_config, queries)

    batch = Batch.objects.get(pk=int(out))
    assert query_ids(batch) == (images[:3], captions[5:7])
    assert (batch.config["n_image_queries"], batch.config["n_caption_queries"]) == (3, 2)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"images": [1, "x"]}', "`images` must be a list of integer ids"),
        ('{"pictures": [1]}', 'queries must be a JSON object {"images"'),
        ('{"images": [], "captions": []}', "name at least one image or caption"),
        ('{"images": [99999]}', "the dataset has no image with id 99999"),
        ("[1, 2", "queries.json:1: invalid JSON"),
    ],
)
def test_a_bad_queries_file_is_refused_and_creates_nothing(
    dataset, annotators, small_config, tmp_path, content, message
):
    with pytest.raises(CommandError, match=re.escape(message)):
        create_with_queries_file(tmp_path, small_config, content)
    assert not Batch.objects.exists()


def test_queries_from_takes_a_positive_sets_declared_queries(dataset, annotators, small_config):
    images, captions = ext_ids(dataset)
    PositiveSet.objects.create(
        dataset=dataset,
        name="eccv",
        source=PositiveSource.IMPORTED,
        queries={"i2t": images[2:4], "t2i": captions[:1]},
    )
    batch = batch_create_with_queries(
        dataset=dataset, name="eccv queries", raw_config={**small_config, "queries_from": "eccv"}
    )
    assert query_ids(batch) == (images[2:4], captions[:1])

    from annotation.errors import ServiceError

    with pytest.raises(ServiceError, match="has no positive set 'cxc'") as unknown:
        batch_create_with_queries(
            dataset=dataset, name="x", raw_config={**small_config, "queries_from": "cxc"}
        )
    assert unknown.value.field == "queries_from"
    with pytest.raises(ServiceError, match=r"records no queries \(it covers every image"):
        batch_create_with_queries(
            dataset=dataset, name="x", raw_config={**small_config, "queries_from": "original"}
        )


def test_skip_finished_leaves_out_the_queries_of_released_batches(
    dataset, annotators, small_config
):
    images, captions = ext_ids(dataset)
    first = batch_create_with_queries(
        dataset=dataset,
        name="first",
        raw_config=small_config,
        image_ids=images[:5],
        caption_ids=captions[:5],
    )
    Batch.objects.filter(pk=first.pk).update(state=BatchState.RELEASED)

    listed = batch_create_with_queries(
        dataset=dataset,
        name="listed",
        raw_config=small_config,
        image_ids=images[3:8],
        caption_ids=captions[4:6],
        skip_finished=True,
    )
    assert query_ids(listed) == (images[5:8], captions[5:6])
    sampled = batch_create_with_queries(
        dataset=dataset,
        name="sampled",
        raw_config={**small_config, "n_image_queries": len(images) - 5},
        skip_finished=True,
    )
    sampled_images, sampled_captions = query_ids(sampled)
    assert sorted(sampled_images) == images[5:]  # every image but the five finished
    assert len(sampled_captions) == small_config["n_caption_queries"]
    assert not set(sampled_captions) & set(captions[:5])


def test_listed_queries_override_the_configs_counts(dataset, annotators, small_config):
    images, _ = ext_ids(dataset)
    config = {**small_config, "n_image_queries": 0, "n_caption_queries": 0}
    batch = batch_create_with_queries(
        dataset=dataset, name="listed", raw_config=config, image_ids=images[:2], caption_ids=[]
    )
    assert query_ids(batch) == (images[:2], [])
    assert (batch.config["n_image_queries"], batch.config["n_caption_queries"]) == (2, 0)
