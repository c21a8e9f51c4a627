"""Import jobs: dataset and positive-set imports that run in the background with progress.

`import_job_create` checks the request while the person who made it is still there: the
parameters, then the uploaded files themselves (every line of a captions or positives
file, a zip's entries and each image's header), so bad input is refused at once with a
message naming the file, line and field. Nothing stays behind after a refusal: no job,
no staged upload. A good request stages its uploads under `VAR_DIR/imports/<job id>/`
and queues `annotation.run_import` once the job is committed.

`import_job_run` does the import (the checks again, then the writes) and records how it
ended; the staged uploads are removed either way. Messages never show the staging folder:
a file is named as it was uploaded.

A web process killed mid-request (gunicorn's timeout) leaves its `.new-<hex>` folder
behind; `import_staging_clean` (hourly from Celery beat, and `manage.py
import_staging_clean`) deletes such folders, and those of jobs that are over or gone,
once nothing in them has been written for a while.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
import uuid
import zipfile
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from .errors import ServiceError
from .image_sources import (
    ImageSource,
    S3ImageSource,
    ZipImageSource,
    s3_uri_parse,
)
from .models import Dataset, ImportJob, ImportKind, ImportStatus, PositiveSet
from .parsers import CAPTION_FORMATS, ImportFileError, parse_cxc_sits, parse_eccv_positives
from .services import (
    CXC_MIN_SCORE,
    dataset_import,
    dataset_import_check,
    positives_import_cxc,
    positives_import_eccv,
)

logger = logging.getLogger(__name__)

Upload = Path | UploadedFile
PROGRESS_INTERVAL_S = 0.25  # progress is written at most four times a second
_NEW_PREFIX = ".new-"  # a request's uploads, staged before its job exists
_SLUG = re.compile(r"^[-a-zA-Z0-9_]{1,100}$")

# Accepted uploads and parameters per kind (anything else is refused, not ignored).
DATASET_UPLOADS = ("captions", "images", "labels")
DATASET_PARAMS = ("name", "format", "split", "images_s3", "description")
POSITIVES_UPLOADS = ("i2t", "t2i", "cxc")
POSITIVES_PARAMS = ("dataset", "label", "min_score", "ignore_unknown")


class ImportRequestError(ServiceError):
    """An import request is refused; `field` is the parameter or upload to blame."""

    def __init__(self, message: str, *, field: str = "non_field_errors") -> None:
        super().__init__(message)
        self.field = field

    @property
    def errors(self) -> dict[str, list[str]]:
        return {self.field: [str(self)]}


def import_staging_root() -> Path:
    """Return the folder under which every import's uploads are staged."""
    return Path(settings.VAR_DIR) / "imports"


def import_staging_dir(job_id: int) -> Path:
    """Return the folder that holds a job's uploads until it has run."""
    return import_staging_root() / str(job_id)


def import_job_create(
    *,
    kind: str,
    params: Mapping[str, Any],
    uploads: Mapping[str, Upload],
    created_by: Any = None,
) -> ImportJob:
    """Check an import request, stage its uploads and queue the job; see the module doc.

    `kind` "dataset": params `name`, `format` (tsv, coco, karpathy), `split` (karpathy
    only), `images_s3` (s3://bucket/prefix), `description`; uploads `captions` (required),
    `images` (a zip), `labels`. Kind "positives": params `dataset` (name), `label`,
    `min_score` (CxC only), `ignore_unknown`; uploads `i2t` and `t2i` (ECCV Caption format)
    or `cxc` (a CxC SITS CSV). Raises ImportRequestError naming the field at fault.
    """
    if kind == ImportKind.DATASET:
        clean = _dataset_params(params, uploads)
    elif kind == ImportKind.POSITIVES:
        clean = _positives_params(params, uploads)
    else:
        raise ImportRequestError(
            f"kind must be one of {', '.join(ImportKind.values)}, got {kind!r}", field="kind"
        )
    # Staged and checked before the job exists, outside any transaction: a large upload
    # must not hold the database's write lock. The folder gets the job's id at the end.
    folder = import_staging_root() / f"{_NEW_PREFIX}{uuid.uuid4().hex}"
    target: Path | None = None
    try:
        files = {key: _stage(folder, key, upload) for key, upload in uploads.items()}
        params = {**clean, "files": files}
        _check_files(kind, params, folder)
        with transaction.atomic():
            job = ImportJob.objects.create(kind=kind, params=params, created_by=created_by)
            target = import_staging_dir(job.pk)
            folder.rename(target)
            transaction.on_commit(lambda: _queue(job.pk))
    except BaseException as exc:
        shutil.rmtree(folder, ignore_errors=True)
        if target is not None:  # renamed, then the job was rolled back
            shutil.rmtree(target, ignore_errors=True)
        if isinstance(exc, ImportFileError | ServiceError):
            raise _request_error(exc, folder, uploads) from exc
        raise
    job.refresh_from_db()  # with eager Celery and no outer transaction, it has run by now
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
        dataset = _run(job, folder, ProgressWriter(job_id))
    except Exception as exc:
        if isinstance(exc, ImportFileError | ServiceError):
            message = _public_message(str(exc), folder, job.params.get("files", {}))
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


def import_staging_orphans(*, older_than: timedelta, now: datetime | None = None) -> list[Path]:
    """Return the staging folders no queued or running job needs, untouched for `older_than`.

    They are a request's uploads from before its job existed (`.new-<hex>`: the request
    died) and a job's (`<id>`) once it is done, failed or gone. A folder is as recent as
    the last write anywhere inside it, so an upload still being written is never taken,
    nor one whose job is still being committed. Anything else under the root is left alone.
    """
    root = import_staging_root()
    if not root.is_dir():
        return []
    folders: dict[Path, int | None] = {}
    for entry in root.iterdir():
        if entry.is_symlink() or not entry.is_dir():
            continue
        if entry.name.startswith(_NEW_PREFIX):
            folders[entry] = None
        elif entry.name.isdigit():
            folders[entry] = int(entry.name)
    in_use = set(
        ImportJob.objects.filter(
            pk__in=[job_id for job_id in folders.values() if job_id is not None],
            status__in=[ImportStatus.QUEUED, ImportStatus.RUNNING],
        ).values_list("pk", flat=True)
    )
    cutoff = (now or timezone.now()).timestamp() - older_than.total_seconds()
    return sorted(
        folder
        for folder, job_id in folders.items()
        if job_id not in in_use and _last_written(folder) < cutoff
    )


def import_staging_clean(*, older_than: timedelta, now: datetime | None = None) -> list[Path]:
    """Delete the staging folders `import_staging_orphans` finds; return those deleted."""
    removed = []
    for folder in import_staging_orphans(older_than=older_than, now=now):
        shutil.rmtree(folder, ignore_errors=True)
        if folder.exists():
            logger.warning("import staging: could not delete %s", folder)
        else:
            logger.info("import staging: deleted %s", folder)
            removed.append(folder)
    return removed


def _last_written(folder: Path) -> float:
    """Return the latest modification time of the folder and everything in it."""
    try:
        latest = folder.lstat().st_mtime
    except FileNotFoundError:  # deleted meanwhile: nothing left to clean
        return float("inf")
    for parent, dirs, files in os.walk(folder):
        for name in (*dirs, *files):
            try:
                latest = max(latest, os.lstat(os.path.join(parent, name)).st_mtime)
            except FileNotFoundError:  # deleted meanwhile (its job finished)
                continue
    return latest


class ProgressWriter:
    """Write a job's done/total, at most once per `interval` seconds and always at the end."""

    def __init__(
        self,
        job_id: int,
        *,
        interval: float = PROGRESS_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.job_id = job_id
        self.interval = interval
        self.clock = clock
        self._last: float | None = None
        self.writes = 0

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if done < total and self._last is not None and now - self._last < self.interval:
            return
        self._last = now
        self.writes += 1
        ImportJob.objects.filter(pk=self.job_id).update(done=done, total=total)


# --- checking a request ----------------------------------------------------------------


def _dataset_params(params: Mapping[str, Any], uploads: Mapping[str, Upload]) -> dict[str, Any]:
    _known_only(params, DATASET_PARAMS, uploads, DATASET_UPLOADS)
    name = _slug(params, "name")
    if Dataset.objects.filter(name=name).exists():
        raise ImportRequestError(
            f"dataset {name!r} already exists; choose another name", field="name"
        )
    fmt = params.get("format") or "tsv"
    if fmt not in CAPTION_FORMATS:
        raise ImportRequestError(
            f"format must be one of {', '.join(CAPTION_FORMATS)}, got {fmt!r}", field="format"
        )
    split = params.get("split") or None
    if split is not None and (fmt != "karpathy" or not isinstance(split, str)):
        raise ImportRequestError(
            "split applies to the karpathy format only (e.g. test)", field="split"
        )
    if "captions" not in uploads:
        raise ImportRequestError("a captions file is required", field="captions")
    images_s3 = params.get("images_s3") or None
    if images_s3 is not None:
        if "images" in uploads:
            raise ImportRequestError(
                "give either an images zip or images_s3, not both", field="images_s3"
            )
        try:
            s3_uri_parse(str(images_s3))
        except ImportFileError as exc:
            raise ImportRequestError(str(exc), field="images_s3") from exc
    description = params.get("description") or ""
    if not isinstance(description, str):
        raise ImportRequestError("description must be text", field="description")
    return {
        "name": name,
        "format": fmt,
        "split": split,
        "images_s3": images_s3,
        "description": description,
    }


def _positives_params(params: Mapping[str, Any], uploads: Mapping[str, Upload]) -> dict[str, Any]:
    _known_only(params, POSITIVES_PARAMS, uploads, POSITIVES_UPLOADS)
    dataset_name = _slug(params, "dataset")
    dataset = Dataset.objects.filter(name=dataset_name).first()
    if dataset is None:
        raise ImportRequestError(f"no dataset named {dataset_name!r}", field="dataset")
    label = _slug(params, "label")
    if PositiveSet.objects.filter(dataset=dataset, name=label).exists():
        raise ImportRequestError(
            f"dataset {dataset_name!r} already has a positive set named {label!r}", field="label"
        )
    eccv = "i2t" in uploads or "t2i" in uploads
    cxc = "cxc" in uploads
    if eccv == cxc:
        raise ImportRequestError(
            "upload either i2t and t2i (ECCV Caption format) or cxc (a CxC SITS CSV)",
            field="cxc" if cxc else "i2t",
        )
    if eccv and not ("i2t" in uploads and "t2i" in uploads):
        missing = "t2i" if "i2t" in uploads else "i2t"
        raise ImportRequestError(
            "the ECCV Caption format needs both i2t and t2i files", field=missing
        )
    min_score = params.get("min_score")
    if min_score is not None and eccv:
        raise ImportRequestError("min_score applies to a cxc file only", field="min_score")
    if min_score is not None:
        try:
            min_score = float(min_score)
        except (TypeError, ValueError):
            raise ImportRequestError(
                f"min_score must be a number, got {min_score!r}", field="min_score"
            ) from None
    ignore_unknown = params.get("ignore_unknown", False)
    if not isinstance(ignore_unknown, bool):
        raise ImportRequestError("ignore_unknown must be true or false", field="ignore_unknown")
    return {
        "dataset": dataset_name,
        "label": label,
        "format": "cxc" if cxc else "eccv",
        "min_score": CXC_MIN_SCORE if cxc and min_score is None else min_score,
        "ignore_unknown": ignore_unknown,
    }


def _known_only(
    params: Mapping[str, Any],
    known_params: tuple[str, ...],
    uploads: Mapping[str, Upload],
    known_uploads: tuple[str, ...],
) -> None:
    for key in params:
        if key not in known_params:
            raise ImportRequestError(
                f"unknown parameter {key!r} (known: {', '.join(known_params)})", field=key
            )
    for key in uploads:
        if key not in known_uploads:
            raise ImportRequestError(
                f"unknown file {key!r} (known: {', '.join(known_uploads)})", field=key
            )


def _slug(params: Mapping[str, Any], key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not _SLUG.match(value):
        raise ImportRequestError(
            f"{key} must be 1-100 letters, digits, hyphens or underscores, got {value!r}",
            field=key,
        )
    return value


def _stage(folder: Path, key: str, upload: Upload) -> str:
    """Copy one upload to `<folder>/<key>/<its own name>`; return that path under `folder`."""
    original = upload.name if isinstance(upload, UploadedFile) else Path(upload).name
    # Only the last part of the name, in safe characters: the name comes from the client.
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", Path(original or "").name)[:100].lstrip(".")
    target = folder / key / (safe or key)
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(upload, UploadedFile):
        with target.open("wb") as out:
            for chunk in upload.chunks():
                out.write(chunk)
    else:
        try:
            shutil.copyfile(upload, target)
        except OSError as exc:
            raise ImportRequestError(f"{upload}: cannot read ({exc.strerror})", field=key) from exc
    return str(target.relative_to(folder))


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
    return ImportRequestError(_public_message(message, folder, uploads), field=field)


def _public_message(message: str, folder: Path, keys: Iterable[str]) -> str:
    """Drop the staging folder from a message: files are named as they were uploaded."""
    for key in keys:
        message = message.replace(f"{folder / key}/", "")
    return message.replace(f"{folder}/", "")


# --- running a job --------------------------------------------------------------------


def _queue(job_id: int) -> None:
    from .tasks import run_import  # imported here: tasks import this module

    run_import.delay(job_id)


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
    dataset = Dataset.objects.filter(name=params["dataset"]).first()
    if dataset is None:
        raise ServiceError(f"no dataset named {params['dataset']!r}")
    if params["format"] == "cxc":
        positive_set, _ = positives_import_cxc(
            dataset=dataset,
            label=params["label"],
            path=files["cxc"],
            min_score=params["min_score"],
            ignore_unknown=params["ignore_unknown"],
        )
    else:
        positive_set, _ = positives_import_eccv(
            dataset=dataset,
            label=params["label"],
            i2t_path=files["i2t"],
            t2i_path=files["t2i"],
            ignore_unknown=params["ignore_unknown"],
        )
    return positive_set
