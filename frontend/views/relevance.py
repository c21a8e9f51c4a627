"""A dataset's relevance calibration page (staff): the newest report, and a form that runs
the calibration `relevance_calibrate` runs (the same service), in the request."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from django import forms
from django.contrib import messages
from django.core.files.uploadedfile import UploadedFile
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_http_methods

from annotation.models import Dataset
from mitl.relevance.charts import calibration_svg
from mitl.relevance.proxies import PROXIES
from pipeline.relevance import dataset_corpus
from pipeline.relevance_calibration import (
    CALIBRATION_ERRORS,
    calibration_report,
    calibration_save,
    default_proxies,
    latest_calibration,
)

from .access import staff_required
from .known_fields import KnownFieldsForm

RATINGS_TITLES = {
    "crowd": "The crowd's answers on this platform (0-3)",
    "sits": "CxC image-caption ratings (SITS, 0-5)",
    "sts": "CxC caption-caption ratings (STS, 0-5)",
}
NO_RATINGS = (
    "No ratings to calibrate against: the dataset has no judged pairs yet; upload CxC's "
    "ratings (SITS and/or STS)."
)


class CalibrationForm(KnownFieldsForm):
    """The command's options: its ratings files, its proxies and its combination."""

    sits = forms.FileField(
        required=False,
        label="CxC image–caption ratings (sits_test.csv)",
        widget=forms.ClearableFileInput(attrs={"accept": ".csv,text/csv"}),
    )
    sts = forms.FileField(
        required=False,
        label="CxC caption–caption ratings (sts_test.csv)",
        widget=forms.ClearableFileInput(attrs={"accept": ".csv,text/csv"}),
    )
    proxies = forms.MultipleChoiceField(
        choices=[(name, f"{name}: {spec.summary}") for name, spec in PROXIES.items()],
        widget=forms.CheckboxSelectMultiple,
        help_text="Ticked: every proxy that runs here (METEOR needs Java, pos and synset "
        "WordNet). minilm reads every caption with a sentence model: the slowest. mpnet, a "
        "stronger sentence model, needs `make encoders` and five times MiniLM's time.",
    )
    combination = forms.BooleanField(
        required=False, initial=True, label="Fit the calibrated combination (out of fold)"
    )


@staff_required
@require_http_methods(["GET", "POST"])
def relevance_page(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """Show the dataset's newest relevance calibration, table and chart per ratings source;
    POST runs a new one (the crowd's answers count, plus any ratings uploaded)."""
    dataset = get_object_or_404(Dataset, pk=dataset_id)
    if request.method == "POST":
        form = CalibrationForm(request.POST, request.FILES)
        if form.is_valid() and _calibrate(request, dataset, form):
            return redirect("frontend:dataset-relevance", dataset_id=dataset.pk)
    else:
        form = CalibrationForm(initial={"proxies": default_proxies()})
    calibration = latest_calibration(dataset)
    context = {
        "dataset": dataset,
        "calibration": calibration,
        "sources": _sources(calibration.report) if calibration else [],
        "form": form,
    }
    return render(request, "frontend/relevance.html", context)


def _calibrate(request: HttpRequest, dataset: Dataset, form: CalibrationForm) -> bool:
    """Run and keep the calibration; on input it cannot use, put its message on the form."""
    data = form.cleaned_data
    with tempfile.TemporaryDirectory() as folder:
        paths = {name: _saved(data[name], Path(folder), name) for name in ("sits", "sts")}
        try:
            report = calibration_report(
                dataset_corpus(dataset),
                sits=paths["sits"],
                sts=paths["sts"],
                proxies=data["proxies"],
                combination=data["combination"],
            )
        except CALIBRATION_ERRORS as exc:  # a bad ratings line, a proxy that cannot run
            form.add_error(None, str(exc).replace(f"{folder}/", ""))  # the upload's own name
            return False
    if not report:
        form.add_error(None, NO_RATINGS)
        return False
    calibration_save(dataset, report)
    sources = ", ".join(report)
    messages.success(request, f"Calibrated against {sources}: the new report is below.")
    return True


def _saved(upload: UploadedFile | None, folder: Path, name: str) -> Path | None:
    """Write an uploaded ratings file into `folder` (the service reads paths)."""
    if upload is None:
        return None
    path = folder / f"{name}.csv"
    with path.open("wb") as out:
        for chunk in upload.chunks():
            out.write(chunk)
    return path


def _sources(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Each ratings source of a report with its title and chart, for the template."""
    sources = []
    for name, part in report.items():
        title = f"{RATINGS_TITLES.get(name, name)}: {part['pairs']:,} pairs"
        chart = mark_safe(calibration_svg(part["table"], title=title))
        sources.append({"name": name, "title": title, "part": part, "chart": chart})
    return sources
