"""Writes on the human and dataset side: imports, assignments and submissions.

Every function is one transaction; arguments are keyword-only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone
from PIL import Image as PILImage
from PIL import UnidentifiedImageError

from mitl.judgements import Level, validate_followups
from mitl.quality import golden_check

from .importers import (
    ImportFileError,
    parse_captions_tsv,
    parse_eccv_positives,
    parse_labels_json,
)
from .models import (
    HIT,
    Assignment,
    AssignmentStatus,
    Caption,
    Dataset,
    HITItem,
    Image,
    Judgement,
    PositivePair,
    PositiveSet,
    PositiveSource,
    Worker,
    WorkerSource,
)
from .models.dataset import FILE_NAME_MAX

ProgressCallback = Callable[[int, int], None]
ORIGINAL_SET = "original"


class ServiceError(ValueError):
    """A request the platform refuses, with a message for the person who made it."""


def dataset_import_tsv(
    *,
    name: str,
    captions_path: Path,
    images_dir: Path | None = None,
    labels_path: Path | None = None,
    description: str = "",
    meta: dict | None = None,
    progress: ProgressCallback | None = None,
) -> Dataset:
    """Import a captions TSV (and optionally its image files and labels) as a new dataset.

    Everything is validated before anything is written; the import either completes or
    leaves no row and no stored file behind. The caption-to-image links become the
    `original` positive set.
    """
    if Dataset.objects.filter(name=name).exists():
        raise ServiceError(f"dataset {name!r} already exists; choose another name")
    rows = parse_captions_tsv(captions_path)
    labels = parse_labels_json(labels_path) if labels_path else {}
    images = {row.image_id: row.file_name for row in rows}
    unknown_labels = sorted(set(labels) - set(images))
    if unknown_labels:
        raise ImportFileError(f"{labels_path}: labels for unknown image id {unknown_labels[0]}")
    sources = _image_sources(images, images_dir, name) if images_dir else {}
    stored: list[str] = []
    try:
        with transaction.atomic():
            dataset = Dataset.objects.create(name=name, description=description, meta=meta or {})
            image_rows = []
            for done, (image_id, file_name) in enumerate(images.items(), start=1):
                image = Image(
                    dataset=dataset,
                    ext_id=image_id,
                    file_name=file_name,
                    labels=labels.get(image_id, []),
                )
                if image_id in sources:
                    with sources[image_id].open("rb") as handle:
                        saved = default_storage.save(f"images/{name}/{file_name}", File(handle))
                    stored.append(saved)
                    image.file.name = saved
                image_rows.append(image)
                if progress:
                    progress(done, len(images))
            Image.objects.bulk_create(image_rows, batch_size=1000)
            pk_of = dict(Image.objects.filter(dataset=dataset).values_list("ext_id", "pk"))
            Caption.objects.bulk_create(
                [
                    Caption(
                        dataset=dataset,
                        ext_id=r.caption_id,
                        image_id=pk_of[r.image_id],
                        text=r.text,
                    )
                    for r in rows
                ],
                batch_size=2000,
            )
            original = PositiveSet.objects.create(
                dataset=dataset,
                name=ORIGINAL_SET,
                source=PositiveSource.ORIGINAL,
                description="Each caption linked to the image it was written for.",
            )
            PositivePair.objects.bulk_create(
                [
                    PositivePair(positive_set=original, image_id=image_pk, caption_id=caption_pk)
                    for caption_pk, image_pk in Caption.objects.filter(dataset=dataset).values_list(
                        "pk", "image_id"
                    )
                ],
                batch_size=5000,
            )
    except BaseException:
        for saved in stored:
            default_storage.delete(saved)
        raise
    return dataset


def _image_sources(images: dict[int, str], images_dir: Path, dataset: str) -> dict[int, Path]:
    """Find and check every image file before the import writes anything."""
    if not images_dir.is_dir():
        raise ImportFileError(f"{images_dir}: not a directory")
    root = images_dir.resolve()
    sources: dict[int, Path] = {}
    for image_id, file_name in images.items():
        if len(f"images/{dataset}/{file_name}") > FILE_NAME_MAX:
            raise ImportFileError(
                f"{images_dir}: file_name {file_name[:40]!r}… (image_id {image_id}) is too long "
                f"to store (at most {FILE_NAME_MAX} characters with the dataset folder)"
            )
        path = (images_dir / file_name).resolve()
        if root not in path.parents:
            raise ImportFileError(f"{images_dir}: file_name {file_name!r} escapes the image folder")
        if not path.is_file():
            raise ImportFileError(
                f"{images_dir}: image file {file_name!r} (image_id {image_id}) is missing"
            )
        try:
            with PILImage.open(path) as picture:
                picture.verify()
        except (UnidentifiedImageError, OSError) as exc:
            raise ImportFileError(f"{path}: not a readable image ({exc})") from exc
        sources[image_id] = path
    return sources


def positives_import_eccv(
    *,
    dataset: Dataset,
    label: str,
    i2t_path: Path,
    t2i_path: Path,
    ignore_unknown: bool = False,
) -> tuple[PositiveSet, int]:
    """Import an ECCV-format pair of files as an `imported` positive set named `label`.

    Ids the dataset does not hold are refused, or with `ignore_unknown` dropped (their
    pairs and queries). Returns the set and the number of pairs dropped.
    """
    if PositiveSet.objects.filter(dataset=dataset, name=label).exists():
        raise ServiceError(f"dataset {dataset.name!r} already has a positive set named {label!r}")
    positives = parse_eccv_positives(i2t_path, t2i_path)
    image_pk = dict(Image.objects.filter(dataset=dataset).values_list("ext_id", "pk"))
    caption_pk = dict(Caption.objects.filter(dataset=dataset).values_list("ext_id", "pk"))
    unknown_images = sorted({i for i, _ in positives.pairs if i not in image_pk})
    unknown_captions = sorted({c for _, c in positives.pairs if c not in caption_pk})
    if (unknown_images or unknown_captions) and not ignore_unknown:
        parts = []
        if unknown_images:
            parts.append(f"{len(unknown_images)} unknown image ids (first {unknown_images[0]})")
        if unknown_captions:
            parts.append(
                f"{len(unknown_captions)} unknown caption ids (first {unknown_captions[0]})"
            )
        raise ImportFileError(
            f"{i2t_path} / {t2i_path}: {' and '.join(parts)} in dataset {dataset.name!r} "
            "(--ignore-unknown drops them)"
        )
    known = sorted((i, c) for i, c in positives.pairs if i in image_pk and c in caption_pk)
    queries = {
        "i2t": [q for q in positives.image_queries if q in image_pk],
        "t2i": [q for q in positives.caption_queries if q in caption_pk],
    }
    with transaction.atomic():
        positive_set = PositiveSet.objects.create(
            dataset=dataset, name=label, source=PositiveSource.IMPORTED, queries=queries
        )
        PositivePair.objects.bulk_create(
            [
                PositivePair(
                    positive_set=positive_set, image_id=image_pk[i], caption_id=caption_pk[c]
                )
                for i, c in known
            ],
            batch_size=5000,
        )
    return positive_set, len(positives.pairs) - len(known)


def worker_simulated_get_or_create(*, name: str, profile: dict) -> Worker:
    """Return the simulated worker `name`, creating it with `profile` the first time."""
    worker, _ = Worker.objects.get_or_create(
        source=WorkerSource.SIMULATED, external_id=name, defaults={"profile": profile}
    )
    return worker


MAX_ELAPSED_MS = 24 * 3600 * 1000  # a day: anything longer is a broken client clock

ACTIVE_STATUSES = (AssignmentStatus.ACCEPTED, AssignmentStatus.SUBMITTED, AssignmentStatus.APPROVED)


def assignment_create(*, hit: HIT, worker: Worker) -> Assignment:
    """Give `hit` to `worker`, refusing a blocked worker, a repeat, or a full HIT."""
    if worker.is_blocked:
        raise ServiceError(f"worker {worker} is blocked")
    with transaction.atomic():
        locked = HIT.objects.select_for_update().get(pk=hit.pk)
        if Assignment.objects.filter(hit=locked, worker=worker).exists():
            raise ServiceError(f"worker {worker} already worked on {locked}")
        active = Assignment.objects.filter(hit=locked, status__in=ACTIVE_STATUSES).count()
        if active >= locked.max_assignments:
            raise ServiceError(f"{locked} already has all {locked.max_assignments} assignments")
        return Assignment.objects.create(hit=locked, worker=worker)


@dataclass(frozen=True)
class AnswerInput:
    """One answer as submitted: the HIT item and the worker's choices."""

    item_id: int
    level: str
    shortcomings: Sequence[str] = ()
    wrong_concepts: Sequence[str] = ()
    other_text: str = ""
    elapsed_ms: int = 0


@dataclass(frozen=True)
class SubmissionResult:
    assignment: Assignment
    judgements: list[Judgement]
    golden_failures: tuple[str, ...] = field(default=())
    created: bool = True  # False when the submission had already been stored


def assignment_submit(
    *, assignment: Assignment, answers: Sequence[AnswerInput], followups_required: bool
) -> SubmissionResult:
    """Store a worker's answers for a whole HIT and apply the golden check.

    Every item must be answered exactly once. Passing the golden check approves the
    assignment; failing it flags the assignment for a person's review. Submitting again
    returns the stored result unchanged (a double click or a retry never duplicates).
    """
    with transaction.atomic():
        locked = Assignment.objects.select_for_update().get(pk=assignment.pk)
        if locked.status != AssignmentStatus.ACCEPTED:
            if locked.status == AssignmentStatus.EXPIRED:
                raise ServiceError("this assignment expired; ask for a new HIT")
            stored = list(locked.judgements.order_by("item__position"))
            return SubmissionResult(assignment=locked, judgements=stored, created=False)
        items = {item.pk: item for item in locked.hit.items.all()}
        judgements = _build_judgements(locked, items, answers, followups_required)
        Judgement.objects.bulk_create(judgements)
        result = golden_check(
            (items[j.item_id].role, items[j.item_id].position, Level(j.level)) for j in judgements
        )
        now = timezone.now()
        locked.submitted_at = now
        locked.golden_passed = result.passed
        if result.passed:
            locked.status = AssignmentStatus.APPROVED
            locked.reviewed_at = now
        else:
            locked.status = AssignmentStatus.SUBMITTED
            locked.flagged = True
        locked.save(
            update_fields=["submitted_at", "golden_passed", "status", "reviewed_at", "flagged"]
        )
    return SubmissionResult(
        assignment=locked, judgements=judgements, golden_failures=result.failures
    )


def _build_judgements(
    assignment: Assignment,
    items: dict[int, HITItem],
    answers: Sequence[AnswerInput],
    followups_required: bool,
) -> list[Judgement]:
    answered = [answer.item_id for answer in answers]
    if len(set(answered)) != len(answered):
        raise ServiceError("an item was answered twice")
    foreign = sorted(set(answered) - set(items))
    if foreign:
        raise ServiceError(f"item {foreign[0]} does not belong to this HIT")
    missing = sorted(set(items) - set(answered))
    if missing:
        raise ServiceError(f"{len(missing)} of {len(items)} pairs are not answered")
    judgements = []
    for answer in answers:
        position = items[answer.item_id].position + 1
        try:
            level = Level(answer.level)
            shortcomings, concepts = validate_followups(
                level=level,
                shortcomings=answer.shortcomings,
                wrong_concepts=answer.wrong_concepts,
                other_text=answer.other_text,
                required=followups_required,
            )
        except ValueError as exc:
            raise ServiceError(f"pair {position}: {exc}") from exc
        if not 0 <= answer.elapsed_ms <= MAX_ELAPSED_MS:
            raise ServiceError(
                f"pair {position}: elapsed time must be between 0 and {MAX_ELAPSED_MS} ms "
                f"(got {answer.elapsed_ms})"
            )
        judgements.append(
            Judgement(
                assignment=assignment,
                item_id=answer.item_id,
                level=level.value,
                shortcomings=shortcomings,
                wrong_concepts=concepts,
                other_text=answer.other_text.strip(),
                elapsed_ms=answer.elapsed_ms,
            )
        )
    return judgements


def assignment_review(*, assignment: Assignment, approve: bool, feedback: str = "") -> Assignment:
    """Approve or reject a submitted assignment; a rejection reopens the slot on its HIT."""
    with transaction.atomic():
        locked = Assignment.objects.select_for_update().get(pk=assignment.pk)
        if locked.status != AssignmentStatus.SUBMITTED:
            raise ServiceError(f"only submitted work can be reviewed (this one is {locked.status})")
        locked.status = AssignmentStatus.APPROVED if approve else AssignmentStatus.REJECTED
        locked.flagged = False
        locked.feedback = feedback
        locked.reviewed_at = timezone.now()
        locked.save(update_fields=["status", "flagged", "feedback", "reviewed_at"])
    return locked
