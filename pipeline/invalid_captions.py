"""Invalid captions (ECCV Caption Appendix C.1): the review list, and marking by an admin.

An original positive is a caption shown with its own image, as a golden TP or as a task
candidate. When people answer "100% NO" for it, the caption may be meaningless or wrong
for its image: it goes on the review list, and an admin decides. Captions marked invalid
leave every later release (as queries and as positives); releases already written stay
as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.models import Caption, Dataset, InvalidReason, Judgement
from mitl.judgements import Level


@dataclass(frozen=True)
class InvalidCaptionCandidate:
    """A caption on the review list, with how people judged it against its own image."""

    caption: Caption  # its image and dataset are loaded
    answers: int  # judgements of the caption with its own image, in submitted work
    no_answers: int  # of which "100% NO"

    @property
    def no_share(self) -> float:
        return self.no_answers / self.answers if self.answers else 0.0


def invalid_captions_review(
    *, dataset: Dataset | None = None, min_no: int = 1, include_marked: bool = True
) -> list[InvalidCaptionCandidate]:
    """Return captions judged "100% NO" for their own image at least `min_no` times.

    Every submitted answer counts, approved or not: a careful worker who says NO to a
    wrong golden TP fails the golden check for it, and that answer is the evidence.
    With `include_marked`, captions already marked invalid are listed too, so they can be
    unmarked. Most "100% NO" first.
    """
    if min_no < 1:
        raise ServiceError(f"min_no must be at least 1 (got {min_no})")
    judgements = Judgement.objects.filter(
        item__image_id=F("item__caption__image_id"),  # the caption with its own image
        assignment__submitted_at__isnull=False,
    )
    if dataset is not None:
        judgements = judgements.filter(item__caption__dataset=dataset)
    tallies = {
        row["item__caption_id"]: (row["answers"], row["no_answers"])
        for row in judgements.values("item__caption_id").annotate(
            answers=Count("id"), no_answers=Count("id", filter=Q(level=Level.NO))
        )
    }
    wanted = {pk for pk, (_, no) in tallies.items() if no >= min_no}
    captions = Caption.objects.select_related("image", "dataset")
    listed = Q(pk__in=wanted)
    if include_marked:
        marked = Q(is_invalid=True)
        if dataset is not None:
            marked &= Q(dataset=dataset)
        listed |= marked
    rows = [
        InvalidCaptionCandidate(
            caption=caption,
            answers=tallies.get(caption.pk, (0, 0))[0],
            no_answers=tallies.get(caption.pk, (0, 0))[1],
        )
        for caption in captions.filter(listed)
    ]
    return sorted(
        rows,
        key=lambda r: (-r.no_answers, -r.no_share, r.caption.dataset.name, r.caption.ext_id),
    )


def caption_mark_invalid(*, caption: Caption, reason: str) -> Caption:
    """Mark a caption invalid with a reason (meaningless, wrong_for_image), now."""
    if reason not in InvalidReason.values:
        raise ServiceError(
            f"invalid caption reason must be one of {', '.join(InvalidReason.values)} "
            f"(got {reason!r})"
        )
    with transaction.atomic():
        caption.is_invalid = True
        caption.invalid_reason = reason
        caption.invalid_marked_at = timezone.now()
        caption.save(update_fields=["is_invalid", "invalid_reason", "invalid_marked_at"])
    return caption


def caption_unmark_invalid(*, caption: Caption) -> Caption:
    """Make a caption valid again; the next release includes it."""
    with transaction.atomic():
        caption.is_invalid = False
        caption.invalid_reason = ""
        caption.invalid_marked_at = None
        caption.save(update_fields=["is_invalid", "invalid_reason", "invalid_marked_at"])
    return caption
