"""One cumulative truth per dataset: releases cover every released batch, never lose a paid
positive, and the estimate speaks about exactly what the release ships."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from annotation.models import Batch, Candidate, Judgement, Query, Release
from mitl.config import batch_config
from mitl.release_files import I2T_FILE, STATS_FILE, T2I_FILE, VERDICTS_FILE
from pipeline.demo import rounds_run
from pipeline.release import release_create
from pipeline.stages import batch_create
from pipeline.truth import cumulative_verdicts
from tests.pipeline_runs import run_to_release

pytestmark = pytest.mark.django_db


@pytest.fixture
def adaptive_config(small_config) -> dict:
    return {
        **small_config,
        "strategy": "adaptive",
        "adjudication": "learned",
        "budget_judgements": 200,
        "round_size": 70,
        "ranking_depth": 20,
        "estimate_share": 0.25,
    }


def adaptive_run(dataset, config: dict, seed: int) -> Batch:
    batch = batch_create(dataset=dataset, name=f"adaptive {seed}", raw_config=config)
    rounds_run(batch, n_workers=6, seed=seed)
    batch.refresh_from_db()
    return batch


def release_pairs(release: Release) -> set[tuple[str, int, int]]:
    folder = Path(release.path)
    pairs = set()
    for direction, name in (("i2t", I2T_FILE), ("t2i", T2I_FILE)):
        for query, targets in json.loads((folder / name).read_text()).items():
            pairs |= {(direction, int(query), int(target)) for target in targets}
    return pairs


def query_items(batch: Batch) -> set[tuple[str, int | None, int | None]]:
    return set(Query.objects.filter(batch=batch).values_list("direction", "image_id", "caption_id"))


def test_a_second_batch_keeps_the_first_release_and_judges_only_what_is_missing(
    dataset, annotators, adaptive_config
):
    first = adaptive_run(dataset, adaptive_config, seed=3)
    release_1 = Release.objects.get(batches=first)
    second = adaptive_run(dataset, adaptive_config, seed=4)
    assert query_items(first) == query_items(second)  # same seed: the same queries
    release_2 = Release.objects.filter(batches=second).latest("version")

    assert release_2.version == release_1.version + 1
    assert set(release_2.batches.values_list("pk", flat=True)) == {first.pk, second.pk}
    stats = json.loads((Path(release_2.path) / STATS_FILE).read_text())
    before, after = release_pairs(release_1), release_pairs(release_2)
    removed = {(r["direction"], r["query"], r["target"]) for r in stats["changes"]["removed_pairs"]}
    assert before - after == removed
    assert all(
        r["reason"] == "overturned by a later verdict" for r in stats["changes"]["removed_pairs"]
    )
    assert stats["changes"]["added"] == len(after - before)
    # The second batch never paid again for a pair the first one decided.
    judged_first = set(
        Candidate.objects.filter(batch=first, verdict__isnull=False).values_list(
            "image_id", "caption_id"
        )
    )
    chosen_second = set(
        Candidate.objects.filter(batch=second).values_list("image_id", "caption_id")
    )
    assert not judged_first & chosen_second
    # Every crowd positive is credited to the batch that found it.
    by_batch = stats["positives_by_batch"]
    assert set(by_batch) == {str(first.pk), str(second.pk)}
    assert sum(by_batch.values()) == stats["verdicts"]["positive"] > 0
    assert by_batch[str(first.pk)] > 0
    datasheet = (Path(release_2.path) / "README.md").read_text()
    assert f"Since version {release_1.version}:" in datasheet


def test_the_release_estimate_counts_exactly_the_release_positives(
    dataset, annotators, adaptive_config
):
    first = adaptive_run(dataset, adaptive_config, seed=3)
    second = adaptive_run(dataset, adaptive_config, seed=4)
    release = Release.objects.filter(batches=second).latest("version")
    stats = json.loads((Path(release.path) / STATS_FILE).read_text())
    for direction in ("i2t", "t2i"):
        values = stats["curation"]["directions"][direction]
        assert values["found"] == stats[direction]["positives_extended"]
        estimate = values["estimate"]
        assert estimate is not None and estimate["found"] == values["found"]
        assert 0 <= estimate["recall_low"] <= estimate["recall"] <= estimate["recall_high"] <= 1
    # Both batches' samples speak for the queries: the second batch's report uses them all.
    report = second.reports["curation"]["directions"]["i2t"]["estimate"]
    first_rounds = len(first.reports["curation"]["rounds"])
    assert report["rounds_used"] > 0 and first_rounds > 0


def test_a_pair_judged_in_two_batches_gets_one_verdict_from_all_its_answers(
    dataset, annotators, small_config
):
    first = run_to_release(batch_create(dataset=dataset, name="one", raw_config=small_config))
    second = run_to_release(batch_create(dataset=dataset, name="two", raw_config=small_config))
    pairs = lambda b: set(  # noqa: E731
        Candidate.objects.filter(batch=b).values_list("image_id", "caption_id")
    )
    shared = sorted(pairs(first) & pairs(second))
    assert shared, "fixed pooling on the same queries proposes the same pairs"
    verdicts = cumulative_verdicts(
        batch_ids=[first.pk, second.pk], rule=batch_config(second).aggregation
    )
    pair = shared[0]
    answers = Judgement.objects.filter(
        item__image_id=pair[0],
        item__caption_id=pair[1],
        item__role="task",
        assignment__status="approved",
        assignment__hit__batch__in=[first, second],
    ).count()
    assert verdicts[pair].n_judgements == answers
    assert verdicts[pair].batches == (first.pk, second.pk)
    release = Release.objects.filter(batches=second).latest("version")
    rows = list(csv.DictReader((Path(release.path) / VERDICTS_FILE).open()))
    assert any(r["batches"] == f"{first.pk} {second.pk}" for r in rows)
    assert len({(r["image_id"], r["caption_id"]) for r in rows}) == len(rows)  # one per pair


def test_a_release_of_one_batch_alone_stays_possible(dataset, annotators, small_config):
    first = run_to_release(batch_create(dataset=dataset, name="one", raw_config=small_config))
    second = run_to_release(batch_create(dataset=dataset, name="two", raw_config=small_config))
    alone = release_create(batch=second, config=batch_config(second), name="study", only_batch=True)
    assert list(alone.batches.values_list("pk", flat=True)) == [second.pk]
    covering = Release.objects.filter(batches=second).exclude(name="study").latest("version")
    assert set(covering.batches.values_list("pk", flat=True)) == {first.pk, second.pk}
    manifest = json.loads((Path(alone.path) / "manifest.json").read_text())
    assert manifest["batches"] == [second.pk]


def test_a_target_recall_needs_an_estimate_to_certify_it(small_config, adaptive_config):
    from mitl.config import ConfigError, parse_batch_config

    with pytest.raises(ConfigError) as fixed:
        parse_batch_config({**small_config, "target_recall": 0.8})
    assert fixed.value.key == "target_recall"
    with pytest.raises(ConfigError):
        parse_batch_config({**adaptive_config, "estimate_share": 0, "target_recall": 0.8})
    with pytest.raises(ConfigError):
        parse_batch_config({**adaptive_config, "target_recall": 1.5})
    assert parse_batch_config({**adaptive_config, "target_recall": 0.8}).target_recall == 0.8


def test_rounds_stop_once_the_lower_recall_bound_reaches_the_target(
    dataset, annotators, adaptive_config
):
    from annotation.budget import judgements_spent

    batch = adaptive_run(dataset, {**adaptive_config, "target_recall": 0.01}, seed=3)
    report = batch.reports["curation"]
    assert report["target_reached"] is True
    assert all(d["estimate"]["recall_low"] >= 0.01 for d in report["directions"].values())
    # It stopped for the target, with budget left for more rounds.
    spent = judgements_spent(batch_id=batch.pk, items_per_hit=10)
    assert spent + 20 <= adaptive_config["budget_judgements"]
    release = Release.objects.filter(batches=batch).latest("version")
    assert "Target recall 0.01: reached" in (Path(release.path) / "README.md").read_text()
