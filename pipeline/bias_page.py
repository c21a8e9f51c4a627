"""The bias report as the web page shows it: built once per state of the batch's work.

Building the report scores every subset of the annotators and draws its charts with
matplotlib (seconds on the demo, most of it the SVG), while the numbers change only when
verdicts, counted judgements, invalid captions, the original positives or the annotators
do. The folded fragment is kept as a file in REPORTS_CACHE_DIR named by a fingerprint of
those, read in a few aggregate queries: every web process and restart finds it, and a
change to any of them gives a new name, so a stale report is never served.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from django.conf import settings
from django.db.models import Count, Max, Q, Sum

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


def bias_html_cached(*, batch: Batch) -> str:
    """Return the batch's bias report as the page's folded HTML fragment, read from its file
    when the batch's work has not changed since it was last built.

    Raise ServiceError as `bias_report_build` does (nothing is stored then).
    """
    folder = Path(settings.REPORTS_CACHE_DIR)
    path = folder / f"bias-{batch.pk}-{bias_fingerprint(batch=batch)}.html"
    if path.is_file():
        return path.read_text(encoding="utf-8")
    html = render_bias_html(bias_report_build(batch=batch), standalone=False, folded=True)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob(f"bias-{batch.pk}-*.html"):
        old.unlink(missing_ok=True)  # the batch's earlier states: never served again
    # Written whole, then renamed: a request reading at the same time never sees half a file.
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_text(html, encoding="utf-8")
    partial.replace(path)
    return html
