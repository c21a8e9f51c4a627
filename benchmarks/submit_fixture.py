"""The submit benchmark's rows: HITs of 16 tasks + 2 goldens in a batch, and the workers.

Import it after `common.django_setup()`: it imports the models.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password

from annotation.models import (
    HIT,
    Batch,
    BatchState,
    Candidate,
    Dataset,
    Direction,
    HITItem,
    ItemRole,
    Query,
    Worker,
    WorkerSource,
)
from mitl.config import parse_batch_config

HIT_SIZE = 16
ITEMS_PER_HIT = HIT_SIZE + 2  # + 1 golden TP + 1 golden TN
N_IMAGES = 500
CAPTIONS_PER_IMAGE = 5
PASSWORD = "bench-submit-password"
BATCH_CONFIG = {
    "annotators": ["bench"],
    "n_image_queries": N_IMAGES,
    "n_caption_queries": 0,
    "hit_size": HIT_SIZE,
    "followups": True,
    "golden_policy": "approve_or_flag",
}


class BenchError(RuntimeError):
    """The run cannot go on; the message says why."""


@dataclass
class HitRows:
    """One HIT as the set-up made it: its items in page order and their roles."""

    hit_id: int
    item_ids: list[int]
    roles: list[str]


def batch_with_hits(
    dataset: Dataset,
    image_pks: list[int],
    caption_pks: list[int],
    name: str,
    n_hits: int,
    state: BatchState,
    *,
    max_assignments: int = 1,
) -> list[HitRows]:
    """A batch in `state` with `n_hits` HITs of 16 tasks + 1 golden TP + 1 golden TN.

    The rows are built directly (what retrieval, pooling and building would have written),
    with bulk inserts: every task is a distinct candidate pair of the batch.
    """
    n_captions = len(caption_pks)
    if n_hits * HIT_SIZE > N_IMAGES * n_captions:
        raise BenchError(f"{n_hits} HITs need more distinct pairs than the dataset has")
    batch = Batch.objects.create(
        dataset=dataset,
        name=name,
        config=parse_batch_config(BATCH_CONFIG).to_json(),
        state=state,
    )
    queries = Query.objects.bulk_create(
        [Query(batch=batch, direction=Direction.I2T, image_id=pk) for pk in image_pks]
    )
    query_of = {q.image_id: q.pk for q in queries}
    candidates = Candidate.objects.bulk_create(
        [
            Candidate(
                batch=batch,
                query_id=query_of[image_pks[k % N_IMAGES]],
                direction=Direction.I2T,
                image_id=image_pks[k % N_IMAGES],
                caption_id=caption_pks[k // N_IMAGES],
            )
            for k in range(n_hits * HIT_SIZE)
        ],
        batch_size=5000,
    )
    hits = HIT.objects.bulk_create(
        [HIT(batch=batch, index=h, max_assignments=max_assignments) for h in range(n_hits)],
        batch_size=5000,
    )
    rng = random.Random(f"{name}-{n_hits}")
    items: list[HITItem] = []
    layout: list[list[str]] = []
    for h, hit in enumerate(hits):
        roles = [ItemRole.TASK.value] * HIT_SIZE + [
            ItemRole.GOLDEN_TP.value,
            ItemRole.GOLDEN_TN.value,
        ]
        rng.shuffle(roles)
        layout.append(roles)
        tasks = iter(candidates[h * HIT_SIZE : (h + 1) * HIT_SIZE])
        for position, role in enumerate(roles):
            if role == ItemRole.TASK:
                candidate = next(tasks)
                image_id, caption_id = candidate.image_id, candidate.caption_id
            else:
                n = rng.randrange(N_IMAGES)
                own = caption_pks[n * CAPTIONS_PER_IMAGE]  # its own caption: a true positive
                other = caption_pks[((n + 1) % N_IMAGES) * CAPTIONS_PER_IMAGE]
                image_id = image_pks[n]
                caption_id = own if role == ItemRole.GOLDEN_TP else other
                candidate = None
            items.append(
                HITItem(
                    hit=hit,
                    position=position,
                    role=role,
                    candidate=candidate,
                    image_id=image_id,
                    caption_id=caption_id,
                )
            )
    items = HITItem.objects.bulk_create(items, batch_size=5000)
    return [
        HitRows(
            hit_id=hit.pk,
            item_ids=[item.pk for item in items[h * ITEMS_PER_HIT : (h + 1) * ITEMS_PER_HIT]],
            roles=layout[h],
        )
        for h, hit in enumerate(hits)
    ]


def workers_create(n: int) -> list[Worker]:
    """`n` accounts sharing one password hash (hashed once: set-up stays quick)."""
    user_model = get_user_model()
    password = make_password(PASSWORD)
    users = user_model.objects.bulk_create(
        [user_model(username=f"bench{c:02d}", password=password) for c in range(n)]
    )
    return Worker.objects.bulk_create(
        [
            Worker(user=user, source=WorkerSource.PLATFORM, external_id=user.username)
            for user in users
        ]
    )
