"""Results: aggregated verdicts per pair and immutable releases."""

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
