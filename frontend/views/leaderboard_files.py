"""A leaderboard's downloads: its table as CSV and an example rankings file for the release."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404

from annotation.models import Release
from annotation.selectors import dataset_target_ids
from mitl.evaluation_inputs import DIRECTIONS
from mitl.release_downloads import EXAMPLE_MAX_LENGTH, example_rankings_build
from mitl.release_files import I2T_FILE, T2I_FILE
from pipeline.evaluate import Leaderboard, leaderboard_of


def leaderboard_values(board: Leaderboard) -> list[list[float | None]]:
    """Return each model's metric values in column order: directions, then metrics."""
    return [
        [
            evaluation.metrics.get(direction, {}).get(metric)
            for direction in DIRECTIONS
            for metric in board.metrics
        ]
        for evaluation in board.evaluations
    ]


def best_values(values: list[list[float | None]]) -> list[float | None]:
    """Return each column's highest value, None for a column without any.

    Highest is best: every leaderboard metric (recall, mAP@R, R-Precision, PMRP, nDCG,
    NCS, semantic recall) is better when higher.
    """
    columns = zip(*values, strict=True) if values else ()
    return [max((v for v in column if v is not None), default=None) for column in columns]


def leaderboard_csv_text(release: Release) -> str:
    """Return the leaderboard as CSV: model, one column per direction and metric, submitted."""
    board = leaderboard_of(release=release)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(
        [
            "model",
            *(f"{direction}:{metric}" for direction in DIRECTIONS for metric in board.metrics),
            "submitted_by",
            "submitted_at",
        ]
    )
    for evaluation, values in zip(board.evaluations, leaderboard_values(board), strict=True):
        writer.writerow(
            [
                evaluation.model_name,
                *("" if value is None else value for value in values),
                evaluation.submitted_by.get_username() if evaluation.submitted_by else "",
                evaluation.created_at.isoformat(),
            ]
        )
    return buffer.getvalue()


@login_required
def leaderboard_csv(request: HttpRequest, release_id: int) -> HttpResponse:
    """Send the release's leaderboard as a CSV attachment."""
    return leaderboard_csv_response(get_object_or_404(Release, pk=release_id))


def leaderboard_csv_response(release: Release) -> HttpResponse:
    """Return the leaderboard's CSV as an attachment named after the release."""
    response = HttpResponse(leaderboard_csv_text(release), content_type="text/csv")
    filename = f"{release.name}-v{release.version}-leaderboard.csv"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
def leaderboard_example(request: HttpRequest, release_id: int) -> HttpResponse:
    """Send a valid rankings file for the release's queries, to show the upload's format."""
    release = get_object_or_404(Release.objects.select_related("dataset"), pk=release_id)
    folder = Path(release.path)
    if not (folder / I2T_FILE).is_file() or not (folder / T2I_FILE).is_file():
        raise Http404(f"release {release} has no ECCV Caption files")
    # Enough of the dataset's ids to fill every ranking to the cap past its positives.
    images, captions = dataset_target_ids(dataset=release.dataset, limit=2 * EXAMPLE_MAX_LENGTH)
    rankings = example_rankings_build(folder, images=images, captions=captions)
    response = HttpResponse(json.dumps(rankings), content_type="application/json")
    filename = f"{release.name}-v{release.version}-example-rankings.json"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
