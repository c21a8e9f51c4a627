"""The batch pipeline, stage by stage, on the small synthetic dataset of `conftest.py`.

draft → retrieving → pooling → building → annotating → aggregating → released
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings

from annotation.errors import ServiceError
from annotation.handout import assignment_create
from annotation.models import (
    HIT,
    Assignment,
    Batch,
    BatchStageProgress,
    Candidate,
    Caption,
    Dataset,
    HITItem,
    Judgement,
    MachineAnnotator,
    PositivePair,
    PositiveSet,
    Proposal,
    Query,
    Ranking,
    Release,
    Verdict,
    Worker,
)
from annotation.review import assignment_review
from annotation.selectors import batch_progress
from annotation.submissions import AnswerInput, assignment_submit
from mitl.annotators import build_annotator
from mitl.config import ConfigError, batch_config
from pipeline.build import hits_build
from pipeline.corpus import corpus_load
from pipeline.pool import candidates_pool
from pipeline.progress import StageTracker
from pipeline.retrieve import rankings_compute
from pipeline.simulate import crowd_simulate
from pipeline.stages import (
    batch_create,
    batch_run_until,
    hits_missing_work,
    stage_run,
)
from pipeline.tasks import batch_start_queue, close_annotation, run_stage

POSITIVE = ("yes", "weak_yes")
AUTOMATIC_BEFORE_PEOPLE = ("retrieving", "pooling", "building")


# --- helpers -----------------------------------------------------------------------------


def to_annotating(batch: Batch) -> Batch:
    assert batch_run_until(batch_id=batch.pk, until="annotating") == "annotating"
    batch.refresh_from_db()
    return batch


def simulate(batch: Batch, **options):
    batch = Batch.objects.select_related("dataset").get(pk=batch.pk)
    tracker = StageTracker(batch=batch, stage="annotating")
    return crowd_simulate(batch=batch, config=batch_config(batch), tracker=tracker, **options)


def release_now(batch: Batch) -> Release:
    assert batch_run_until(batch_id=batch.pk, until="released", force=True) == "released"
    return Release.objects.get(batches=batch)


def row_counts() -> dict[str, int]:
    models = (Query, Ranking, Candidate, Proposal, HIT, HITItem, BatchStageProgress, Assignment)
    return {model.__name__: model.objects.count() for model in models}


def load_release(release: Release) -> tuple[dict, dict]:
    folder = Path(release.path)
    return (
        json.loads((folder / "image_to_caption.json").read_text()),
        json.loads((folder / "caption_to_image.json").read_text()),
    )


def query_ext_ids(batch: Batch) -> tuple[set[int], set[int]]:
    queries = Query.objects.filter(batch=batch)
    return (
        set(queries.filter(direction="i2t").values_list("image__ext_id", flat=True)),
        set(queries.filter(direction="t2i").values_list("caption__ext_id", flat=True)),
    )


def expected_release(pairs: set[tuple[int, int]], image_queries, caption_queries):
    """ECCV-format positives of `pairs` (ext ids) for the given queries, built independently."""
    i2t = {str(q): sorted(c for i, c in pairs if i == q) for q in image_queries}
    t2i = {str(q): sorted(i for i, c in pairs if c == q) for q in caption_queries}
    return i2t, t2i


def original_ext_pairs(dataset: Dataset) -> set[tuple[int, int]]:
    return set(
        Caption.objects.filter(dataset=dataset, is_invalid=False).values_list(
            "image__ext_id", "ext_id"
        )
    )


def answer_everything(hit: HIT, worker: Worker, level: str) -> Assignment:
    """A person answers `level` for every pair of `hit` (no follow-ups needed for yes/no)."""
    assignment = assignment_create(hit=hit, worker=worker)
    answers = [
        AnswerInput(item_id=pk, level=level) for pk in hit.items.values_list("pk", flat=True)
    ]
    assignment_submit(assignment=assignment, answers=answers, followups_required=True)
    assignment.refresh_from_db()
    return assignment


# --- retrieving -----------------------------------------------------------------------------


def test_run_until_annotating_samples_the_configured_queries(batch, small_config):
    batch = to_annotating(batch)

    assert (batch.state, batch.error) == ("annotating", "")
    directions = Counter(Query.objects.filter(batch=batch).values_list("direction", flat=True))
    assert directions == {
        "i2t": small_config["n_image_queries"],
        "t2i": small_config["n_caption_queries"],
    }
    i2t = Query.objects.filter(batch=batch, direction="i2t")
    t2i = Query.objects.filter(batch=batch, direction="t2i")
    assert (
        not i2t.filter(image__isnull=True).exists()
        and not i2t.filter(caption__isnull=False).exists()
    )
    assert (
        not t2i.filter(caption__isnull=True).exists()
        and not t2i.filter(image__isnull=False).exists()
    )
    assert i2t.filter(image__dataset=batch.dataset).values("image").distinct().count() == 8
    assert t2i.filter(caption__dataset=batch.dataset).values("caption").distinct().count() == 8


def test_query_sample_is_reproducible_from_the_seed(batch, small_config):
    twin = batch_create(dataset=batch.dataset, name="twin", raw_config=small_config)
    other = batch_create(
        dataset=batch.dataset, name="other", raw_config={**small_config, "seed": 2}
    )
    for each in (batch, twin, other):
        assert batch_run_until(batch_id=each.pk, until="pooling") == "pooling"

    def items(b):
        return sorted(
            Query.objects.filter(batch=b).values_list("direction", "image_id", "caption_id")
        )

    assert items(batch) == items(twin)
    assert items(batch) != items(other)


def test_rankings_exist_per_annotator_and_query_and_match_the_annotator(
    batch, annotators, small_config
):
    batch = to_annotating(batch)
    depth = small_config["golden_negative_depth"]
    queries = list(Query.objects.filter(batch=batch))
    rankings = Ranking.objects.filter(query__batch=batch)
    assert sorted(rankings.values_list("annotator__name", "query_id")) == sorted(
        (a.name, q.pk) for a in annotators for q in queries
    )

    loaded = corpus_load(dataset=batch.dataset)
    for annotator_row in annotators:
        annotator = build_annotator(
            kind="bow", name=annotator_row.name, config=annotator_row.config
        )
        annotator.prepare(loaded.corpus)
        for query in queries:
            ranking = rankings.get(annotator=annotator_row, query=query)
            assert len(ranking.targets) == len(ranking.scores) == depth
            assert len(set(ranking.targets)) == depth
            assert all(a >= b for a, b in zip(ranking.scores, ranking.scores[1:], strict=False))
            if query.direction == "i2t":
                row = loaded.image_rows([query.image_id])
                scores = annotator.similarity(row, np.arange(loaded.corpus.n_captions))[0]
                by_target = dict(zip(loaded.caption_pks.tolist(), scores.tolist(), strict=True))
            else:
                row = loaded.caption_rows([query.caption_id])
                scores = annotator.similarity(np.arange(loaded.corpus.n_images), row)[:, 0]
                by_target = dict(zip(loaded.image_pks.tolist(), scores.tolist(), strict=True))
            # stored targets are database ids whose scores are the annotator's, best first
            assert [by_target[t] for t in ranking.targets] == pytest.approx(
                ranking.scores, abs=1e-6
            )
            assert (
                ranking.scores[-1]
                >= max(s for t, s in by_target.items() if t not in ranking.targets) - 1e-6
            )


def test_retrieving_resumes_only_the_missing_rankings(batch):
    batch = to_annotating(batch)
    before = {
        (r.query_id, r.annotator_id): (r.pk, r.targets, r.scores)
        for r in Ranking.objects.filter(query__batch=batch)
    }
    removed = Ranking.objects.filter(query__batch=batch, annotator__name="bow-plain")
    removed_count = removed.count()
    removed.delete()

    tracker = StageTracker(batch=batch, stage="retrieving")
    written = rankings_compute(batch=batch, config=batch_config(batch), tracker=tracker)

    assert written == removed_count == 16
    after = {
        (r.query_id, r.annotator_id): (r.pk, r.targets, r.scores)
        for r in Ranking.objects.filter(query__batch=batch)
    }
    assert after.keys() == before.keys()
    for key, (_pk, targets, scores) in after.items():
        assert (targets, scores) == before[key][1:]  # recomputed identically
    kept = MachineAnnotator.objects.get(name="tfidf").pk
    assert all(after[k][0] == before[k][0] for k in after if k[1] == kept)  # untouched


# --- pooling -------------------------------------------------------------------------------


def test_pooling_deduplicates_candidates_and_keeps_every_proposal(batch, small_config):
    batch = to_annotating(batch)
    k = small_config["k"]
    queries = {q.pk: q for q in Query.objects.filter(batch=batch)}

    expected: dict[tuple[int, int], list[tuple[int, int, int, float]]] = defaultdict(list)
    for ranking in Ranking.objects.filter(query__batch=batch):
        query = queries[ranking.query_id]
        for rank, (target, score) in enumerate(
            zip(ranking.targets[:k], ranking.scores[:k], strict=True), 1
        ):
            pair = (
                (query.image_id, target) if query.direction == "i2t" else (target, query.caption_id)
            )
            expected[pair].append((ranking.annotator_id, query.pk, rank, score))

    candidates = {(c.image_id, c.caption_id): c for c in Candidate.objects.filter(batch=batch)}
    assert Candidate.objects.filter(batch=batch).count() == len(candidates) == len(expected)
    assert candidates.keys() == expected.keys()
    assert len(expected) < 32 * k  # some pairs were proposed more than once and merged
    for pair, candidate in candidates.items():
        proposals = sorted(
            candidate.proposals.values_list("annotator_id", "query_id", "rank", "score")
        )
        assert proposals == sorted(expected[pair])
        first_query = min(query for _, query, _, _ in expected[pair])
        assert candidate.query_id == first_query
        assert candidate.direction == queries[first_query].direction
    assert Proposal.objects.filter(candidate__batch=batch).count() == 32 * k


# --- building ------------------------------------------------------------------------------


def test_hits_hold_tasks_and_one_golden_of_each_kind(batch, small_config):
    batch = to_annotating(batch)
    hits = list(HIT.objects.filter(batch=batch).order_by("index"))
    n_candidates = Candidate.objects.filter(batch=batch).count()

    assert [hit.index for hit in hits] == list(
        range(math.ceil(n_candidates / small_config["hit_size"]))
    )
    originals = set(Caption.objects.filter(dataset=batch.dataset).values_list("image_id", "pk"))
    for hit in hits:
        assert hit.max_assignments == small_config["assignments_per_hit"]
        items = list(hit.items.order_by("position"))
        assert [item.position for item in items] == list(range(len(items)))
        roles = Counter(item.role for item in items)
        assert 1 <= roles["task"] <= small_config["hit_size"]
        assert (roles["golden_tp"], roles["golden_tn"]) == (1, 1)
        assert len(items) == roles["task"] + 2
        tasks = {(i.image_id, i.caption_id) for i in items if i.role == "task"}
        golden_tp = next(i for i in items if i.role == "golden_tp")
        assert (golden_tp.image_id, golden_tp.caption_id) in originals
        assert (golden_tp.image_id, golden_tp.caption_id) not in tasks
    assert sum(h.items.filter(role="task").count() for h in hits[:-1]) == small_config[
        "hit_size"
    ] * (len(hits) - 1)


def test_every_candidate_is_a_task_in_exactly_one_hit(batch):
    batch = to_annotating(batch)
    tasks = list(HITItem.objects.filter(hit__batch=batch, role="task").select_related("candidate"))
    assert Counter(item.candidate_id for item in tasks) == Counter(
        Candidate.objects.filter(batch=batch).values_list("pk", flat=True)
    )
    for item in tasks:
        assert (item.image_id, item.caption_id) == (
            item.candidate.image_id,
            item.candidate.caption_id,
        )


@pytest.mark.parametrize("depth", [10, 35])  # 35 of 40 images: most targets are ranked
def test_golden_negative_lies_outside_every_ranking_of_a_query_on_its_page(
    dataset, annotators, small_config, depth
):
    config = {**small_config, "golden_negative_depth": depth}
    batch = to_annotating(batch_create(dataset=dataset, name="deep", raw_config=config))
    assert len(Ranking.objects.filter(query__batch=batch).first().targets) == depth
    ranked: dict[int, set[int]] = defaultdict(set)
    for query_id, targets in Ranking.objects.filter(query__batch=batch).values_list(
        "query_id", "targets"
    ):
        ranked[query_id].update(targets)
    positives = set(
        PositivePair.objects.filter(positive_set__dataset=batch.dataset).values_list(
            "image_id", "caption_id"
        )
    )
    queries = {q.pk: q for q in Query.objects.filter(batch=batch)}

    for hit in HIT.objects.filter(batch=batch):
        golden = hit.items.get(role="golden_tn")
        assert (golden.image_id, golden.caption_id) not in positives
        page_queries = [
            queries[pk]
            for pk in hit.items.filter(role="task").values_list("candidate__query_id", flat=True)
        ]
        sources = [
            q
            for q in page_queries
            if (
                q.direction == "i2t"
                and q.image_id == golden.image_id
                and golden.caption_id not in ranked[q.pk]
            )
            or (
                q.direction == "t2i"
                and q.caption_id == golden.caption_id
                and golden.image_id not in ranked[q.pk]
            )
        ]
        assert sources, f"golden TN of HIT {hit.index} comes from no query of its page"


def test_golden_negative_is_never_a_known_positive(batch):
    """Known positives (any positive set of the dataset) are excluded like ranked targets."""
    assert batch_run_until(batch_id=batch.pk, until="building") == "building"
    ranked: dict[int, set[int]] = defaultdict(set)
    for query_id, targets in Ranking.objects.filter(query__batch=batch).values_list(
        "query_id", "targets"
    ):
        ranked[query_id].update(targets)
    captions = Caption.objects.filter(dataset=batch.dataset)
    # every image query is linked to all captions outside its rankings but one
    linked = set()
    for query in Query.objects.filter(batch=batch, direction="i2t"):
        own = set(captions.filter(image_id=query.image_id).values_list("pk", flat=True))
        outside = sorted(set(captions.values_list("pk", flat=True)) - ranked[query.pk] - own)
        linked |= {(query.image_id, caption) for caption in outside[1:]}
    cxc = PositiveSet.objects.create(dataset=batch.dataset, name="cxc", source="imported")
    PositivePair.objects.bulk_create(
        [PositivePair(positive_set=cxc, image_id=i, caption_id=c) for i, c in linked]
    )

    assert batch_run_until(batch_id=batch.pk, until="annotating") == "annotating"

    known = set(
        PositivePair.objects.filter(positive_set__dataset=batch.dataset).values_list(
            "image_id", "caption_id"
        )
    )
    goldens = HITItem.objects.filter(hit__batch=batch, role="golden_tn")
    assert goldens.count() == HIT.objects.filter(batch=batch).count()
    for image, caption in goldens.values_list("image_id", "caption_id"):
        assert (image, caption) not in known


# --- the state machine ---------------------------------------------------------------------


def hit_layout() -> list[tuple]:
    return list(
        HITItem.objects.order_by("pk").values_list(
            "hit_id", "position", "role", "image_id", "caption_id"
        )
    )


def test_running_each_stage_again_is_a_no_op(batch):
    batch = to_annotating(batch)
    before, layout = row_counts(), hit_layout()

    for stage in AUTOMATIC_BEFORE_PEOPLE:
        assert stage_run(batch_id=batch.pk, stage=stage) == "annotating"
    assert batch_run_until(batch_id=batch.pk, until="annotating") == "annotating"
    # the stage services themselves, called again, work out that nothing is missing
    config = batch_config(batch)

    def tracker(stage: str) -> StageTracker:
        return StageTracker(batch=batch, stage=stage)

    written = rankings_compute(batch=batch, config=config, tracker=tracker("retrieving"))
    pooled = candidates_pool(batch=batch, config=config, tracker=tracker("pooling"))
    built = hits_build(batch=batch, config=config, tracker=tracker("building"))

    assert (written, pooled, built) == (0, before["Candidate"], before["HIT"])
    assert row_counts() == before
    assert hit_layout() == layout


def test_aggregating_again_after_its_release_was_written_adds_no_second_release(batch):
    batch = to_annotating(batch)
    simulate(batch)
    assert batch_run_until(batch_id=batch.pk, until="released", force=True) == "released"
    # A retry of the stage whose state update was lost (the release row exists already).
    Batch.objects.filter(pk=batch.pk).update(state="aggregating")
    assert stage_run(batch_id=batch.pk, stage="aggregating") == "released"
    assert Release.objects.filter(batches=batch).count() == 1


def test_annotating_waits_for_people_unless_forced(batch):
    batch = to_annotating(batch)
    assert hits_missing_work(batch=batch) == HIT.objects.filter(batch=batch).count()
    assert stage_run(batch_id=batch.pk, stage="annotating") == "annotating"
    assert batch_run_until(batch_id=batch.pk, until="released") == "annotating"
    assert not Release.objects.exists()


@pytest.mark.parametrize(
    ("reached", "asked"),
    [
        ("draft", "retrieving"),
        ("draft", "pooling"),
        ("pooling", "building"),
        ("pooling", "aggregating"),
    ],
)
def test_stage_run_refuses_a_stage_the_batch_has_not_reached(batch, reached, asked):
    if reached != "draft":
        batch_run_until(batch_id=batch.pk, until=reached)
    before = row_counts()
    with pytest.raises(ServiceError, match=f"is {reached}; it cannot run {asked} yet"):
        stage_run(batch_id=batch.pk, stage=asked)
    batch.refresh_from_db()
    assert batch.state == reached
    assert row_counts() == before


def test_run_until_an_unknown_stage_is_refused(batch):
    with pytest.raises(ServiceError, match="unknown stage 'finished'"):
        batch_run_until(batch_id=batch.pk, until="finished")
    batch.refresh_from_db()
    assert batch.state == "draft"


def test_progress_rows_reach_done_equals_total_for_each_automatic_stage(batch):
    seen: list[tuple[str, int, int]] = []
    batch_run_until(batch_id=batch.pk, until="annotating", listener=lambda *call: seen.append(call))
    simulate(batch)
    release_now(batch)

    rows = {row.stage: row for row in BatchStageProgress.objects.filter(batch=batch)}
    expected_totals = {
        "retrieving": 32,
        "pooling": Candidate.objects.filter(batch=batch).count(),
        "building": HIT.objects.filter(batch=batch).count(),
        "annotating": HIT.objects.filter(batch=batch).count(),
        "aggregating": Candidate.objects.filter(batch=batch).count(),
    }
    for stage, total in expected_totals.items():
        row = rows[stage]
        assert (row.done, row.total) == (total, total), stage
        assert row.started_at is not None and row.finished_at is not None
    assert all(
        entry["finished"] and entry["done"] == entry["total"]
        for entry in batch_progress(batch=batch)
    )
    for stage in AUTOMATIC_BEFORE_PEOPLE:
        assert (stage, expected_totals[stage], expected_totals[stage]) in seen


def test_a_failing_stage_keeps_its_state_records_the_error_and_resumes(batch, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("pool exploded")

    monkeypatch.setattr("pipeline.stages.candidates_pool", broken)
    with pytest.raises(RuntimeError, match="pool exploded"):
        batch_run_until(batch_id=batch.pk, until="annotating")
    batch.refresh_from_db()
    assert (batch.state, batch.error) == ("pooling", "pooling: pool exploded")
    assert Ranking.objects.filter(query__batch=batch).count() == 32

    monkeypatch.undo()
    assert batch_run_until(batch_id=batch.pk, until="annotating") == "annotating"
    batch.refresh_from_db()
    assert batch.error == ""


def test_celery_tasks_chain_the_automatic_stages(
    batch, eager_celery, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        batch_start_queue(batch=batch)
    batch.refresh_from_db()
    assert batch.state == "annotating"  # retrieving → pooling → building, then waits for people
    assert HIT.objects.filter(batch=batch).exists()

    with pytest.raises(ServiceError, match="already started"):
        batch_start_queue(batch=batch)
    with django_capture_on_commit_callbacks(execute=True):
        assert close_annotation.delay(batch.pk).get() == "annotating"  # not forced: still waiting
        assert close_annotation.delay(batch.pk, True).get() == "aggregating"
    batch.refresh_from_db()
    assert batch.state == "released"
    assert Release.objects.filter(batches=batch).count() == 1


def test_a_task_delivered_twice_does_nothing_the_second_time(
    batch, eager_celery, django_capture_on_commit_callbacks
):
    batch_run_until(batch_id=batch.pk, until="pooling")  # the chain has queued pooling already
    with django_capture_on_commit_callbacks(execute=True) as queued:
        assert run_stage(batch.pk, "retrieving") == "pooling"  # the late duplicate
    batch.refresh_from_db()
    assert queued == []
    assert batch.state == "pooling"
    assert not Candidate.objects.filter(batch=batch).exists()


def test_a_duplicate_task_after_the_automatic_stages_queues_nothing(
    batch, eager_celery, django_capture_on_commit_callbacks
):
    to_annotating(batch)
    before = row_counts()
    with django_capture_on_commit_callbacks(execute=True) as queued:
        assert run_stage(batch.pk, "pooling") == "annotating"
    assert queued == []
    assert row_counts() == before


def test_stage_run_refuses_an_unknown_stage_with_a_service_error(batch):
    with pytest.raises(ServiceError, match="bogus"):
        stage_run(batch_id=batch.pk, stage="bogus")


def test_refusing_a_stage_that_cannot_run_does_not_mark_the_batch_failed(batch):
    with pytest.raises(ServiceError, match="not a stage that can run"):
        stage_run(batch_id=batch.pk, stage="draft")
    batch.refresh_from_db()
    assert (batch.state, batch.error) == ("draft", "")


def test_batch_create_refuses_unknown_annotators_and_too_many_queries(
    dataset, annotators, small_config
):
    with pytest.raises(ServiceError, match="unknown annotator 'clip'"):
        batch_create(
            dataset=dataset, name="x", raw_config={**small_config, "annotators": ["tfidf", "clip"]}
        )
    with pytest.raises(ServiceError, match="200 valid captions"):
        batch_create(
            dataset=dataset, name="x", raw_config={**small_config, "n_caption_queries": 201}
        )
    with pytest.raises(ConfigError, match="unknown key 'hitsize'"):
        batch_create(dataset=dataset, name="x", raw_config={**small_config, "hitsize": 3})
    assert not Batch.objects.exists()


# --- annotating (simulated crowd) ------------------------------------------------------------


def test_crowd_simulate_fills_every_slot(batch, small_config):
    batch = to_annotating(batch)
    summary = simulate(batch)

    hits = list(HIT.objects.filter(batch=batch))
    assignments = Assignment.objects.filter(hit__batch=batch)
    assert (
        summary.assignments
        == assignments.count()
        == len(hits) * small_config["assignments_per_hit"]
    )
    assert summary.approved == assignments.filter(status="approved").count()
    assert summary.flagged == assignments.filter(status="submitted", flagged=True).count()
    assert summary.approved + summary.flagged == summary.assignments
    assert not assignments.filter(status="accepted").exists()
    for hit in hits:
        work = list(hit.assignments.all())
        assert len({a.worker_id for a in work}) == hit.max_assignments
        n_items = hit.items.count()
        for assignment in work:
            assert assignment.judgements.count() == n_items
            assert assignment.worker.source == "simulated"
    progress = BatchStageProgress.objects.get(batch=batch, stage="annotating")
    assert progress.done == progress.total == len(hits)

    again = simulate(batch, seed=5)  # nothing is left open
    assert again.assignments == 0
    assert assignments.count() == summary.assignments


def test_crowd_simulate_needs_enough_workers(batch):
    batch = to_annotating(batch)
    with pytest.raises(ServiceError, match="1 simulated workers cannot fill 2 assignments"):
        simulate(batch, n_workers=1)
    assert not Assignment.objects.exists()


def test_non_synthetic_dataset_without_oracle_is_refused(batch):
    batch = to_annotating(batch)
    Dataset.objects.filter(pk=batch.dataset_id).update(meta={})
    with pytest.raises(ServiceError, match="not synthetic"):
        simulate(batch)
    assert not Assignment.objects.exists()


def test_oracle_mode_answers_from_the_reference_set(batch, tmp_path):
    batch = to_annotating(batch)
    # no synthetic truth to fall back on: the answers can only come from the oracle
    Dataset.objects.filter(pk=batch.dataset_id).update(meta={})
    candidates = list(
        Candidate.objects.filter(batch=batch)
        .order_by("pk")
        .values_list("image__ext_id", "caption__ext_id")
    )
    chosen = set(candidates[::2])
    reference = original_ext_pairs(batch.dataset) | chosen
    # half of the pairs in each file: the reference is their union
    ordered = sorted(reference)
    i2t: dict[str, list[int]] = defaultdict(list)
    t2i: dict[str, list[int]] = defaultdict(list)
    for n, (image, caption) in enumerate(ordered):
        if n % 2:
            i2t[str(image)].append(caption)
        else:
            t2i[str(caption)].append(image)
    (tmp_path / "image_to_caption.json").write_text(json.dumps(i2t))
    (tmp_path / "caption_to_image.json").write_text(json.dumps(t2i))

    summary = simulate(batch, oracle_dir=tmp_path, error_rate=0.0, careless_share=0.0)

    assert summary.flagged == 0 and summary.approved == summary.assignments > 0
    judged = Judgement.objects.filter(assignment__hit__batch=batch).values_list(
        "item__image__ext_id", "item__caption__ext_id", "level"
    )
    assert judged
    for image, caption, level in judged:
        assert level == ("yes" if (image, caption) in reference else "no")

    release = release_now(batch)
    image_queries, caption_queries = query_ext_ids(batch)
    assert load_release(release) == expected_release(
        original_ext_pairs(batch.dataset) | chosen, image_queries, caption_queries
    )


# --- aggregating and releasing ---------------------------------------------------------------


def test_release_files_load_in_eccv_caption_and_hold_every_query_and_the_positives(batch):
    from eccv_caption import Metrics

    batch = to_annotating(batch)
    simulate(batch)
    release = release_now(batch)

    batch.refresh_from_db()
    assert batch.state == "released"
    folder = Path(release.path)
    assert folder == Path(settings.RELEASES_DIR) / "small" / "1"
    assert (release.name, release.version, release.rule) == ("small", 1, "eccv")
    i2t_path, t2i_path = folder / "image_to_caption.json", folder / "caption_to_image.json"
    metrics = Metrics()
    metrics.set_eccv_gts(str(i2t_path), str(t2i_path))
    image_queries, caption_queries = query_ext_ids(batch)
    assert set(metrics.eccv_gts["i2t"]) == image_queries
    assert set(metrics.eccv_gts["t2i"]) == caption_queries

    originals = original_ext_pairs(batch.dataset)
    for image in image_queries:
        assert {c for i, c in originals if i == image} <= set(metrics.eccv_gts["i2t"][image])
    for caption in caption_queries:
        assert {i for i, c in originals if c == caption} <= set(metrics.eccv_gts["t2i"][caption])
    human = set(
        Verdict.objects.filter(candidate__batch=batch, is_positive=True).values_list(
            "candidate__image__ext_id", "candidate__caption__ext_id"
        )
    )
    assert human - originals  # the crowd found new positives …
    assert load_release(release) == expected_release(
        originals | human, image_queries, caption_queries
    )

    lines = (folder / "judgements.jsonl").read_text().splitlines()
    assert len(lines) == Judgement.objects.filter(assignment__hit__batch=batch).count()
    rows = [json.loads(line) for line in lines]
    assert {row["role"] for row in rows} == {"task", "golden_tp", "golden_tn"}
    assert {row["assignment_status"] for row in rows} <= {"approved", "submitted"}
    assert all(row["batch"] == batch.pk for row in rows)
    # Workers appear under stable pseudonyms, one per worker, never their ids.
    assert all(re.fullmatch(r"w-[0-9a-f]{16}", row["worker"]) for row in rows)
    workers = Worker.objects.filter(assignments__hit__batch=batch).distinct()
    assert len({row["worker"] for row in rows}) == workers.count()
    assert not any(worker.external_id in lines[0] for worker in workers)

    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest == release.manifest
    for name, meta in manifest["files"].items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == meta["sha256"]
    stats = json.loads((folder / "stats.json").read_text())
    assert stats["i2t"]["queries"] == 8 and stats["t2i"]["queries"] == 8
    assert stats["judgements"] == len(lines)


def test_verdicts_follow_the_eccv_majority_over_approved_assignments_only(batch):
    batch = to_annotating(batch)
    hits = list(HIT.objects.filter(batch=batch).order_by("index"))
    naysayer = Worker.objects.create(source="platform", external_id="naysayer")
    yeasayer = Worker.objects.create(source="platform", external_id="yeasayer")
    flagged = answer_everything(hits[0], naysayer, "no")  # fails the golden TP: flagged
    rejected = answer_everything(hits[1], yeasayer, "yes")  # fails the golden TN: flagged …
    assert (flagged.status, flagged.flagged, rejected.flagged) == ("submitted", True, True)
    assignment_review(
        assignment=rejected, approve=False, feedback="golden pair wrong"
    )  # … and rejected, reopening its slot
    # Exact workers pass their goldens, so every HIT gets approved work whatever the batch
    # id (the simulation's seed) is; a careless one could leave a HIT with none.
    simulate(batch, careless_share=0.0, error_rate=0.0)
    release_now(batch)

    levels: dict[int, list[str]] = defaultdict(list)
    for candidate_id, level in Judgement.objects.filter(
        assignment__hit__batch=batch, assignment__status="approved", item__role="task"
    ).values_list("item__candidate_id", "level"):
        levels[candidate_id].append(level)
    verdicts = {v.candidate_id: v for v in Verdict.objects.filter(candidate__batch=batch)}
    assert verdicts.keys() == levels.keys()
    for candidate_id, answers in levels.items():
        verdict = verdicts[candidate_id]
        yes = sum(level in POSITIVE for level in answers)
        assert verdict.is_positive == (yes > len(answers) - yes)  # a tie stays negative
        assert verdict.n_judgements == len(answers)
        assert verdict.score == pytest.approx(
            sum({"yes": 1.0, "weak_yes": 0.5}.get(level, 0.0) for level in answers) / len(answers)
        )
        assert verdict.distribution == {
            level: answers.count(level) for level in ("yes", "weak_yes", "weak_no", "no")
        }
        assert verdict.rule == "eccv"
    # the flagged and rejected answers are on record but count for nothing
    for hit, assignment in ((hits[0], flagged), (hits[1], rejected)):
        task_candidates = set(hit.items.filter(role="task").values_list("candidate_id", flat=True))
        approved = hit.assignments.filter(status="approved").count()
        assert approved >= 1
        for candidate_id in task_candidates:
            assert verdicts[candidate_id].n_judgements == approved
        assert assignment.judgements.count() == hit.items.count()
    assert any(
        verdicts[c].is_positive
        for c in hits[0].items.filter(role="task").values_list("candidate_id", flat=True)
    )  # counted, the flagged worker's NO would have tied these votes, and a tie is negative
    human = set(
        PositivePair.objects.filter(positive_set__name=f"human-batch-{batch.pk}").values_list(
            "image_id", "caption_id"
        )
    )
    assert human == {
        (v.candidate.image_id, v.candidate.caption_id) for v in verdicts.values() if v.is_positive
    }


def test_an_invalid_caption_disappears_from_the_release(batch):
    batch = to_annotating(batch)
    simulate(batch)
    image_query = Query.objects.filter(batch=batch, direction="i2t").order_by("pk").first()
    own_caption = Caption.objects.filter(image_id=image_query.image_id).order_by("pk").first()
    caption_query = (
        Query.objects.filter(batch=batch, direction="t2i")
        .exclude(caption=own_caption)
        .order_by("pk")
        .first()
    )
    invalid = {own_caption.ext_id, caption_query.caption.ext_id}
    Caption.objects.filter(ext_id__in=invalid, dataset=batch.dataset).update(
        is_invalid=True, invalid_reason="meaningless"
    )

    release = release_now(batch)

    i2t, t2i = load_release(release)
    assert own_caption.ext_id not in {c for captions in i2t.values() for c in captions}
    assert str(caption_query.caption.ext_id) not in t2i
    assert len(i2t) == 8 and len(t2i) == 7
    _, caption_queries = query_ext_ids(batch)
    assert str(image_query.image.ext_id) in i2t and i2t[str(image_query.image.ext_id)]
    assert release.manifest["invalid_captions_excluded"] == sorted(invalid)
    for captions in i2t.values():
        assert not invalid & set(captions)
    assert set(t2i) == {str(c) for c in caption_queries - invalid}


def test_a_release_never_overwrites_a_folder_left_on_disk(batch, settings):
    stray = settings.RELEASES_DIR / "small" / "1"
    stray.mkdir(parents=True)
    (stray / "keep.txt").write_text("from an earlier database")
    to_annotating(batch)
    simulate(batch)
    batch_run_until(batch_id=batch.pk, until="released", force=True)

    release = Release.objects.get(batches=batch)
    assert release.version == 2
    assert (stray / "keep.txt").read_text() == "from an earlier database"
