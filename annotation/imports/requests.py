"""Checking an import request's parameters and which uploads it names, before any file is read.

Every parameter and upload is checked by name (anything unknown is refused, not ignored),
and a refusal is an ImportRequestError that names the field to blame.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.core.files.uploadedfile import UploadedFile

from mitl.formats.captions import CAPTION_FORMATS
from mitl.formats.common import ImportFileError

from ..errors import ServiceError
from ..models import Dataset, PositiveSet
from .image_sources import s3_uri_parse
from .positives import CXC_MIN_SCORE

Upload = Path | UploadedFile
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


def dataset_params(params: Mapping[str, Any], uploads: Mapping[str, Upload]) -> dict[str, Any]:
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


def positives_params(params: Mapping[str, Any], uploads: Mapping[str, Upload]) -> dict[str, Any]:
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
