"""Evaluation jobs (pipeline/evaluation_jobs.py): stored at once, scored by their task."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.models import Evaluation, EvaluationJob, LeaseState, TaskLease
from annotation.task_leases import leases_recover
from pipeline.evaluation_jobs import evaluation_job_create, evaluation_job_run, evaluation_limits
from pipeline.leases import evaluation_lease
from pipeline.tasks import evaluation_job_submit

from . import test_evaluate_service
from .test_evaluate_service import model_rankings

release = test_evaluate_service.release  # the fixture: a release of 4 + 4 queries

pytestmark = pytest.mark.django_db


def test_a_job_is_stored_queued_and_scored_once_by_its_task(
    release, django_user_model, django_capture_on_commit_callbacks
):
    user = django_user_model.objects.create_user("ann")
    with django_capture_on_commit_callbacks(execute=False) as queued:
        job = evaluation_job_submit(
            release=release,
            model_name=" m ",
            rankings=model_rankings(release, 1),
            submitted_by=user,
        )
    assert (job.status, job.model_name, Evaluation.objects.count()) == ("queued", "m", 0)
    stored = EvaluationJob.objects.get(pk=job.pk).rankings_json
    assert set(json.loads(bytes(stored))) == {"i2t", "t2i"}

    queued[0]()  # mitl.run_evaluation, eager

    job.refresh_from_db()
    assert (job.status, job.done, job.total, job.error) == ("done", 5, 5, "")
    assert job.rankings_json is None
    assert job.evaluation == Evaluation.objects.get(model_name="m", submitted_by=user)
    assert job.finished_at is not None
    again = evaluation_job_run(job_id=job.pk)  # a second delivery does nothing
    assert (again.status, again.finished_at) == ("done", job.finished_at)


def test_a_job_found_running_is_run_again_and_a_failure_is_recorded(release):
    rankings = model_rankings(release, 1)
    job = evaluation_job_create(release=release, model_name="m", rankings=rankings)
    EvaluationJob.objects.filter(pk=job.pk).update(status="running", done=2, total=5)
    assert evaluation_job_run(job_id=job.pk).status == "done"

    missing = {"i2t": dict(list(rankings["i2t"].items())[1:]), "t2i": rankings["t2i"]}
    failing = evaluation_job_create(release=release, model_name="n", rankings=missing)
    failed = evaluation_job_run(job_id=failing.pk)
    assert failed.status == "failed" and "queries have no ranking" in failed.error
    assert failed.rankings_json is None and not Evaluation.objects.filter(model_name="n").exists()


def test_a_bad_or_taken_name_is_refused_before_any_job_exists(release, django_user_model):
    rankings = model_rankings(release, 1)
    owner = django_user_model.objects.create_user("owner")
    evaluation_job_run(
        job_id=evaluation_job_create(
            release=release, model_name="taken", rankings=rankings, submitted_by=owner
        ).pk
    )
    other = django_user_model.objects.create_user("other")
    with pytest.raises(ServiceError, match="submitted by another account"):
        evaluation_job_create(
            release=release, model_name="taken", rankings=rankings, submitted_by=other
        )
    with pytest.raises(ServiceError, match="1 to 200 characters"):
        evaluation_job_create(release=release, model_name=" ", rankings=rankings)
    assert EvaluationJob.objects.count() == 1


def test_a_job_whose_worker_is_lost_too_often_fails_saying_so(release, settings):
    settings.TASK_MAX_RESENDS = 1
    job = evaluation_job_create(
        release=release, model_name="m", rankings=model_rankings(release, 1)
    )
    spec = evaluation_lease(job.pk)
    TaskLease.objects.create(
        key=spec.key,
        task="mitl.run_evaluation",
        args=[job.pk],
        state=LeaseState.RUNNING,
        holder="gone",
        queued_at=timezone.now() - timedelta(hours=1),
        heartbeat_at=timezone.now() - timedelta(hours=1),
        resent=1,
        evaluation_job_id=spec.evaluation_job_id,
    )

    assert leases_recover().abandoned == [spec.key]

    job.refresh_from_db()
    assert job.status == "failed" and "lost its worker 2 times" in job.error
    assert job.rankings_json is None


def test_the_limits_come_from_the_settings_and_the_releases_dataset(release, settings):
    settings.EVALUATION_MAX_BODY_BYTES, settings.EVALUATION_MAX_RANKING_LENGTH = 2048, 30
    limits = evaluation_limits(release=release)
    dataset = release.dataset
    assert (limits.max_bytes, limits.max_depth) == (2048, 30)
    assert limits.max_queries == {"i2t": dataset.images.count(), "t2i": dataset.captions.count()}
    assert evaluation_limits().max_queries is None
