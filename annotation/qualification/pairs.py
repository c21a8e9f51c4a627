"""A batch's qualification pairs: drawn as golden pairs are, or chosen by an admin.

The round (`annotation.qualification.attempts`) shows them one at a time with feedback. They are
drawn when the batch's HITs are built (half original pairs, half pairs outside every
annotator's top ranks) and never one shown on the batch's HIT pages, so the round never
gives away a real HIT's golden or task pair; an admin may choose them instead, from a CSV
(`batch_qualification BATCH --pairs FILE.csv`), until a worker's try or MTurk's test
points at them.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from django.db import transaction

from annotation.errors import ServiceError
from annotation.goldens import golden_pool
from annotation.models import (
    HIT,
    Batch,
    Caption,
    HITItem,
    Image,
    QualificationAttempt,
    QualificationPair,
    QualificationSource,
)
from mitl.config import BatchConfig, batch_config
from mitl.hits import ItemSpec, PackingError, Role, golden_replacement
from mitl.qualification import NEGATIVE_NOTE, POSITIVE_NOTE, qualification_mix

# Mixed into the batch seed, so the round's draws differ from the HITs' golden draws.
_SEED_TAG = 0x5155_414C  # "QUAL"
MAX_PAIRS = 50  # as `qualification_pairs` allows (mitl.config)


@dataclass(frozen=True)
class QualificationPairInput:
    """A pair an admin chose, by the dataset's own ids, with its known answer."""

    image_ext_id: int
    caption_ext_id: int
    positive: bool
    note: str = ""


class QualificationPairError(ServiceError):
    """An admin's pair that cannot go into the round; `index` is its place in the input."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"pair {index + 1}: {reason}", field="pairs")
        self.index = index
        self.reason = reason


def qualification_pairs_draw(*, batch: Batch) -> int:
    """Draw the round's pairs once, as golden pairs are drawn; return how many (0 if any exist).

    About half are golden true positives (original pairs), half golden true negatives (for
    one of the batch's queries, outside every annotator's top `golden_negative_depth`),
    none shown on a HIT page of the batch, so the round never gives away a real HIT's
    golden or task pair. Seeded from the batch seed; positions shuffled. A batch without a
    round gets none. Called when the HITs are built; an adaptive batch's later rounds keep
    the pairs of its first.
    """
    config = batch_config(batch)
    if not config.qualification_required:
        return 0
    with transaction.atomic():
        Batch.objects.select_for_update().get(pk=batch.pk)  # one draw at a time
        if QualificationPair.objects.filter(batch_id=batch.pk).exists():
            return 0
        if not HIT.objects.filter(batch_id=batch.pk).exists():
            raise ServiceError(
                f"batch {batch.pk} has no HITs yet: its qualification pairs are drawn once "
                f"its HITs are built (batch_run {batch.pk} --until annotating)"
            )
        on_page = set(
            HITItem.objects.filter(hit__batch_id=batch.pk).values_list("image_id", "caption_id")
        )
        drawn = _round_draw(batch, config, on_page)
        positions = np.random.default_rng([config.seed, _SEED_TAG]).permutation(len(drawn))
        QualificationPair.objects.bulk_create(
            [
                QualificationPair(
                    batch_id=batch.pk,
                    position=int(position),
                    image_id=spec.image_id,
                    caption_id=spec.caption_id,
                    positive=spec.role == Role.GOLDEN_TP,
                    source=QualificationSource.GOLDEN,
                    note=POSITIVE_NOTE if spec.role == Role.GOLDEN_TP else NEGATIVE_NOTE,
                )
                for position, spec in zip(positions, drawn, strict=True)
            ]
        )
    return len(drawn)


def _round_draw(batch: Batch, config: BatchConfig, on_page: set[tuple[int, int]]) -> list[ItemSpec]:
    """Draw the round's matches, then its mismatches, as goldens are drawn, off `on_page`."""
    pool = golden_pool(batch_id=batch.pk, dataset_id=batch.dataset_id)
    queries = sorted(pool.negatives)
    matches, _ = qualification_mix(config.qualification_pairs)
    drawn = []
    for index in range(config.qualification_pairs):
        role = Role.GOLDEN_TP if index < matches else Role.GOLDEN_TN
        try:
            drawn.append(
                golden_replacement(
                    role,
                    pool=pool,
                    queries=queries,
                    on_page=on_page,  # the draw adds its pair: no pair twice
                    seed=[config.seed, _SEED_TAG, index],
                )
            )
        except PackingError as exc:
            raise ServiceError(
                f"batch {batch.pk}: cannot draw {config.qualification_pairs} qualification "
                f"pairs ({exc}); choose them instead: "
                f"python manage.py batch_qualification {batch.pk} --pairs FILE.csv"
            ) from exc
    return drawn


def qualification_pairs_set(*, batch: Batch, pairs: Sequence[QualificationPairInput]) -> int:
    """Make `pairs` the batch's round, in their order, in place of the pairs it had.

    Refused once a worker has started the round (its answers point at the pairs) or HITs on
    MTurk require MTurk's test of them (it shows their images), for a
    batch without a round or without HITs yet (the pairs are checked against their pages),
    and for a pair that names an image or caption the dataset lacks,
    an invalid caption, a pair twice, or a pair on a HIT page of the batch (the round must
    not give a real HIT's pair away). Returns how many pairs the round now has.
    """
    if not batch_config(batch).qualification_required:
        raise ServiceError(
            f"batch {batch.pk} has no qualification round: its config sets qualification_pairs "
            "to 0 (create a batch whose config asks for one)"
        )
    if not HIT.objects.filter(batch_id=batch.pk).exists():
        raise ServiceError(
            f"batch {batch.pk} has no HITs yet: choose its qualification pairs once they are "
            f"built (batch_run {batch.pk} --until annotating), so that no pair is on a HIT page"
        )
    if not pairs:
        raise ServiceError("give at least one qualification pair", field="pairs")
    if len(pairs) > MAX_PAIRS:
        raise ServiceError(
            f"a qualification round has at most {MAX_PAIRS} pairs (got {len(pairs)})",
            field="pairs",
        )
    rows = _admin_pairs_check(batch, pairs)
    with transaction.atomic():
        locked = Batch.objects.select_for_update().get(pk=batch.pk)  # no try starts meanwhile
        started = QualificationAttempt.objects.filter(batch_id=batch.pk).count()
        if started:
            raise ServiceError(
                f"batch {batch.pk}: its qualification round has started ({started} tries so "
                "far); its pairs can no longer change (the answers point at them)"
            )
        if _mturk_test_live(locked):
            raise ServiceError(
                f"batch {batch.pk}: its HITs on MTurk require the qualification test made of "
                "these pairs (the test shows their images); its pairs can no longer change"
            )
        QualificationPair.objects.filter(batch_id=batch.pk).delete()
        QualificationPair.objects.bulk_create(rows)
    return len(rows)


def _mturk_test_live(batch: Batch) -> bool:
    """Say whether HITs of the batch on MTurk require MTurk's test of the round's pairs.

    That test links to the pairs' images (annotation.mturk.qualification keeps its type in
    `Batch.mturk["qualification"][environment]`): replacing the pairs would break it.
    """
    state = batch.mturk or {}
    environment = state.get("environment")
    stored = state.get("qualification", {}).get(environment) if environment else None
    return bool(
        stored
        and stored.get("mode") == "test"
        and HIT.objects.filter(batch_id=batch.pk, external_id__isnull=False).exists()
    )


def _admin_pairs_check(
    batch: Batch, pairs: Sequence[QualificationPairInput]
) -> list[QualificationPair]:
    """Check each admin pair against the batch's dataset; return the rows to store."""
    dataset = batch.dataset_id
    images = dict(
        Image.objects.filter(
            dataset_id=dataset, ext_id__in={p.image_ext_id for p in pairs}
        ).values_list("ext_id", "pk")
    )
    captions = {
        ext_id: (pk, invalid)
        for ext_id, pk, invalid in Caption.objects.filter(
            dataset_id=dataset, ext_id__in={p.caption_ext_id for p in pairs}
        ).values_list("ext_id", "pk", "is_invalid")
    }
    on_page = set(
        HITItem.objects.filter(hit__batch_id=batch.pk).values_list("image_id", "caption_id")
    )
    seen: dict[tuple[int, int], int] = {}
    rows = []
    for index, pair in enumerate(pairs):
        named = f"image {pair.image_ext_id} with caption {pair.caption_ext_id}"
        if pair.image_ext_id not in images:
            raise QualificationPairError(
                index, f"the batch's dataset has no image {pair.image_ext_id}"
            )
        if pair.caption_ext_id not in captions:
            raise QualificationPairError(
                index, f"the batch's dataset has no caption {pair.caption_ext_id}"
            )
        caption_pk, invalid = captions[pair.caption_ext_id]
        if invalid:
            raise QualificationPairError(
                index, f"caption {pair.caption_ext_id} is marked invalid; choose a valid caption"
            )
        key = (images[pair.image_ext_id], caption_pk)
        if key in seen:
            raise QualificationPairError(index, f"{named} is pair {seen[key] + 1} already")
        if key in on_page:
            raise QualificationPairError(
                index,
                f"{named} is on a HIT page of batch {batch.pk}; the round must not show a "
                "real HIT's pair (choose another)",
            )
        seen[key] = index
        rows.append(
            QualificationPair(
                batch_id=batch.pk,
                position=index,
                image_id=key[0],
                caption_id=key[1],
                positive=pair.positive,
                source=QualificationSource.ADMIN,
                note=pair.note.strip(),
            )
        )
    return rows


def qualification_pairs_parse(
    lines: Iterable[str],
) -> tuple[list[QualificationPairInput], list[int]]:
    """Read admin pairs from CSV text: `image_id,caption_id,answer[,note]`, answer yes or no.

    Returns the pairs and, for each, its line in the file (for error messages). Blank lines
    are skipped. Raises ServiceError naming the line of the first bad row.
    """
    reader = csv.DictReader(lines)
    header = [name.strip().lower() for name in reader.fieldnames or []]
    missing = [name for name in ("image_id", "caption_id", "answer") if name not in header]
    if missing:
        raise ServiceError(
            f"line 1: the header must name image_id,caption_id,answer[,note] "
            f"(missing: {', '.join(missing)})"
        )
    reader.fieldnames = header
    pairs, line_numbers = [], []
    for row in reader:
        if not any((value or "").strip() for value in row.values() if isinstance(value, str)):
            continue
        line = reader.line_num
        try:
            image_id = int(row["image_id"].strip())
            caption_id = int(row["caption_id"].strip())
        except (AttributeError, ValueError):
            raise ServiceError(
                f"line {line}: image_id and caption_id must be whole numbers "
                f"(got {row['image_id']!r}, {row['caption_id']!r})"
            ) from None
        answer = (row["answer"] or "").strip().lower()
        if answer not in ("yes", "no"):
            raise ServiceError(f"line {line}: answer must be yes or no (got {row['answer']!r})")
        note = (row.get("note") or "").strip()
        pairs.append(QualificationPairInput(image_id, caption_id, answer == "yes", note))
        line_numbers.append(line)
    return pairs, line_numbers
