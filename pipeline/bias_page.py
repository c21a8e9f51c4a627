"""The bias report as the web page shows it: built once per state of the batch's work.

Building the report scores every subset of the annotators and draws its charts with
matplotlib (seconds on the demo, most of it the SVG), while the numbers change only when
verdicts, counted judgements, invalid captions, the original positives or the annotators
do. The report (the API's JSON) and the page's folded fragment are kept as files in
REPORTS_CACHE_DIR named by a fingerprint of those, read in a few aggregate queries: every
web process and restart finds them, and a change to any of them gives a new name, so a
stale report is never served. A batch released on Celery workers has both built there
(`mitl.bias_warm`), so its first visitor does not wait; the demo builds them itself.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from django.conf import settings
from django.db.models import Count, Max, Q, Sum

from annotation.errors import ServiceError
from annotation.judgements_counted import judgements_counted
from annotation.models import ORIGINAL_SET, Batch, Caption, PositivePair, Verdict
from mitl.bias_html import render_bias_html

from .bias import bias_report_build


def bias_fingerprint(*, batch: Batch) -> str:
    """Return a key that changes whenever anything the batch's bias report reads does."""
    verdicts = Verdict.objects.filter(candidate__batch=batch).aggregate(
        n=Count("pk"), positive=Count("pk", filter=Q(is_positive=True)), last=Max("pk")
    )
    judged = judgements_counted(batch_id=batch.pk).aggregate(n=Count("pk"), last=Max("pk"))
    invalid = Caption.objects.filter(dataset_id=batch.dataset_id, is_invalid=True).aggregate(
        n=Count("pk"), ids=Sum("pk")
    )
    original = PositivePair.objects.filter(
        positive_set__dataset_id=batch.dataset_id, positive_set__name=ORIGINAL_SET
    ).aggregate(n=Count("pk"), last=Max("pk"))
    parts = {
        "batch": [batch.pk, batch.state, batch.round, batch.name],
        "annotators": sorted(batch.annotators.values_list("pk", flat=True)),
        "verdicts": verdicts,
        "judged": judged,
        "invalid": invalid,
        "original": original,
    }
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:32]


def bias_report_cached(*, batch: Batch) -> dict:
    """Return the batch's bias report (the API's JSON), read from its file when the batch's
    work has not changed since it was last built.

    Raise ServiceError as `bias_report_build` does (nothing is stored then).
    """
    path = _cache_path(batch, "json")
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    report = bias_report_build(batch=batch)
    _cache_write(batch, path, json.dumps(report))
    return report


def bias_html_cached(*, batch: Batch) -> str:
    """Return the batch's bias report as the page's folded HTML fragment, read from its file
    when the batch's work has not changed since it was last built.

    Raise ServiceError as `bias_report_build` does (nothing is stored then).
    """
    path = _cache_path(batch, "html")
    if path.is_file():
        return path.read_text(encoding="utf-8")
    report = bias_report_cached(batch=batch)
    html = render_bias_html(report, standalone=False, folded=True)
    _cache_write(batch, path, html)
    return html


def bias_cache_warm(*, batch_id: int) -> bool:
    """Build a batch's bias report and page now (seconds of scoring and charts), so the page
    and the API answer at once; False when there is nothing to build (no verdicts)."""
    batch = Batch.objects.select_related("dataset").get(pk=batch_id)
    try:
        bias_html_cached(batch=batch)
    except ServiceError:
        return False
    return True


def _cache_path(batch: Batch, suffix: str) -> Path:
    folder = Path(settings.REPORTS_CACHE_DIR)
    return folder / f"bias-{batch.pk}-{bias_fingerprint(batch=batch)}.{suffix}"


def _cache_write(batch: Batch, path: Path, text: str) -> None:
    """Write one cached file whole, dropping the batch's files of earlier states."""
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = path.suffix
    for old in path.parent.glob(f"bias-{batch.pk}-*{suffix}"):
        if old != path:
            old.unlink(missing_ok=True)  # the batch's earlier states: never served again
    # Written whole, then renamed: a request reading at the same time never sees half a file.
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
