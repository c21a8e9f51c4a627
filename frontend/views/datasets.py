"""Datasets for staff: their statistics, an upload form, and the import job it starts."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from annotation.imports.requests import ImportRequestError
from annotation.models import (
    Batch,
    Dataset,
    ImportJob,
    ImportKind,
    ImportStatus,
    Release,
)
from annotation.selectors import dataset_rows
from annotation.tasks import import_job_submit
from mitl.formats.captions import CAPTION_FORMATS

from .access import staff_required
from .known_fields import KnownFieldsForm

FINISHED_IMPORTS = (ImportStatus.DONE, ImportStatus.FAILED)


@staff_required
def dataset_list(request: HttpRequest) -> HttpResponse:
    """List every dataset with its statistics."""
    context = {
        "rows": dataset_rows(datasets=Dataset.objects.order_by("name")),
        "jobs": ImportJob.objects.select_related("dataset").order_by("-created_at")[:10],
    }
    return render(request, "frontend/datasets.html", context)


@staff_required
def dataset_detail(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """Show one dataset: statistics, positive sets, its batches, releases and imports."""
    dataset = get_object_or_404(Dataset, pk=dataset_id)
    context = {
        "row": dataset_rows(datasets=[dataset])[0],
        "batches": Batch.objects.filter(dataset=dataset).order_by("-created_at"),
        "releases": Release.objects.filter(dataset=dataset).order_by("-created_at"),
        "jobs": ImportJob.objects.filter(dataset=dataset).order_by("-created_at"),
    }
    return render(request, "frontend/dataset.html", context)


class DatasetUploadForm(KnownFieldsForm):
    name = forms.SlugField(
        max_length=100, help_text="A short unique name: letters, digits, hyphens, e.g. coco5k."
    )
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    format = forms.ChoiceField(
        choices=[(fmt, fmt) for fmt in CAPTION_FORMATS],
        initial="tsv",
        help_text="tsv: header caption_id, image_id, file_name, caption (tab-separated); "
        "coco: a COCO captions JSON; karpathy: dataset_coco.json.",
    )
    captions = forms.FileField(label="Captions file")
    images = forms.FileField(
        required=False,
        label="Images (zip)",
        help_text="A zip of the image files named in the captions file; leave empty for a "
        "text-only dataset.",
        widget=forms.ClearableFileInput(attrs={"accept": ".zip,application/zip"}),
    )
    labels = forms.FileField(
        required=False,
        label="Object labels (JSON, optional)",
        help_text='{"<image id>": ["label", …]}: lets the object_labels annotator work.',
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)


@staff_required
@require_http_methods(["GET", "POST"])
def dataset_upload(request: HttpRequest) -> HttpResponse:
    """Take a captions file and a zip of images; queue the import and show its progress."""
    status = 200
    if request.method == "POST":
        form = DatasetUploadForm(request.POST, request.FILES)
        if form.is_valid():
            data = form.cleaned_data
            uploads = {key: data[key] for key in ("captions", "images", "labels") if data[key]}
            try:
                job = import_job_submit(
                    kind=ImportKind.DATASET,
                    params={
                        "name": data["name"],
                        "format": data["format"],
                        "description": data["description"],
                    },
                    uploads=uploads,
                    created_by=request.user,
                )
            except ImportRequestError as exc:
                form.add_error(exc.field if exc.field in form.fields else None, str(exc))
            else:
                return redirect("frontend:import-job", job_id=job.pk)
        status = 400
    else:
        form = DatasetUploadForm()
    return render(request, "frontend/dataset_upload.html", {"form": form}, status=status)


def import_job_state(job: ImportJob) -> dict[str, Any]:
    """Describe an import job in the shape progress.js reads (the batch API's shape)."""
    done = job.status == ImportStatus.DONE
    return {
        "state": job.status,
        "error": job.error,
        "progress": [
            {
                "stage": "importing",
                "done": job.done,
                "total": job.total,
                "finished": done,
            }
        ],
        "next_url": reverse("frontend:dataset", args=[job.dataset_id])
        if done and job.dataset_id
        else "",
    }


@staff_required
def import_job_page(request: HttpRequest, job_id: int) -> HttpResponse:
    """Show an import job's progress until it ends, and its error when it failed."""
    job = get_object_or_404(ImportJob.objects.select_related("dataset"), pk=job_id)
    context = {"job": job, "state": import_job_state(job), "finished": FINISHED_IMPORTS}
    return render(request, "frontend/import_job.html", context)


@staff_required
def import_job_status(request: HttpRequest, job_id: int) -> JsonResponse:
    """Return an import job's status and progress as JSON, for the page to poll."""
    job = get_object_or_404(ImportJob, pk=job_id)
    return JsonResponse(import_job_state(job))
