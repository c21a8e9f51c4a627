"""Datasets: images, captions and named sets of positive image-caption pairs."""

from __future__ import annotations

from django.db import models

from mitl.positive_sets import positive_set_coverage

FILE_NAME_MAX = 500  # stored as images/<dataset>/<file_name>


class Dataset(models.Model):
    name = models.SlugField(
        max_length=100, unique=True, help_text="Unique short name, e.g. coco5k."
    )
    description = models.TextField(blank=True, help_text="Free text shown with the dataset.")
    meta = models.JSONField(
        default=dict,
        blank=True,
        help_text="Provenance, e.g. {'synthetic': {'seed': 0, 'n_images': 300}} when generated.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Image(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="images")
    ext_id = models.BigIntegerField(
        help_text="The dataset's own image id (COCO id); used in exports."
    )
    file_name = models.CharField(max_length=255, blank=True, help_text="File name in the dataset.")
    file = models.FileField(
        upload_to="images/",
        blank=True,
        max_length=FILE_NAME_MAX,
        help_text="Stored image file; empty for text-only datasets.",
    )
    labels = models.JSONField(
        default=list, blank=True, help_text="Object class labels present in the image (multi-hot)."
    )
    instances = models.JSONField(
        default=list,
        blank=True,
        help_text="Object instances: [{'category', 'area' (box area / image area), 'bbox' "
        "[x, y, w, h] in pixels, 'attributes' [words]}] (mitl.explain.concepts).",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["dataset", "ext_id"], name="image_unique_ext_id"),
        ]

    def __str__(self) -> str:
        return f"image {self.ext_id}"


class InvalidReason(models.TextChoices):
    MEANINGLESS = "meaningless", "meaningless or unreadable"
    WRONG_FOR_IMAGE = "wrong_for_image", "semantically wrong for its own image"


class Caption(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="captions")
    ext_id = models.BigIntegerField(help_text="The dataset's own caption id; used in exports.")
    image = models.ForeignKey(
        Image,
        on_delete=models.CASCADE,
        related_name="captions",
        help_text="The image this caption was written for (the original positive).",
    )
    text = models.TextField(help_text="The caption text.")
    is_invalid = models.BooleanField(
        default=False,
        help_text="Marked invalid by an admin (meaningless or wrong for its own image); "
        "left out of releases.",
    )
    invalid_reason = models.CharField(
        max_length=16,
        choices=InvalidReason.choices,
        blank=True,
        help_text="Why the caption was marked invalid (ECCV Caption Appendix C.1).",
    )
    invalid_marked_at = models.DateTimeField(
        null=True, blank=True, help_text="When an admin marked the caption invalid."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["dataset", "ext_id"], name="caption_unique_ext_id"),
            models.CheckConstraint(condition=~models.Q(text=""), name="caption_text_not_empty"),
            models.CheckConstraint(
                condition=models.Q(is_invalid=False, invalid_reason="")
                | models.Q(is_invalid=True) & ~models.Q(invalid_reason=""),
                name="caption_invalid_has_reason",
            ),
        ]

    def __str__(self) -> str:
        return f"caption {self.ext_id}"


class PositiveSource(models.TextChoices):
    ORIGINAL = "original", "Original dataset links"
    IMPORTED = "imported", "Imported (e.g. CxC, ECCV Caption)"
    HUMAN = "human", "Human-verified by this platform"


ORIGINAL_SET = "original"  # the name of every dataset's set of its own caption-image links


class PositiveSet(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="positive_sets")
    name = models.SlugField(
        max_length=100, help_text="Name within the dataset, e.g. original, cxc."
    )
    source = models.CharField(max_length=16, choices=PositiveSource.choices)
    description = models.TextField(blank=True)
    queries = models.JSONField(
        default=dict,
        blank=True,
        help_text="The queries an imported set covers: {'i2t': [image ids], 't2i': [caption "
        "ids]} (the keys of its ECCV-format files); empty when it records none (the original "
        "set: every image and caption; a human-verified set: its batch's queries).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["dataset", "name"], name="positive_set_unique_name"),
            models.CheckConstraint(
                condition=models.Q(source__in=PositiveSource.values),
                name="positive_set_source_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dataset.name}/{self.name}"

    @property
    def coverage(self) -> str:
        """Which queries the set covers, in words (`mitl.positive_sets.positive_set_coverage`)."""
        return positive_set_coverage(source=self.source, queries=self.queries)


class PositivePair(models.Model):
    positive_set = models.ForeignKey(PositiveSet, on_delete=models.CASCADE, related_name="pairs")
    image = models.ForeignKey(Image, on_delete=models.CASCADE, related_name="+")
    caption = models.ForeignKey(Caption, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["positive_set", "image", "caption"], name="positive_pair_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"image {self.image_id} / caption {self.caption_id}"
