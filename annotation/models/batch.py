"""The machine side of a batch: annotators, queries, rankings and pooled candidates."""

from __future__ import annotations

from django.db import models

from .dataset import Caption, Dataset, Image


class MachineAnnotator(models.Model):
    """A retrieval model that proposes candidate pairs; see `mitl.annotators`."""

    name = models.SlugField(max_length=100, unique=True, help_text="Unique name, e.g. tfidf.")
    kind = models.CharField(max_length=32, help_text="Annotator kind: bow, open_clip, …")
    config = models.JSONField(default=dict, blank=True, help_text="Kind-specific settings.")
    version = models.CharField(
        max_length=64,
        default="1",
        help_text="Bump when weights or settings change; cached embeddings are keyed on it.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.kind} v{self.version})"


class BatchState(models.TextChoices):
    DRAFT = "draft"
    RETRIEVING = "retrieving"
    POOLING = "pooling"
    BUILDING = "building"
    ANNOTATING = "annotating"
    AGGREGATING = "aggregating"
    RELEASED = "released"
    CANCELLED = "cancelled"  # stopped by an admin; its stages no longer run


class Batch(models.Model):
    """One curation round: queries → candidates → HITs → judgements → verdicts → release."""

    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="batches")
    name = models.CharField(max_length=200, help_text="Human-readable name.")
    config = models.JSONField(help_text="Validated batch configuration (mitl.config.BatchConfig).")
    annotators = models.ManyToManyField(MachineAnnotator, related_name="batches")
    state = models.CharField(max_length=16, choices=BatchState.choices, default=BatchState.DRAFT)
    reports = models.JSONField(
        default=dict,
        blank=True,
        help_text="Reports computed by the stages, e.g. {'diversity': …} after retrieval.",
    )
    error = models.TextField(
        blank=True,
        help_text="Why the current stage last failed; the stage can be run again to resume.",
    )
    round = models.PositiveSmallIntegerField(
        default=0,
        help_text="Adaptive strategy: the round being selected, built, judged or aggregated "
        "(from 0); a fixed batch has one round, 0.",
    )
    paused_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Handing out paused by staff since then (annotation.pause): no new "
        "assignment starts, open work may still be submitted; empty when running.",
    )
    mturk = models.JSONField(
        default=dict,
        blank=True,
        help_text="Amazon Mechanical Turk: HIT type settings, HITTypeId, environment "
        "(sandbox or production), the cost estimate and publication times.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "batches"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=BatchState.values), name="batch_state_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"batch {self.pk} ({self.name})"


class BatchStageProgress(models.Model):
    """Done/total counter of one stage of a batch, updated while the stage runs."""

    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="progress")
    stage = models.CharField(max_length=16, choices=BatchState.choices)
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "batch stage progress"  # not Django's "progresss"
        constraints = [
            models.UniqueConstraint(fields=["batch", "stage"], name="progress_unique_stage"),
        ]

    def __str__(self) -> str:
        return f"{self.stage} {self.done}/{self.total}"


class Direction(models.TextChoices):
    I2T = "i2t", "image query → captions"
    T2I = "t2i", "caption query → images"


class Query(models.Model):
    """A sampled query: an image (i2t) or a caption (t2i)."""

    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="queries")
    direction = models.CharField(max_length=3, choices=Direction.choices)
    image = models.ForeignKey(
        Image, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    caption = models.ForeignKey(
        Caption, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )

    class Meta:
        verbose_name_plural = "queries"
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(direction="i2t", image__isnull=False, caption__isnull=True)
                    | models.Q(direction="t2i", image__isnull=True, caption__isnull=False)
                ),
                name="query_item_matches_direction",
            ),
            models.UniqueConstraint(
                fields=["batch", "image"],
                condition=models.Q(direction="i2t"),
                name="query_unique_image",
            ),
            models.UniqueConstraint(
                fields=["batch", "caption"],
                condition=models.Q(direction="t2i"),
                name="query_unique_caption",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.direction} query {self.image_id or self.caption_id}"


class Ranking(models.Model):
    """One annotator's top targets for one query (database ids, best first, with scores).

    Kept deeper than the candidates (at least the golden-negative depth) so golden true
    negatives can be drawn from outside every annotator's top ranks, and so later reports
    can compare annotators' rankings.
    """

    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="rankings")
    annotator = models.ForeignKey(MachineAnnotator, on_delete=models.PROTECT, related_name="+")
    targets = models.JSONField(help_text="Target ids (Image or Caption pks), best first.")
    scores = models.JSONField(help_text="Similarity scores, aligned with targets.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["query", "annotator"], name="ranking_unique"),
        ]

    def __str__(self) -> str:
        return f"ranking of query {self.query_id} by annotator {self.annotator_id}"


class Candidate(models.Model):
    """A de-duplicated image-caption pair to be judged in a batch.

    A pair proposed by several annotators or from both directions is judged once; it is
    attached to the first query (in query order) that proposed it, and its proposals keep
    every origin.
    """

    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="candidates")
    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="candidates")
    direction = models.CharField(max_length=3, choices=Direction.choices)
    image = models.ForeignKey(Image, on_delete=models.CASCADE, related_name="+")
    caption = models.ForeignKey(Caption, on_delete=models.CASCADE, related_name="+")
    round = models.PositiveSmallIntegerField(
        db_default=0, help_text="The round that chose the pair (adaptive strategy; else 0)."
    )
    sample_stratum = models.CharField(
        max_length=8,
        db_default="",
        blank=True,
        help_text="Adaptive: the stratum (top, ranked, tail) of a pair drawn at random to estimate "
        "the positives that remain (mitl.curation.estimate); empty for pairs a policy chose.",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["batch", "image", "caption"], name="candidate_unique_pair"
            ),
            models.CheckConstraint(
                condition=models.Q(sample_stratum__in=["", "top", "ranked", "tail"]),
                name="candidate_sample_stratum_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"pair image {self.image_id} / caption {self.caption_id}"


class Proposal(models.Model):
    """Which annotator proposed a candidate, for which query, at which rank and score."""

    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="proposals")
    annotator = models.ForeignKey(MachineAnnotator, on_delete=models.PROTECT, related_name="+")
    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="+")
    rank = models.PositiveSmallIntegerField(help_text="1-based rank in the annotator's list.")
    score = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["candidate", "annotator", "query"], name="proposal_unique"
            ),
            models.CheckConstraint(condition=models.Q(rank__gte=1), name="proposal_rank_positive"),
        ]

    def __str__(self) -> str:
        return f"rank {self.rank} by annotator {self.annotator_id}"


class Modality(models.TextChoices):
    IMAGE = "image"
    CAPTION = "caption"


class Embedding(models.Model):
    """A cached vector of one item under one annotator version (see pipeline/embeddings.py).

    Keyed on the annotator's version: bumping the version makes every old vector invisible,
    so a changed model or checkpoint never mixes with stale vectors.
    """

    annotator = models.ForeignKey(MachineAnnotator, on_delete=models.CASCADE, related_name="+")
    version = models.CharField(max_length=64, help_text="Annotator version the vector belongs to.")
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="+")
    modality = models.CharField(max_length=8, choices=Modality.choices)
    ext_id = models.BigIntegerField(help_text="The item's dataset id (Image or Caption ext_id).")
    dim = models.PositiveSmallIntegerField(help_text="Vector length.")
    vector = models.BinaryField(help_text="float32 little-endian bytes, L2-normalised.")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["annotator", "version", "dataset", "modality", "ext_id"],
                name="embedding_unique_item",
            ),
            models.CheckConstraint(
                condition=models.Q(modality__in=["image", "caption"]),
                name="embedding_modality_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.modality} {self.ext_id} under annotator {self.annotator_id} v{self.version}"
