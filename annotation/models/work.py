"""The crowd side: HITs of pairs, workers, their assignments and judgements."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.db.models.lookups import Exact

from mitl.judgements import (
    OTHER_TEXT_MAX,
    SHORTCOMINGS,
    SHORTCOMINGS_MASK_MAX,
    WRONG_CONCEPTS_MASK_MAX,
    Level,
    mask_to_shortcomings,
    mask_to_wrong_concepts,
)

from .batch import Batch, Candidate
from .dataset import Caption, Image

WRONG_DESCRIPTION_BIT = 1 << SHORTCOMINGS.index("wrong_description")


class HIT(models.Model):
    """A page of pairs for one worker: tasks to judge plus golden pairs at random positions."""

    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="hits")
    index = models.PositiveIntegerField(help_text="Position of the HIT in its batch, from 0.")
    round = models.PositiveSmallIntegerField(
        db_default=0, help_text="The adaptive round that built the HIT (else 0)."
    )
    max_assignments = models.PositiveSmallIntegerField(
        default=1, help_text="How many different workers judge this HIT."
    )
    active_assignments = models.PositiveSmallIntegerField(
        default=0,
        help_text="Assignments holding a slot (accepted, submitted, approved). A hint that "
        "finds free HITs through an index; the exact count is re-read under the HIT's lock.",
    )
    external_id = models.CharField(
        max_length=64,
        null=True,
        blank=True,
        unique=True,
        help_text="MTurk HITId once the HIT is published.",
    )
    published_at = models.DateTimeField(null=True, blank=True, help_text="When sent to MTurk.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "HIT"
        constraints = [
            models.UniqueConstraint(fields=["batch", "index"], name="hit_unique_index"),
            models.CheckConstraint(
                condition=Q(max_assignments__gte=1), name="hit_max_assignments_positive"
            ),
        ]
        indexes = [
            # "Next HIT" walks only the HITs with a free slot, in page order.
            models.Index(
                fields=["batch", "index"],
                condition=Q(active_assignments__lt=F("max_assignments")),
                name="hit_open_slots",
            ),
        ]

    def __str__(self) -> str:
        return f"HIT {self.batch_id}/{self.index}"


class ItemRole(models.TextChoices):
    TASK = "task", "pair to judge"
    GOLDEN_TP = "golden_tp", "golden true positive"
    GOLDEN_TN = "golden_tn", "golden true negative"


class HITItem(models.Model):
    hit = models.ForeignKey(HIT, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveSmallIntegerField(help_text="Order on the page, from 0.")
    role = models.CharField(max_length=16, choices=ItemRole.choices)
    candidate = models.ForeignKey(
        Candidate,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="hit_items",
        help_text="The candidate judged; empty for golden pairs.",
    )
    image = models.ForeignKey(Image, on_delete=models.CASCADE, related_name="+")
    caption = models.ForeignKey(Caption, on_delete=models.CASCADE, related_name="+")
    golden_suspended_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Golden pairs only: when it was suspended because several workers who pass "
        "their other goldens failed it (annotation.goldens); its answers are no longer checked.",
    )
    # A suspended golden is replaced for the HIT's later workers. Assignments of a HIT are
    # created under its row lock, as the replacement is, so assignment ids tell who saw what.
    retired_after = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        help_text="A replaced golden: shown only to assignments with an id up to this one.",
    )
    added_after = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        help_text="A replacement golden: shown only to assignments with a larger id.",
    )

    class Meta:
        verbose_name = "HIT item"
        constraints = [
            models.UniqueConstraint(fields=["hit", "position"], name="hit_item_unique_position"),
            models.CheckConstraint(
                condition=Q(role="task", candidate__isnull=False)
                | Q(role__in=["golden_tp", "golden_tn"], candidate__isnull=True),
                name="hit_item_candidate_iff_task",
            ),
            models.CheckConstraint(
                condition=Q(golden_suspended_at__isnull=True)
                | Q(role__in=["golden_tp", "golden_tn"]),
                name="hit_item_only_goldens_suspended",
            ),
            models.CheckConstraint(
                condition=Q(retired_after__isnull=True) | Q(golden_suspended_at__isnull=False),
                name="hit_item_only_suspended_goldens_retired",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.role} at {self.position}"


class WorkerSource(models.TextChoices):
    PLATFORM = "platform", "platform account"
    MTURK = "mturk", "Amazon Mechanical Turk"
    SIMULATED = "simulated", "simulated crowd"


class Worker(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="worker",
        help_text="The platform account, for workers who log in here.",
    )
    source = models.CharField(max_length=16, choices=WorkerSource.choices)
    external_id = models.CharField(
        max_length=128, help_text="MTurk WorkerId, simulated worker name, or the username."
    )
    is_blocked = models.BooleanField(default=False, help_text="Blocked workers get no more HITs.")
    profile = models.JSONField(
        default=dict, blank=True, help_text="Simulated workers: accuracy and carelessness."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "external_id"], name="worker_unique_external"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source}:{self.external_id}"


class AssignmentStatus(models.TextChoices):
    ACCEPTED = "accepted"
    SUBMITTED = "submitted"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"


class MTurkCheck(models.TextChoices):
    """What MTurk said when the platform asked it about an unconfirmed AssignmentId
    (`annotation.mturk.verify`): nothing yet, or the answer that sets the work apart."""

    UNCHECKED = "", "not asked"
    UNKNOWN = "unknown", "MTurk did not know it"
    DENIED = "denied", "MTurk has it for another HIT or worker"


class Assignment(models.Model):
    """One worker's work on one HIT."""

    hit = models.ForeignKey(HIT, on_delete=models.CASCADE, related_name="assignments")
    worker = models.ForeignKey(Worker, on_delete=models.PROTECT, related_name="assignments")
    status = models.CharField(
        max_length=16, choices=AssignmentStatus.choices, default=AssignmentStatus.ACCEPTED
    )
    accepted_at = models.DateTimeField(auto_now_add=True)
    deadline = models.DateTimeField(
        null=True, blank=True, help_text="Expires when not submitted by then."
    )
    submitted_at = models.DateTimeField(null=True, blank=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The staff member who approved or rejected it; empty when automatic.",
    )
    golden_passed = models.BooleanField(
        null=True, blank=True, help_text="Result of the golden check at submission."
    )
    flagged = models.BooleanField(
        default=False, help_text="Failed the golden check and waits for a person's review."
    )
    feedback = models.TextField(blank=True, help_text="Reviewer's feedback to the worker.")
    external_id = models.CharField(
        max_length=128, null=True, blank=True, unique=True, help_text="MTurk AssignmentId."
    )
    confirmed_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="MTurk work only: when MTurk confirmed it (the sync found it listed with the "
        "same AssignmentId, WorkerId and HITId, or a results CSV had it). Until then it may be "
        "made up, and it is never approved.",
    )
    mturk_check = models.CharField(
        max_length=8,
        choices=MTurkCheck.choices,
        default=MTurkCheck.UNCHECKED,
        blank=True,
        help_text="Unconfirmed MTurk work only: what MTurk answered when asked about its "
        "AssignmentId. Work MTurk did not know is kept, apart; the sync still confirms it "
        "if MTurk lists it later.",
    )
    instructions = models.ForeignKey(
        "annotation.Instructions",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The version of the batch's instructions handed out with this work; empty "
        "for work from before the batch had instructions.",
    )
    page_seed = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Seed of the order in which this worker saw the HIT's pairs "
        "(mitl.hits.page_order), so review shows what the worker saw; empty: the HIT's order.",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["hit", "worker"], name="assignment_one_per_worker"),
            models.CheckConstraint(
                condition=Q(status__in=AssignmentStatus.values), name="assignment_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(status="accepted")
                | Q(status="expired")
                | Q(submitted_at__isnull=False),
                name="assignment_submitted_has_time",
            ),
        ]
        indexes = [
            # Expiry looks at open work only.
            models.Index(
                fields=["deadline"], condition=Q(status="accepted"), name="assignment_open_deadline"
            ),
        ]

    def __str__(self) -> str:
        return f"assignment {self.pk} ({self.status})"

    @property
    def awaits_mturk(self) -> bool:
        """Say whether this is MTurk work that MTurk has not confirmed yet."""
        return self.external_id is not None and self.confirmed_at is None


def golden_checked(prefix: str = "") -> Q:
    """Match golden HIT items whose answers are still checked (`prefix`: the path to the
    item, e.g. "item__"): a suspended golden (`annotation.goldens`) is probably wrong."""
    return Q(
        **{
            f"{prefix}role__in": (ItemRole.GOLDEN_TP, ItemRole.GOLDEN_TN),
            f"{prefix}golden_suspended_at__isnull": True,
        }
    )


def items_shown_to(assignment_id: int | None) -> Q:
    """Match the HIT items an assignment shows (None: those a new assignment would show).

    A golden replaced after the assignment was handed out is still on its page; the
    replacement is not (annotation.goldens).
    """
    if assignment_id is None:
        return Q(retired_after__isnull=True)
    return (Q(retired_after__isnull=True) | Q(retired_after__gte=assignment_id)) & (
        Q(added_after__isnull=True) | Q(added_after__lt=assignment_id)
    )


def mturk_unconfirmed(prefix: str = "") -> Q:
    """Match MTurk work that MTurk has not confirmed (`prefix`: the path to the assignment).

    The HIT page inside MTurk is public, so its ids can be made up: such work is stored,
    but neither approved nor counted until MTurk confirms it. Platform work has no
    AssignmentId and needs no confirmation.
    """
    return Q(**{f"{prefix}external_id__isnull": False, f"{prefix}confirmed_at__isnull": True})


class Judgement(models.Model):
    """A worker's answer for one pair of a HIT."""

    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="judgements")
    item = models.ForeignKey(HITItem, on_delete=models.CASCADE, related_name="judgements")
    level = models.CharField(
        max_length=16,
        choices=[(level.value, level.value) for level in Level],
        help_text="yes = 100% YES, weak_yes = Partially YES, weak_no = Mostly NO, no = 100% NO.",
    )
    shortcomings = models.PositiveSmallIntegerField(
        default=0, help_text="Bit mask over mitl.judgements.SHORTCOMINGS (middle levels only)."
    )
    wrong_concepts = models.PositiveSmallIntegerField(
        default=0,
        help_text="Bit mask over mitl.judgements.WRONG_CONCEPTS (with 'wrong_description' only).",
    )
    other_text = models.CharField(
        max_length=OTHER_TEXT_MAX, blank=True, help_text="Text for the 'other' concept."
    )
    elapsed_ms = models.PositiveIntegerField(help_text="Time the worker spent on this pair.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["assignment", "item"], name="judgement_unique_item"),
            models.CheckConstraint(
                condition=Q(level__in=[level.value for level in Level]),
                name="judgement_level_valid",
            ),
            models.CheckConstraint(
                condition=Q(shortcomings__lte=SHORTCOMINGS_MASK_MAX)
                & Q(wrong_concepts__lte=WRONG_CONCEPTS_MASK_MAX),
                name="judgement_masks_in_vocabulary",
            ),
            models.CheckConstraint(
                condition=Q(level__in=["weak_yes", "weak_no"])
                | Q(shortcomings=0, wrong_concepts=0, other_text=""),
                name="judgement_followups_only_middle",
            ),
            models.CheckConstraint(
                condition=Q(wrong_concepts=0)
                | Q(Exact(F("shortcomings").bitand(WRONG_DESCRIPTION_BIT), WRONG_DESCRIPTION_BIT)),
                name="judgement_concepts_need_wrong_description",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.level} on item {self.item_id}"

    @property
    def shortcoming_names(self) -> list[str]:
        return mask_to_shortcomings(self.shortcomings)

    @property
    def wrong_concept_names(self) -> list[str]:
        return mask_to_wrong_concepts(self.wrong_concepts)
