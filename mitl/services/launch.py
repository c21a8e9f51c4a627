"""Launch a batch from the dashboard's wizard: create it (with chosen queries), start it.

Retrieval samples the queries only when a batch has none (`queries_sample`), so a batch
created here with an explicit list of image and caption ids keeps exactly those queries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from annotation.errors import ServiceError
from annotation.models import Batch, Caption, Dataset, Direction, Image, Query

from .autopilot import autopilot_request
from .pipeline import batch_create, batch_start
from .queueing import crowd_autopilot_queue

MAX_LISTED_IDS = 5  # unknown ids named in an error message


def batch_create_with_queries(
    *,
    dataset: Dataset,
    name: str,
    raw_config: Mapping[str, Any],
    image_ids: Sequence[int] | None = None,
    caption_ids: Sequence[int] | None = None,
    mturk: Mapping[str, Any] | None = None,
) -> Batch:
    """Create a draft batch; with id lists, its queries are those images and captions.

    `image_ids` and `caption_ids` are the dataset's own ids (as in its files); given either,
    the query counts of the configuration become the lengths of the lists. `mturk` is
    stored on the batch (e.g. the wizard's reward and cost estimate).
    """
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
                f"caption {invalid[0]} of {dataset.name!r} is marked invalid; it cannot be a query"
            )
        raw["n_image_queries"] = len(images)
        raw["n_caption_queries"] = len(captions)
    with transaction.atomic():
        batch = batch_create(dataset=dataset, name=name, raw_config=raw)
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
        return batch_start(batch=batch)
    autopilot_request(batch=batch)
    try:
        batch = batch_start(batch=batch)
    finally:
        # Queued even when an eager stage failed here, so the batch page says it stopped;
        # on commit, so a worker never reads the batch before it is saved.
        crowd_autopilot_queue(batch_id=batch.pk)
    return batch


def _resolve(rows: QuerySet, ext_ids: Sequence[int], what: str) -> list:
    """Return the rows with these ext ids (each once, in the order given); refuse unknown ids."""
    wanted = list(dict.fromkeys(int(i) for i in ext_ids))
    found = {row.ext_id: row for row in rows.filter(ext_id__in=wanted)}
    unknown = [i for i in wanted if i not in found]
    if unknown:
        listed = ", ".join(str(i) for i in unknown[:MAX_LISTED_IDS])
        more = f" and {len(unknown) - MAX_LISTED_IDS} more" if len(unknown) > MAX_LISTED_IDS else ""
        raise ServiceError(f"the dataset has no {what} with id {listed}{more}")
    return [found[i] for i in wanted]
