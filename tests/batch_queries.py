"""What the tests of chosen queries share: a batch's query ids and a dataset's ids."""

from __future__ import annotations

from annotation.models import Batch, Caption, Dataset, Image


def query_ids(batch: Batch) -> tuple[list[int], list[int]]:
    """The batch's image and caption queries, as the dataset's own ids, in query order."""
    queries = batch.queries.order_by("pk")
    return (
        [q.image.ext_id for q in queries if q.image_id],
        [q.caption.ext_id for q in queries if q.caption_id],
    )


def ext_ids(dataset: Dataset) -> tuple[list[int], list[int]]:
    """Every image and caption id of the dataset, sorted."""
    images = sorted(Image.objects.filter(dataset=dataset).values_list("ext_id", flat=True))
    captions = sorted(Caption.objects.filter(dataset=dataset).values_list("ext_id", flat=True))
    return images, captions
