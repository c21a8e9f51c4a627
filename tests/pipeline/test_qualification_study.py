"""The simulated crowd takes a batch's qualification round, and the study that compares the
same HITs judged without and with it."""

from __future__ import annotations

import pytest

from annotation.models import (
    Assignment,
    Batch,
    BatchState,
    HITItem,
    Judgement,
    QualificationAnswer,
    QualificationAttempt,
    Worker,
)
from mitl.config import batch_config
from pipeline.progress import StageTracker
from pipeline.qualification_study import ArmResult, qualification_study, study_table
from pipeline.simulate import crowd_simulate
from pipeline.stages import batch_create, batch_run_until

pytestmark = pytest.mark.django_db

ROUND = {"qualification_pairs": 6, "qualification_pass": 0.8, "qualification_attempts": 2}


def annotating(dataset, small_config, **extra):
    batch = batch_create(dataset=dataset, name="round", raw_config={**small_config, **extra})
    batch_run_until(batch_id=batch.pk, until=BatchState.ANNOTATING)
    batch.refresh_from_db()
    return batch


def simulate(batch, **options):
    tracker = StageTracker(batch=batch, stage=BatchState.ANNOTATING)
    return crowd_simulate(batch=batch, config=batch_config(batch), tracker=tracker, **options)


def test_only_simulated_workers_who_pass_the_round_work_on_the_batch(
    dataset, annotators, small_config
):
    batch = annotating(dataset, small_config, **ROUND)
    summary = simulate(batch, n_workers=10, careless_share=0.3, seed=2)
    passed = set(
        QualificationAttempt.objects.filter(batch=batch, passed=True).values_list(
            "worker_id", flat=True
        )
    )
    worked = set(Assignment.objects.filter(hit__batch=batch).values_list("worker_id", flat=True))
    assert worked and worked <= passed
    assert summary.qualified == len(passed)
    assert summary.qualified + summary.not_qualified == 10
    # Every try answered all six pairs, and nobody used more than the two tries.
    for attempt in QualificationAttempt.objects.filter(batch=batch):
        assert attempt.answered == 6 and attempt.finished_at is not None
        assert attempt.number <= 2
    # A careful worker's mistakes stay on the truth's side of YES / NO, so it passes every
    # round; a careless one (mostly YES) passes only by luck (about 1 in 9 with two tries).
    simulated = Worker.objects.filter(external_id__startswith="sim-")
    careful = set(simulated.filter(profile__careless=False).values_list("pk", flat=True))
    assert len(careful) == 7 and careful <= passed
    first_tries = QualificationAttempt.objects.filter(batch=batch, worker_id__in=careful)
    assert set(first_tries.values_list("number", "passed")) == {(1, True)}


def test_a_batch_without_a_round_lets_every_simulated_worker_work(
    dataset, annotators, small_config
):
    batch = annotating(dataset, small_config)
    summary = simulate(batch, n_workers=10, seed=2)
    assert summary.qualified == 0 and summary.not_qualified == 0
    assert not QualificationAttempt.objects.filter(batch=batch).exists()


def test_the_study_judges_the_same_hits_with_and_without_the_round(
    dataset, annotators, small_config
):
    without, with_round = qualification_study(
        dataset=dataset,
        annotators=small_config["annotators"],
        seed=1,
        batch_settings={**small_config, "n_image_queries": 6, "n_caption_queries": 6},
        n_workers=10,
        learning_share=0.5,
    )
    layouts = []
    for arm in (without, with_round):
        assignments = Assignment.objects.filter(hit__batch_id=arm.batch_id)
        submitted = assignments.filter(submitted_at__isnull=False)
        assert arm.submitted == submitted.count() > 0
        assert arm.golden_failed == submitted.filter(golden_passed=False).count()
        assert arm.rejected == submitted.filter(status="rejected").count()
        approved_tasks = Judgement.objects.filter(
            assignment__hit__batch_id=arm.batch_id,
            assignment__status="approved",
            item__role="task",
        )
        assert arm.task_answers == approved_tasks.count() > 0
        assert 0.5 < arm.task_accuracy <= 1.0
        # As built: a golden the crowd kept failing may have been replaced since.
        built = HITItem.objects.filter(hit__batch_id=arm.batch_id, added_after__isnull=True)
        layouts.append(
            sorted(built.values_list("hit__index", "position", "image_id", "caption_id"))
        )
    assert layouts[0] == layouts[1]  # one seed, one configuration: the same HITs
    assert without.workers_tried == 0 and without.practice_answers == 0
    assert with_round.workers_tried == 10
    assert (
        with_round.practice_answers
        == QualificationAnswer.objects.filter(attempt__batch_id=with_round.batch_id).count()
        >= 10 * 6
    )
    # Measured, then withdrawn: nobody is handed a study HIT.
    states = Batch.objects.filter(pk__in=[without.batch_id, with_round.batch_id])
    assert set(states.values_list("state", flat=True)) == {BatchState.CANCELLED}


def test_rates_and_table_are_computed_from_the_counts():
    arm = ArmResult(
        "with qualification",
        1,
        submitted=40,
        golden_failed=6,
        rejected=5,
        workers_tried=16,
        workers_passed=12,
        practice_answers=200,
        task_answers=300,
        task_answers_right=270,
    )
    assert arm.golden_failure_rate == 0.15 and arm.rejection_rate == 0.125
    assert arm.task_accuracy == 0.9
    empty = ArmResult("without qualification", 2, submitted=0, golden_failed=0, rejected=0)
    assert empty.rejection_rate == 0.0
    table = study_table([empty, arm]).splitlines()
    assert table[1].split()[-1] == "round)"
    assert table[2].split()[-4:] == ["15.0%", "12.5%", "90.0%", "12/16"]
    # Every figure sits under its heading.
    for heading, value in (("failed", "15.0%"), ("rejected", "12.5%"), ("right", "90.0%")):
        assert table[0].index(heading) + len(heading) == table[2].index(value) + len(value)
