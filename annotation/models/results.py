"""Results: aggregated verdicts per pair, immutable releases and models scored on them."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from .batch import Batch, Candidate
from .dataset import Dataset


class Verdict(models.Model):
    """The aggregated judgement of one candidate pair over approved assignments."""

    candidate = models.OneToOneField(Candidate, on_delete=models.CASCADE, related_name="verdict")
    rule = models.CharField(max_length=32, help_text="Aggregation rule, e.g. eccv.")
    is_positive = models.BooleanField(help_text="The pair is a positive under the rule.")
    score = models.FloatField(help_text="Graded relevance: mean of 1 / 0.5 / 0 / 0 (ECCV eq. E.4).")
    confidence = models.FloatField(help_text="Share of judgements agreeing with the label.")
    n_judgements = models.PositiveSmallIntegerField()
    distribution = models.JSONField(help_text="Answer counts per level, e.g. {'yes': 2, 'no': 1}.")

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(score__gte=0, score__lte=1, confidence__gte=0, confidence__lte=1),
                name="verdict_unit_interval",
            ),
            models.CheckConstraint(condition=Q(n_judgements__gte=1), name="verdict_has_judgements"),
        ]

    def __str__(self) -> str:
        return f"{'positive' if self.is_positive else 'negative'} ({self.n_judgements} judgements)"


class Release(models.Model):
    """An immutable, versioned export of extended positive sets, written to disk."""

    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="releases")
    batches = models.ManyToManyField(Batch, related_name="releases")
    name = models.SlugField(max_length=100)
    version = models.PositiveIntegerField()
    rule = models.CharField(max_length=32, help_text="Aggregation rule of the human verdicts.")
    path = models.CharField(max_length=500, help_text="Directory the release was written to.")
    manifest = models.JSONField(help_text="Sources, batches, rule, counts and file checksums.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["name", "version"], name="release_unique_version"),
            models.CheckConstraint(condition=Q(version__gte=1), name="release_version_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


class Evaluation(models.Model):
    """One retrieval model's metrics on a release: a row of the leaderboard."""

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="evaluations")
    model_name = models.CharField(max_length=200, help_text="Name of the evaluated model.")
    metrics = models.JSONField(
        help_text="{'i2t': {'recall@1': …, 'map_at_r': …}, 't2i': {…}} as `evaluate` prints it."
    )
    rankings_sha256 = models.CharField(
        max_length=64, help_text="Checksum of the uploaded rankings, to spot resubmissions."
    )
    explanation = models.JSONField(
        null=True,
        blank=True,
        help_text="Concept failure metrics of the model's top-1 results (mitl.explain); "
        "null when the dataset has no concepts.",
    )
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["release", "model_name"], name="evaluation_unique_model"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model_name} on {self.release}"


class EvaluationJobStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class EvaluationJob(models.Model):
    """Rankings sent to a leaderboard, scored in the background (pipeline/evaluation_jobs.py).

    The rankings were checked against the limits when they came; they stay here, as the
    JSON bytes that came (an upload's own file, never encoded again), until the job has run,
    then are dropped (the evaluation keeps their checksum). Bytes rather than a JSON column:
    encoding a 20 MB upload again and decoding it on every read of the row cost the request
    more than checking it.
    """

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="evaluation_jobs")
    model_name = models.CharField(max_length=200)
    rankings_json = models.BinaryField(
        null=True, blank=True, help_text="The checked rankings as JSON, until the job has run."
    )
    status = models.CharField(
        max_length=16, choices=EvaluationJobStatus.choices, default=EvaluationJobStatus.QUEUED
    )
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, help_text="Why the rankings could not be scored.")
    evaluation = models.ForeignKey(
        Evaluation, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=EvaluationJobStatus.values),
                name="evaluation_job_status_valid",
            ),
            models.CheckConstraint(
                condition=~Q(status="failed") | ~Q(error=""),
                name="evaluation_job_failure_has_error",
            ),
        ]

    def __str__(self) -> str:
        return f"evaluation job {self.pk} of {self.model_name} ({self.status})"


class RelevanceCalibration(models.Model):
    """A `relevance_calibrate` report of a dataset: how each proxy agrees with people."""

    dataset = models.ForeignKey(
        Dataset, on_delete=models.CASCADE, related_name="relevance_calibrations"
    )
    report = models.JSONField(
        help_text="Per ratings source (crowd, sits, sts): pairs, the correlation table and "
        "the recommended proxy (docs/relevance.md)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"relevance calibration of {self.dataset} ({self.created_at:%Y-%m-%d})"


class CalibratedRelevanceModel(models.Model):
    """A calibrated relevance model of a dataset (`relevance_calibrate … --save`): the
    combination fitted on every rated pair, with its feature pipeline; the relevance source
    `calibrated` applies the dataset's newest (docs/relevance.md)."""

    dataset = models.ForeignKey(
        Dataset, on_delete=models.CASCADE, related_name="calibrated_relevance_models"
    )
    version = models.CharField(
        max_length=32, help_text="Derived from the pipeline and the model's sha256."
    )
    spec = models.JSONField(
        help_text="Proxies and their versions, context, feature columns, score scale, "
        "sha256 of the model and the library that fitted it (mitl.relevance.calibrated)."
    )
    model = models.BinaryField(help_text="The fitted regressor, pickled (checked by sha256).")
    figures = models.JSONField(
        help_text="Ratings fitted on and the out-of-fold Pearson beside the best single proxy's."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"calibrated relevance {self.version} of {self.dataset}"
