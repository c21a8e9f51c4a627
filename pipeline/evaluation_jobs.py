"""Evaluation jobs: rankings sent to a leaderboard, checked at once, scored in the background.

Every way in reads rankings through the limits here (`evaluation_limits`, the settings
EVALUATION_MAX_BODY_MB and EVALUATION_MAX_RANKING_LENGTH, and the release's dataset for the
query count; `mitl.ranking_limits` applies them), so the page, the API and the commands
refuse the same file with the same sentence.

`evaluation_job_create` checks what is cheap while the person is still there (the limits,
the shape, the model name and whether this account may use it) and stores the checked
rankings in a job, as JSON bytes: an upload's own file as it came (a 20 MB file is checked
in a few tenths of a second; encoding it again took longer than that). Queueing it is the
task module's: `pipeline.tasks.evaluation_job_submit` leases `mitl.run_evaluation` in the
job's transaction (through `on_created`).
`evaluation_job_run` scores the rankings (`pipeline.evaluate.evaluation_submit`), writing
its progress, and records how it ended; a job that is done or failed is left alone, so a
task delivered twice does nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.job_progress import ProgressWriter
from annotation.models import EvaluationJob, EvaluationJobStatus, Release
from mitl.evaluation_inputs import DIRECTIONS, RankingsByDirection
from mitl.ranking_limits import UNLIMITED, RankingLimits, rankings_from_bytes
from pipeline.evaluate import evaluation_name_check, evaluation_submit

logger = logging.getLogger(__name__)

FINISHED = (EvaluationJobStatus.DONE, EvaluationJobStatus.FAILED)


def evaluation_limits(
    *, release: Release | None = None, max_queries: Mapping[str, int] | None = None
) -> RankingLimits:
    """Return the limits on rankings: the settings' size and depth, and the query counts.

    The query counts are the release's dataset's images (i2t) and captions (t2i), or
    `max_queries` where a command knows them otherwise; neither: no count (the API's parser,
    which reads the body before the release is known).
    """
    if release is not None:
        dataset = release.dataset
        max_queries = {"i2t": dataset.images.count(), "t2i": dataset.captions.count()}
    return RankingLimits(
        max_bytes=settings.EVALUATION_MAX_BODY_BYTES,
        max_depth=settings.EVALUATION_MAX_RANKING_LENGTH,
        max_queries=max_queries,
    )


def evaluation_job_create(
    *,
    release: Release,
    model_name: str,
    rankings: RankingsByDirection,
    rankings_file: bytes | None = None,
    submitted_by: AbstractBaseUser | None = None,
    on_created: Callable[[int], None] | None = None,
) -> EvaluationJob:
    """Store checked rankings (from `mitl.ranking_limits`) as a queued job of the release.

    `rankings_file` is the file `rankings` were read from, stored as it came; without it
    `rankings` are encoded. Raises ServiceError for a model name that is empty, too long or
    another account's. `on_created` is called with the job's id inside the transaction that
    creates it (the task module queues the job there); with eager Celery and no outer
    transaction the job has run when this returns.
    """
    name = evaluation_name_check(release=release, model_name=model_name, submitted_by=submitted_by)
    if rankings_file is None:
        rankings_file = orjson.dumps(
            {d: {str(q): ids for q, ids in rankings[d].items()} for d in DIRECTIONS}
        )
    with transaction.atomic():
        job = EvaluationJob.objects.create(
            release=release, model_name=name, rankings_json=rankings_file, submitted_by=submitted_by
        )
        if on_created is not None:
            on_created(job.pk)
    # Read back for the status the task may have set; the stored rankings are not needed.
    return EvaluationJob.objects.defer("rankings_json").get(pk=job.pk)


def evaluation_job_run(*, job_id: int) -> EvaluationJob:
    """Score a queued job's rankings, write its progress, and record how it ended.

    A job found running is run again (its worker died: nothing of it was stored, or the
    same rankings come back as the stored row).
    """
    claimed = EvaluationJob.objects.filter(
        pk=job_id, status__in=[EvaluationJobStatus.QUEUED, EvaluationJobStatus.RUNNING]
    ).update(status=EvaluationJobStatus.RUNNING, done=0, total=0)
    job = EvaluationJob.objects.select_related("release__dataset", "submitted_by").get(pk=job_id)
    if not claimed:
        return job
    running = EvaluationJob.objects.filter(pk=job_id, status=EvaluationJobStatus.RUNNING)
    try:
        evaluation = evaluation_submit(
            release=job.release,
            model_name=job.model_name,
            # Checked against the limits when they came; read again for their shape only.
            rankings=rankings_from_bytes(bytes(job.rankings_json), UNLIMITED),
            submitted_by=job.submitted_by,
            progress=ProgressWriter(EvaluationJob, job_id),
        )
    except Exception as exc:
        if isinstance(exc, ServiceError):
            message = str(exc)
            logger.info("evaluation job %s refused: %s", job_id, message)
        else:
            message = f"unexpected error: {type(exc).__name__}: {exc}"
            logger.exception("evaluation job %s failed", job_id)
        # Only while running: a twin delivery that finished first keeps its result.
        running.update(
            status=EvaluationJobStatus.FAILED,
            error=message or "failed",
            rankings_json=None,
            finished_at=timezone.now(),
        )
    else:
        running.update(
            status=EvaluationJobStatus.DONE,
            evaluation=evaluation,
            done=F("total"),
            error="",
            rankings_json=None,
            finished_at=timezone.now(),
        )
    return EvaluationJob.objects.defer("rankings_json").get(pk=job_id)


def evaluation_job_visible(job: EvaluationJob | None, user: Any) -> bool:
    """Say whether an account may follow a job: the one that sent it, or staff."""
    if job is None or not user.is_authenticated:
        return False
    return bool(user.is_staff) or job.submitted_by_id == user.pk
