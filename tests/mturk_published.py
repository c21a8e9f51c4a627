"""Put a test batch on the MTurk sandbox without calling MTurk: what publication stores."""

from __future__ import annotations

from typing import Any

from annotation.models import HIT, Batch


def published_on_sandbox(batch: Batch, **state: Any) -> Batch:
    """Give every HIT of `batch` a made-up HITId and store the sandbox (and `state`) in
    `Batch.mturk`, as a publication would; return the batch, reloaded."""
    for hit in batch.hits.all():
        HIT.objects.filter(pk=hit.pk).update(external_id=f"3HIT{hit.pk:026d}")
    Batch.objects.filter(pk=batch.pk).update(mturk={"environment": "sandbox", **state})
    batch.refresh_from_db()
    return batch
