"""Import jobs: dataset and positive-set imports that run in the background with progress.

`import_job_create` checks the request while the person who made it is still there: the
parameters (`requests`), then the uploaded files themselves (every line of a
captions or positives file, a zip's entries and each image's header), so bad input is
refused at once with a message naming the file, line and field. Nothing stays behind after
a refusal: no job, no staged upload. A good request stages its uploads under
`VAR_DIR/imports/<job id>/` (`staging`) and creates the job. Queueing it is the task
module's: `annotation.tasks.import_job_submit` leases `annotation.run_import` in the job's
transaction (through `on_created`) and sends it once the job is committed. The tasks
import this module to run jobs, never the other way round.

`import_job_run` does the import (the checks again, then the writes) and records how it
ended; the staged uploads are removed either way. Messages never show the staging folder:
a file is named as it was uploaded.
"""

from __future__ import annotations

import logging
import shutil
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from mitl.formats.common import ImportFileError
from mitl.formats.positives import parse_cxc_sits, parse_eccv_positives

from ..errors import ServiceError
from ..job_progress import ProgressWriter
from ..models import Dataset, ImportJob, ImportKind, ImportStatus, PositiveSet
from ..task_leases import LeaseSpec
from .datasets import dataset_import, dataset_import_check
from .image_sources import ImageSource, S3ImageSource, ZipImageSource
from .positives import positives_import
from .requests import ImportRequestError, Upload, dataset_params, positives_params
from .staging import import_staging_dir, import_staging_new, public_message, upload_stage

logger = logging.getLogger(__name__)


def import_job_create(
    *,
    kind: str,
    params: Mapping[str, Any],
    uploads: Mapping[str, Upload],
    created_by: Any = None,
    on_created: Callable[[int], None] | None = None,
) -> ImportJob:
    """Check an import request, stage its uploads and create the job; see the module doc.

    `kind` "dataset": params `name`, `format` (tsv, coco, karpathy), `split` (karpathy
    only), `images_s3` (s3://bucket/prefix), `description`; uploads `captions` (required),
    `images` (a zip), `labels`. Kind "positives": params `dataset` (name), `label`,
    `min_score` (CxC only), `ignore_unknown`; uploads `i2t` and `t2i` (ECCV Caption format)
    or `cxc` (a CxC SITS CSV). Raises ImportRequestError naming the field at fault.

    `on_created` is called with the job's id inside the transaction that creates it (the
    task module queues the job there); if it raises, nothing stays behind.
    """
    if kind == ImportKind.DATASET:
        clean = dataset_params(params, uploads)
    elif kind == ImportKind.POSITIVES:
        clean = positives_params(params, uploads)
    else:
        raise ImportRequestError(
            f"kind must be one of {', '.join(ImportKind.values)}, got {kind!r}", field="kind"
        )
    # Staged and checked before the job exists, outside any transaction: a large upload
    # must not hold the database's write lock. The folder gets the job's id at the end.
    folder = import_staging_new()
    target: Path | None = None
    try:
        files = {key: upload_stage(folder, key, upload) for key, upload in uploads.items()}
        params = {**clean, "files": files}
        _check_files(kind, params, folder)
        with transaction.atomic():
            job = ImportJob.objects.create(kind=kind, params=params, created_by=created_by)
            target = import_staging_dir(job.pk)
            folder.rename(target)
            if on_created is not None:
                on_created(job.pk)
    except BaseException as exc:
        shutil.rmtree(folder, ignore_errors=True)
        if target is not None:  # renamed, then the job was rolled back
            shutil.rmtree(target, ignore_errors=True)
        if isinstance(exc, ImportFileError | ServiceError):
            raise _request_error(exc, folder, uploads) from exc
        raise
    job.refresh_from_db()  # queued, with eager Celery and no outer transaction: it has run
    return job


def import_job_run(*, job_id: int) -> ImportJob:
    """Run a queued job, record progress and how it ended, and remove its staged uploads.

    A job that is done or failed is left as it is, so a task delivered twice does nothing.
    A job found running is run again (its worker died: nothing of it was committed).
    """
    claimed = ImportJob.objects.filter(
        pk=job_id, status__in=[ImportStatus.QUEUED, ImportStatus.RUNNING]
    ).update(status=ImportStatus.RUNNING, done=0, total=0)
    job = ImportJob.objects.get(pk=job_id)
    if not claimed:
        return job
    folder = import_staging_dir(job_id)
    try:
        dataset = _run(job, folder, ProgressWriter(ImportJob, job_id))
    except Exception as exc:
        if isinstance(exc, ImportFileError | ServiceError):
            message = public_message(str(exc), folder, job.params.get("files", {}))
            logger.info("import job %s refused: %s", job_id, message)
        else:
            message = f"unexpected error: {type(exc).__name__}: {exc}"
            logger.exception("import job %s failed", job_id)
        # Only while running: a twin delivery that finished first keeps its result.
        ImportJob.objects.filter(pk=job_id, status=ImportStatus.RUNNING).update(
            status=ImportStatus.FAILED, error=message or "failed", finished_at=timezone.now()
        )
    else:
        ImportJob.objects.filter(pk=job_id, status=ImportStatus.RUNNING).update(
            status=ImportStatus.DONE,
            dataset=dataset,
            done=F("total"),
            error="",
            finished_at=timezone.now(),
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    job.refresh_from_db()
    return job


# --- checking the staged files ----------------------------------------------------------


def _check_files(kind: str, params: Mapping[str, Any], folder: Path) -> None:
    """Read and check the staged files now, so that bad input is refused at once."""
    files = {key: folder / path for key, path in params["files"].items()}
    if kind == ImportKind.POSITIVES:
        if params["format"] == "eccv":
            parse_eccv_positives(files["i2t"], files["t2i"])
        else:
            parse_cxc_sits(files["cxc"])
        # Ids unknown to the dataset: let the service itself decide, and undo its writes.
        try:
            with transaction.atomic():
                _run_positives(params, files)
                raise _DryRun
        except _DryRun:
            pass
        return
    source = _dataset_images(params, files)
    try:
        plan = dataset_import_check(
            name=params["name"],
            captions_path=files["captions"],
            format=params["format"],
            images=source,
            labels_path=files.get("labels"),
            split=params["split"],
        )
        if isinstance(source, ZipImageSource):
            # Headers only (format, pixel count): cheap, and enough to refuse what is not
            # an image or is a pixel bomb now. The job verifies every file in full.
            for file_name in plan.files.values():
                source.check_header(file_name)
    finally:
        if source is not None:
            source.close()


class _DryRun(Exception):
    """Raised to roll back a check that ran a service."""


def _dataset_images(params: Mapping[str, Any], files: Mapping[str, Path]) -> ImageSource | None:
    if "images" in files:
        path = files["images"]
        if not zipfile.is_zipfile(path):
            raise ImportFileError(f"{path}: the images upload must be a zip file")
        return ZipImageSource(path)
    if params.get("images_s3"):
        return S3ImageSource(
            params["images_s3"],
            endpoint_url=getattr(settings, "STORAGE_ENDPOINT_URL", None),
            region=getattr(settings, "STORAGE_REGION", None),
        )
    return None


def _request_error(
    exc: ImportFileError | ServiceError, folder: Path, uploads: Mapping[str, Upload]
) -> ImportRequestError:
    if isinstance(exc, ImportRequestError):
        return exc
    message = str(exc)
    # Blame the upload whose staged path the message names first.
    named = {key: message.find(f"{folder / key}/") for key in uploads}
    named = {key: at for key, at in named.items() if at >= 0}
    if named:
        field = min(named, key=named.__getitem__)
    elif "s3://" in message:
        field = "images_s3"
    else:
        field = "non_field_errors"
    return ImportRequestError(public_message(message, folder, uploads), field=field)


# --- running a job --------------------------------------------------------------------


def import_lease(job_id: int) -> LeaseSpec:
    """The lease of `annotation.run_import` for one job."""
    return LeaseSpec(key=f"import:{job_id}", import_job_id=job_id)


def _run(job: ImportJob, folder: Path, progress: ProgressWriter) -> Dataset:
    params = job.params
    files = {key: folder / path for key, path in params.get("files", {}).items()}
    missing = [key for key, path in files.items() if not path.is_file()]
    if missing:
        raise ServiceError(
            f"the uploaded {', '.join(missing)} file is gone from {folder.name}; upload it again"
        )
    if job.kind == ImportKind.POSITIVES:
        progress(0, 1)
        positive_set = _run_positives(params, files)
        return positive_set.dataset
    source = _dataset_images(params, files)
    try:
        return dataset_import(
            name=params["name"],
            captions_path=files["captions"],
            format=params["format"],
            images=source,
            labels_path=files.get("labels"),
            split=params["split"],
            description=params.get("description", ""),
            meta={
                "import": {
                    "job": job.pk,
                    "format": params["format"],
                    "images": _images_label(params),
                }
            },
            progress=progress,
        )
    finally:
        if source is not None:
            source.close()


def _images_label(params: Mapping[str, Any]) -> str | None:
    if "images" in params.get("files", {}):
        return Path(params["files"]["images"]).name
    return params.get("images_s3")


def _run_positives(params: Mapping[str, Any], files: Mapping[str, Path]) -> PositiveSet:
    positive_set, _ = positives_import(
        dataset_name=params["dataset"],
        label=params["label"],
        i2t_path=files.get("i2t"),
        t2i_path=files.get("t2i"),
        cxc_path=files.get("cxc"),
        min_score=params["min_score"],
        ignore_unknown=params["ignore_unknown"],
    )
    return positive_set
