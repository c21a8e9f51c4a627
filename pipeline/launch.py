"""Create a batch with chosen queries (wizard, command line, API) and start it.

Retrieval samples the queries only when a batch has none (`queries_sample`), so a batch
created here with an explicit list of image and caption ids keeps exactly those queries.
The lists come from the caller (`--queries FILE`, the API's `queries`), from a positive
set (`queries_from`), or from a sample that leaves out the queries earlier batches on the
dataset already finished (`skip_finished`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import QuerySet

from annotation.errors import ServiceError
from annotation.models import (
    Batch,
    BatchState,
    Caption,
    Dataset,
    Direction,
    Image,
    PositiveSet,
    Query,
)
from mitl.config import BatchConfig, parse_batch_config
from mitl.instructions import Example
from mitl.sampling import CAPTION_STREAM, IMAGE_STREAM, sample_ids

from .autopilot import autopilot_request
from .stages import batch_create
from .tasks import batch_start_queue, crowd_autopilot_queue

MAX_LISTED_IDS = 5  # unknown ids named in an error message


def batch_create_with_queries(
    *,
    dataset: Dataset,
    name: str,
    raw_config: Mapping[str, Any],
    image_ids: Sequence[int] | None = None,
    caption_ids: Sequence[int] | None = None,
    mturk: Mapping[str, Any] | None = None,
    skip_finished: bool = False,
    instructions_examples: Sequence[Example] | None = None,
    user: AbstractBaseUser | None = None,
) -> Batch:
    """Create a draft batch; with id lists, its queries are those images and captions.

    `image_ids` and `caption_ids` are the dataset's own ids (as in its files); given either,
    the query counts of the configuration become the lengths of the lists. Without them,
    the config's `queries_from` names a positive set whose queries to use. `skip_finished`
    leaves out the queries of the dataset's released batches (from the lists, or from the
    seeded sample drawn here instead of at retrieval). `mturk` is stored on the batch (e.g.
    the wizard's reward and cost estimate). `instructions_examples` and `user` go to
    `batch_create` (the instructions' first version and who saved it).
    """
    if image_ids is None and caption_ids is None:
        # The config's own query counts are read only when no list overrides them.
        config = parse_batch_config(raw_config)
        if config.queries_from:
            image_ids, caption_ids = _set_queries(dataset, config.queries_from)
        elif skip_finished:
            image_ids, caption_ids = _unfinished_sample(dataset, config)
    if skip_finished and (image_ids is not None or caption_ids is not None):
        image_ids, caption_ids = _unfinished_only(dataset, image_ids or [], caption_ids or [])
    explicit = image_ids is not None or caption_ids is not None
    raw = dict(raw_config)
    images: list[Image] = []
    captions: list[Caption] = []
    if explicit:
        images = _resolve(Image.objects.filter(dataset=dataset), image_ids or [], "image")
        captions = _resolve(Caption.objects.filter(dataset=dataset), caption_ids or [], "caption")
        invalid = [c.ext_id for c in captions if c.is_invalid]
        if invalid:
            raise ServiceError(
                f"caption {invalid[0]} of {dataset.name!r} is marked invalid; it cannot be a query",
                field="queries",
            )
        raw["n_image_queries"] = len(images)
        raw["n_caption_queries"] = len(captions)
    with transaction.atomic():
        batch = batch_create(
            dataset=dataset,
            name=name,
            raw_config=raw,
            instructions_examples=instructions_examples,
            user=user,
        )
        if explicit:
            rows = [Query(batch=batch, direction=Direction.I2T, image=image) for image in images]
            rows += [
                Query(batch=batch, direction=Direction.T2I, caption=caption) for caption in captions
            ]
            Query.objects.bulk_create(rows)
        if mturk:
            Batch.objects.filter(pk=batch.pk).update(mturk=dict(mturk))
            batch.mturk = dict(mturk)
    return batch


def batch_launch(*, batch: Batch, simulated_crowd: bool = False) -> Batch:
    """Start a draft batch; with `simulated_crowd`, a simulated crowd judges and closes it.

    With no broker the stages run inside this call (Celery's eager mode); a failing stage
    records its error on the batch and raises here.
    """
    if not simulated_crowd:
        return batch_start_queue(batch=batch)
    autopilot_request(batch=batch)
    try:
        batch = batch_start_queue(batch=batch)
    finally:
        # Queued even when an eager stage failed here, so the batch page says it stopped;
        # on commit, so a worker never reads the batch before it is saved.
        crowd_autopilot_queue(batch_id=batch.pk)
    return batch


def queries_file_parse(data: Any) -> tuple[list[int], list[int]]:
    """Check a queries file's JSON, `{"images": [ids], "captions": [ids]}`; return both lists."""
    if not isinstance(data, Mapping) or not set(data) <= {"images", "captions"} or not data:
        raise ServiceError(
            'queries must be a JSON object {"images": [ids], "captions": [ids]} (either key '
            "may be left out)",
            field="queries",
        )
    lists = []
    for key in ("images", "captions"):
        values = data.get(key, [])
        if not isinstance(values, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in values
        ):
            raise ServiceError(f"queries: `{key}` must be a list of integer ids", field="queries")
        lists.append(list(values))
    if not lists[0] and not lists[1]:
        raise ServiceError("queries: name at least one image or caption", field="queries")
    return lists[0], lists[1]


def _set_queries(dataset: Dataset, set_name: str) -> tuple[list[int], list[int]]:
    """The image and caption queries a positive set declares (its ECCV-format keys)."""
    positive_set = PositiveSet.objects.filter(dataset=dataset, name=set_name).first()
    if positive_set is None:
        names = ", ".join(
            PositiveSet.objects.filter(dataset=dataset).values_list("name", flat=True)
        )
        raise ServiceError(
            f"`queries_from`: dataset {dataset.name!r} has no positive set {set_name!r} "
            f"(it has: {names or 'none'})",
            field="queries_from",
        )
    declared = positive_set.queries or {}
    if not declared.get("i2t") and not declared.get("t2i"):
        raise ServiceError(
            f"`queries_from`: positive set {set_name!r} records no queries (it covers "
            f"{positive_set.coverage}); name an imported set that does, such as eccv",
            field="queries_from",
        )
    return [int(i) for i in declared.get("i2t", [])], [int(c) for c in declared.get("t2i", [])]


def _finished(dataset: Dataset) -> tuple[set[int], set[int]]:
    """The image and caption queries (their dataset ids) of the dataset's released batches."""
    finished = Query.objects.filter(
        batch__dataset=dataset, batch__state=BatchState.RELEASED
    ).values_list("image__ext_id", "caption__ext_id")
    return (
        {image for image, _ in finished if image is not None},
        {caption for _, caption in finished if caption is not None},
    )


def _unfinished_only(
    dataset: Dataset, image_ids: Sequence[int], caption_ids: Sequence[int]
) -> tuple[list[int], list[int]]:
    """The listed queries that no released batch finished."""
    done_images, done_captions = _finished(dataset)
    return (
        [i for i in image_ids if i not in done_images],
        [c for c in caption_ids if c not in done_captions],
    )


def _unfinished_sample(dataset: Dataset, config: BatchConfig) -> tuple[list[int], list[int]]:
    """The config's seeded sample, drawn from the queries no released batch finished."""
    done_images, done_captions = _finished(dataset)
    images = [
        i
        for i in Image.objects.filter(dataset=dataset).values_list("ext_id", flat=True)
        if i not in done_images
    ]
    captions = [
        c
        for c in Caption.objects.filter(dataset=dataset, is_invalid=False).values_list(
            "ext_id", flat=True
        )
        if c not in done_captions
    ]
    wanted = (
        ("image", config.n_image_queries, images),
        ("caption", config.n_caption_queries, captions),
    )
    for what, count, left in wanted:
        if count > len(left):
            raise ServiceError(
                f"only {len(left)} {what} queries of {dataset.name!r} are not finished by an "
                f"earlier batch; ask for at most that many"
            )
    seed = config.seed
    return (
        sample_ids(sorted(images), config.n_image_queries, seed=seed, stream=IMAGE_STREAM).tolist(),
        sample_ids(
            sorted(captions), config.n_caption_queries, seed=seed, stream=CAPTION_STREAM
        ).tolist(),
    )


def _resolve(rows: QuerySet, ext_ids: Sequence[int], what: str) -> list:
    """Return the rows with these ext ids (each once, in the order given); refuse unknown ids."""
    wanted = list(dict.fromkeys(int(i) for i in ext_ids))
    found = {row.ext_id: row for row in rows.filter(ext_id__in=wanted)}
    unknown = [i for i in wanted if i not in found]
    if unknown:
        listed = ", ".join(str(i) for i in unknown[:MAX_LISTED_IDS])
        more = f" and {len(unknown) - MAX_LISTED_IDS} more" if len(unknown) > MAX_LISTED_IDS else ""
        raise ServiceError(f"the dataset has no {what} with id {listed}{more}", field="queries")
    return [found[i] for i in wanted]
