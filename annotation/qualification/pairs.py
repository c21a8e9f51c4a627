"""A batch's qualification pool: pairs drawn as golden pairs are, or chosen by an admin.

Each try of the round (`annotation.qualification.attempts`) draws its pairs from the pool
and shows them one at a time with feedback; the pool holds enough that no try of a worker
shows a pair an earlier try told them the answer of (`qualification_pairs` x
`qualification_attempts`). The pool is drawn when the batch's HITs are built (half
original pairs, half pairs outside every annotator's top ranks) and never holds a pair
shown on the batch's HIT pages, so the round never gives away a real HIT's golden or task
pair; an admin may choose it instead, from a CSV (`batch_qualification BATCH --pairs
FILE.csv`), until a worker's try or MTurk's test points at it. MTurk's test has pairs of
its own (`qualification_test_pairs`), never shown in a try here.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from django.db import transaction
from django.db.models import Max

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
from mitl.config import QUALIFICATION_POOL_MAX, batch_config
from mitl.hits import ItemSpec, PackingError, Role, golden_replacement
from mitl.qualification import (
    NEGATIVE_NOTE,
    POSITIVE_NOTE,
    qualification_mix,
    qualification_pool_needs,
    qualification_pool_shortfall,
)

# Mixed into the batch seed, so the round's draws differ from the HITs' golden draws.
_SEED_TAG = 0x5155_414C  # "QUAL"
_MTURK_TAG = 0x4D54  # "MT": MTurk's test, apart from the pool


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
    """Fill the round's pool by drawing, as golden pairs are drawn; return how many were drawn.

    The pool holds what every worker's tries need (`mitl.qualification.qualification_pool_needs`:
    `qualification_pairs` x `qualification_attempts`, half of them matches): golden true
    positives (original pairs) and golden true negatives (for one of the batch's queries,
    outside every annotator's top `golden_negative_depth`), none shown on a HIT page of the
    batch, so the round never gives away a real HIT's golden or task pair. Seeded from the
    batch seed; positions shuffled. A full pool draws nothing; one short of its pairs (made
    before pools, or before `qualification_attempts` was raised) gets the missing ones, which
    leaves the tries taken so far as they are. A batch without a round gets none. Called
    when the HITs are built; an adaptive batch's later rounds keep the pool of its first.
    """
    config = batch_config(batch)
    if not config.qualification_required:
        return 0
    with transaction.atomic():
        Batch.objects.select_for_update().get(pk=batch.pk)  # one draw at a time
        pool = QualificationPair.objects.filter(batch_id=batch.pk, mturk_test=False)
        have_yes = pool.filter(positive=True).count()
        have_no = pool.count() - have_yes
        need_yes, need_no = qualification_pool_needs(
            config.qualification_pairs, config.qualification_attempts
        )
        roles = [Role.GOLDEN_TP] * max(0, need_yes - have_yes)
        roles += [Role.GOLDEN_TN] * max(0, need_no - have_no)
        if not roles:
            return 0
        drawn = _pairs_draw(
            batch,
            roles,
            seed=[config.seed, _SEED_TAG, have_yes + have_no],
            what=f"{len(roles)} qualification pairs for its pool",
            instead=f"choose them instead: python manage.py batch_qualification {batch.pk} "
            "--pairs FILE.csv",
        )
        _pairs_store(batch, drawn, mturk_test=False)
    return len(drawn)


def qualification_test_pairs(*, batch: Batch) -> list[QualificationPair]:
    """Return the pairs of MTurk's test, in order, drawing them first if there are none.

    MTurk shows one test again on every retry, so its pairs are `qualification_pairs` of
    their own, with the round's mix, drawn as the pool is but apart from it: no try on the
    platform shows one (its feedback would tell MTurk's answer key). Empty for a batch
    without a round. Drawn once; an admin's pool (`qualification_pairs_set`) drops them,
    and the next publication draws them again.
    """
    config = batch_config(batch)
    if not config.qualification_required:
        return []
    with transaction.atomic():
        Batch.objects.select_for_update().get(pk=batch.pk)
        stored = _test_pairs(batch)
        if stored:
            return stored
        matches, mismatches = qualification_mix(config.qualification_pairs)
        drawn = _pairs_draw(
            batch,
            [Role.GOLDEN_TP] * matches + [Role.GOLDEN_TN] * mismatches,
            seed=[config.seed, _SEED_TAG, _MTURK_TAG],
            what=f"{config.qualification_pairs} pairs for MTurk's qualification test",
            instead="publish it with `qualification_mode` granted instead",
        )
        _pairs_store(batch, drawn, mturk_test=True)
        return _test_pairs(batch)


def _test_pairs(batch: Batch) -> list[QualificationPair]:
    return list(
        QualificationPair.objects.filter(batch_id=batch.pk, mturk_test=True)
        .select_related("image", "caption")
        .order_by("position")
    )


def _pairs_draw(
    batch: Batch, roles: Sequence[Role], *, seed: list[int], what: str, instead: str
) -> list[ItemSpec]:
    """Draw one pair per role as goldens are drawn, off every HIT page and every pair the
    batch has already (`golden_pool` leaves those out); `seed` + the index seeds each."""
    if not HIT.objects.filter(batch_id=batch.pk).exists():
        raise ServiceError(
            f"batch {batch.pk} has no HITs yet: its qualification pairs are drawn once "
            f"its HITs are built (batch_run {batch.pk} --until annotating)"
        )
    on_page = set(
        HITItem.objects.filter(hit__batch_id=batch.pk).values_list("image_id", "caption_id")
    )
    pool = golden_pool(batch_id=batch.pk, dataset_id=batch.dataset_id)
    queries = sorted(pool.negatives)
    drawn = []
    for index, role in enumerate(roles):
        try:
            drawn.append(
                golden_replacement(
                    role,
                    pool=pool,
                    queries=queries,
                    on_page=on_page,  # the draw adds its pair: no pair twice
                    seed=[*seed, index],
                )
            )
        except PackingError as exc:
            raise ServiceError(f"batch {batch.pk}: cannot draw {what} ({exc}); {instead}") from exc
    return drawn


def _pairs_store(batch: Batch, drawn: Sequence[ItemSpec], *, mturk_test: bool) -> None:
    """Store drawn pairs after the batch's last position, in a seeded shuffled order."""
    config = batch_config(batch)
    last = QualificationPair.objects.filter(batch_id=batch.pk).aggregate(last=Max("position"))
    start = 0 if last["last"] is None else last["last"] + 1
    order = np.random.default_rng([config.seed, _SEED_TAG, start]).permutation(len(drawn))
    QualificationPair.objects.bulk_create(
        [
            QualificationPair(
                batch_id=batch.pk,
                position=start + int(offset),
                image_id=spec.image_id,
                caption_id=spec.caption_id,
                positive=spec.role == Role.GOLDEN_TP,
                source=QualificationSource.GOLDEN,
                note=POSITIVE_NOTE if spec.role == Role.GOLDEN_TP else NEGATIVE_NOTE,
                mturk_test=mturk_test,
            )
            for offset, spec in zip(order, drawn, strict=True)
        ]
    )


def qualification_pairs_set(*, batch: Batch, pairs: Sequence[QualificationPairInput]) -> int:
    """Make `pairs` the batch's pool, in their order, in place of the pool it had.

    Refused once a worker has started the round (its answers point at the pairs), for a
    batch without a round or without HITs yet (the pairs are checked against their pages),
    for a pool too small for every try to show fresh pairs (`qualification_pool_shortfall`),
    and for a pair that names an image or caption the dataset lacks, an invalid caption, a
    pair twice, a pair on a HIT page of the batch (the round must not give a real HIT's pair
    away) or one of MTurk's test (`qualification_test_pairs`, kept). Returns the pool's size.
    """
    config = batch_config(batch)
    if not config.qualification_required:
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
    if len(pairs) > QUALIFICATION_POOL_MAX:
        raise ServiceError(
            f"a qualification pool has at most {QUALIFICATION_POOL_MAX} pairs (got {len(pairs)})",
            field="pairs",
        )
    matches = sum(pair.positive for pair in pairs)
    shortfall = qualification_pool_shortfall(
        matches=matches,
        mismatches=len(pairs) - matches,
        pairs=config.qualification_pairs,
        attempts=config.qualification_attempts,
    )
    if shortfall:
        raise ServiceError(
            f"batch {batch.pk}: too few qualification pairs: {shortfall}. Give more pairs, or "
            "a batch config with fewer `qualification_pairs` or `qualification_attempts`",
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
        if _mturk_test_shows_pool(locked):
            raise ServiceError(
                f"batch {batch.pk}: its HITs on MTurk require the qualification test made of "
                "these pairs (the test shows their images); its pairs can no longer change"
            )
        QualificationPair.objects.filter(batch_id=batch.pk, mturk_test=False).delete()
        kept = QualificationPair.objects.filter(batch_id=batch.pk).aggregate(last=Max("position"))
        start = 0 if kept["last"] is None else kept["last"] + 1  # after MTurk's test pairs
        for row in rows:
            row.position += start
        QualificationPair.objects.bulk_create(rows)
    return len(rows)


def _mturk_test_shows_pool(batch: Batch) -> bool:
    """Say whether HITs of the batch on MTurk require a test made of the pool's pairs.

    A test made before MTurk's test had pairs of its own showed the pool and links to its
    images (annotation.mturk.qualification keeps its type in
    `Batch.mturk["qualification"][environment]`): replacing the pool would break it.
    """
    state = batch.mturk or {}
    environment = state.get("environment")
    stored = state.get("qualification", {}).get(environment) if environment else None
    return bool(
        stored
        and stored.get("mode") == "test"
        and HIT.objects.filter(batch_id=batch.pk, external_id__isnull=False).exists()
        and not QualificationPair.objects.filter(batch_id=batch.pk, mturk_test=True).exists()
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
    in_test = set(
        QualificationPair.objects.filter(batch_id=batch.pk, mturk_test=True).values_list(
            "image_id", "caption_id"
        )
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
        if key in in_test:
            raise QualificationPairError(
                index,
                f"{named} is a pair of MTurk's qualification test; a try here must not tell "
                "its answer (choose another)",
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
