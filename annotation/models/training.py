"""The worker's side before real work: a batch's instructions, and its qualification round.

Instructions are versioned per batch: a new version never changes what earlier assignments
were shown (`Assignment.instructions` points at the version handed out with it). The
qualification round is a short test of pairs with known answers; a worker answers them one
at a time, reads feedback after each, and gets real HITs of the batch once an attempt
reaches the batch's pass mark (`mitl.config.BatchConfig.qualification_pass`).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from mitl.judgements import Level

from .batch import Batch
from .dataset import Caption, Image
from .work import Worker


class Instructions(models.Model):
    """One version of a batch's instructions, as shown to workers (a frozen snapshot)."""

    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="instructions")
    version = models.PositiveSmallIntegerField(help_text="1, 2, … within the batch.")
    content = models.JSONField(
        help_text="What workers read: the meaning of every answer, shortcoming and wrong "
        "concept, and a worked example per answer (mitl.instructions)."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The admin who saved this version; empty when made by a command or the demo.",
    )

    class Meta:
        verbose_name_plural = "instructions"
        constraints = [
            models.UniqueConstraint(
                fields=["batch", "version"], name="instructions_unique_version"
            ),
            models.CheckConstraint(condition=Q(version__gte=1), name="instructions_version_pos"),
        ]

    def __str__(self) -> str:
        return f"instructions v{self.version} of batch {self.batch_id}"


class QualificationSource(models.TextChoices):
    GOLDEN = "golden", "drawn as golden pairs are"
    ADMIN = "admin", "chosen by an admin"


class QualificationPair(models.Model):
    """A pair of a batch's qualification pool, with its known answer: each try draws from it."""

    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="qualification_pairs")
    position = models.PositiveSmallIntegerField(help_text="Order in the round, from 0.")
    image = models.ForeignKey(Image, on_delete=models.CASCADE, related_name="+")
    caption = models.ForeignKey(Caption, on_delete=models.CASCADE, related_name="+")
    positive = models.BooleanField(
        help_text="The known answer: a YES (either YES level) or a NO (either NO level)."
    )
    source = models.CharField(max_length=8, choices=QualificationSource.choices)
    note = models.TextField(
        blank=True, help_text="Why the answer is what it is; shown to the worker as feedback."
    )
    mturk_test = models.BooleanField(
        default=False,
        help_text="A pair of MTurk's test (annotation.mturk.qualification), never shown in a "
        "try on the platform, whose feedback tells the answers.",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["batch", "position"], name="qualification_pair_unique_position"
            ),
            models.UniqueConstraint(
                fields=["batch", "image", "caption"], name="qualification_pair_unique_pair"
            ),
            models.CheckConstraint(
                condition=Q(source__in=["golden", "admin"]), name="qualification_source_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"qualification pair {self.position} of batch {self.batch_id}"


class QualificationAttempt(models.Model):
    """One worker's try at a batch's qualification round."""

    batch = models.ForeignKey(
        Batch, on_delete=models.CASCADE, related_name="qualification_attempts"
    )
    worker = models.ForeignKey(
        Worker, on_delete=models.CASCADE, related_name="qualification_attempts"
    )
    number = models.PositiveSmallIntegerField(help_text="1 for the first try, then 2, …")
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    correct = models.PositiveSmallIntegerField(default=0)
    answered = models.PositiveSmallIntegerField(default=0)
    passed = models.BooleanField(
        null=True, blank=True, help_text="Empty until every pair is answered."
    )
    pair_ids = models.JSONField(
        default=list,
        help_text="The try's pairs (QualificationPair ids) in the order it shows them: drawn "
        "from the round's pool when the try starts, none shown in an earlier try of the worker.",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["batch", "worker", "number"], name="qualification_attempt_unique"
            ),
            models.CheckConstraint(
                condition=Q(correct__lte=models.F("answered")),
                name="qualification_attempt_correct_le_answered",
            ),
            models.CheckConstraint(
                condition=Q(passed__isnull=True) | Q(finished_at__isnull=False),
                name="qualification_attempt_decided_when_finished",
            ),
        ]

    def __str__(self) -> str:
        return f"qualification try {self.number} of {self.worker_id} on batch {self.batch_id}"


class QualificationAnswer(models.Model):
    """A worker's answer to one qualification pair, and whether it was right."""

    attempt = models.ForeignKey(
        QualificationAttempt, on_delete=models.CASCADE, related_name="answers"
    )
    pair = models.ForeignKey(QualificationPair, on_delete=models.CASCADE, related_name="answers")
    level = models.CharField(max_length=16, choices=[(level.value, level.value) for level in Level])
    correct = models.BooleanField()
    elapsed_ms = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["attempt", "pair"], name="qualification_answer_once"),
            models.CheckConstraint(
                condition=Q(level__in=[level.value for level in Level]),
                name="qualification_answer_level_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.level} on {self.pair_id} ({'right' if self.correct else 'wrong'})"
