"""Graded relevance of a dataset: its captions as a proxy corpus, and a proxy's relevance
matrices for chosen queries, cached in RELEVANCE_CACHE_DIR (docs/relevance.md).

The arithmetic lives in `mitl.relevance` and `mitl.graded_evaluation`; this module reads the
database. The batch pipeline computes the matrices of a release's queries in its Celery
aggregating stage, in blocks with progress, before the release is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from django.conf import settings

from annotation.models import Caption, Dataset
from mitl.formats.captions import CaptionRow
from mitl.graded_evaluation import proxy_matrices, queries_as_indexes
from mitl.qrels import proxy_qrels_file, proxy_qrels_text
from mitl.relevance.calibrated import CalibratedModel
from mitl.relevance.images import CaptionCorpus, Progress

RELEASE_AGGREGATION = "mean"  # how a release's proxy qrels score an image from its captions


@dataclass(frozen=True, eq=False)
class DatasetCorpus:
    corpus: CaptionCorpus
    dataset: Dataset | None


def dataset_corpus(dataset: Dataset) -> DatasetCorpus:
    """Return the dataset's captions (every caption, invalid ones included) as a corpus."""
    rows = list(
        Caption.objects.filter(dataset=dataset)
        .order_by("id")
        .values_list("ext_id", "image__ext_id", "text")
    )
    corpus = CaptionCorpus.of([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
    return DatasetCorpus(corpus=corpus, dataset=dataset)


def captions_corpus(rows: Sequence[CaptionRow]) -> CaptionCorpus:
    """Return a captions TSV's rows (`mitl.formats.captions.parse_captions_tsv`) as a corpus."""
    return CaptionCorpus.of(
        [row.caption_id for row in rows], [row.image_id for row in rows], [row.text for row in rows]
    )


def query_relevance(
    corpus: CaptionCorpus,
    *,
    proxy: str,
    image_ids: Sequence[int],
    caption_ids: Sequence[int],
    aggregation: str = RELEASE_AGGREGATION,
    progress: Progress | None = None,
    calibrated: CalibratedModel | None = None,
) -> dict[str, np.ndarray]:
    """Return the proxy's relevance of every caption to each image query ("i2t") and of
    every image to each caption query ("t2i"), through the cache (`calibrated`: the model
    the proxy "calibrated" applies)."""
    queries = queries_as_indexes(corpus, image_ids, caption_ids)
    return proxy_matrices(
        corpus,
        queries,
        proxy,
        aggregation,
        cache_dir=settings.RELEVANCE_CACHE_DIR,
        progress=progress,
        calibrated=calibrated,
    )


def proxy_qrels_files(
    dataset: Dataset,
    proxies: Sequence[str],
    image_queries: Sequence[str | int],
    caption_queries: Sequence[str | int],
    progress: Progress | None = None,
    calibrated: CalibratedModel | None = None,
) -> dict[str, str]:
    """Return each proxy's graded qrels files (name -> text) for a release's queries
    (`calibrated`: the model the proxy "calibrated" applies)."""
    if not proxies:
        return {}
    corpus = dataset_corpus(dataset).corpus
    images, captions = [int(q) for q in image_queries], [int(q) for q in caption_queries]
    files = {}
    for proxy in proxies:
        matrices = query_relevance(
            corpus,
            proxy=proxy,
            image_ids=images,
            caption_ids=captions,
            progress=progress,
            calibrated=calibrated,
        )
        files[proxy_qrels_file(proxy, "i2t")] = proxy_qrels_text(
            images, corpus.caption_ids, matrices["i2t"]
        )
        files[proxy_qrels_file(proxy, "t2i")] = proxy_qrels_text(
            captions, corpus.image_ids, matrices["t2i"]
        )
    return files
