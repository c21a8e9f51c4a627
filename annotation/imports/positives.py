"""Positive sets imported from a file: ECCV Caption's pair of JSON files, or a CxC SITS CSV.

`positives_import` is the one place that chooses between the two formats and checks the
options that go with each; the `import_positives` command and the import jobs both call it.
Every function here writes in one transaction; arguments are keyword-only.
"""

from __future__ import annotations

from pathlib import Path

from django.db import transaction

from mitl.formats.common import ImportFileError
from mitl.formats.positives import CXC_SCORE_RANGE, parse_cxc_sits, parse_eccv_positives

from ..errors import ServiceError
from ..models import Caption, Dataset, Image, PositivePair, PositiveSet, PositiveSource

CXC_MIN_SCORE = 3.0  # CxC's own threshold for a positive caption-image pair (0-5 scale)


def positives_import(
    *,
    dataset_name: str,
    label: str,
    i2t_path: Path | None = None,
    t2i_path: Path | None = None,
    cxc_path: Path | None = None,
    min_score: float | None = None,
    ignore_unknown: bool = False,
) -> tuple[PositiveSet, int]:
    """Import ECCV Caption files (`i2t_path` and `t2i_path`) or a CxC SITS CSV (`cxc_path`)
    as the positive set `label` of the dataset named `dataset_name`.

    `min_score` goes with a CxC file only (default CXC_MIN_SCORE). The messages name the
    command's options: a web request's uploads are checked earlier, by field
    (`requests.positives_params`). Returns the set and the number of pairs dropped.
    """
    positives_source_check(
        i2t_path=i2t_path, t2i_path=t2i_path, cxc_path=cxc_path, min_score=min_score
    )
    dataset = Dataset.objects.filter(name=dataset_name).first()
    if dataset is None:
        raise ServiceError(f"no dataset named {dataset_name!r}")
    if cxc_path is not None:
        return positives_import_cxc(
            dataset=dataset,
            label=label,
            path=cxc_path,
            min_score=CXC_MIN_SCORE if min_score is None else min_score,
            ignore_unknown=ignore_unknown,
        )
    assert i2t_path is not None and t2i_path is not None  # positives_source_check
    return positives_import_eccv(
        dataset=dataset,
        label=label,
        i2t_path=i2t_path,
        t2i_path=t2i_path,
        ignore_unknown=ignore_unknown,
    )


def positives_source_check(
    *,
    i2t_path: Path | None,
    t2i_path: Path | None,
    cxc_path: Path | None,
    min_score: float | None,
) -> None:
    """Refuse anything but both ECCV files, or one CxC file (with its optional min_score)."""
    eccv = i2t_path is not None or t2i_path is not None
    if eccv == (cxc_path is not None):
        raise ServiceError(
            "give either --i2t and --t2i (ECCV Caption format) or --cxc (CxC SITS CSV)"
        )
    if eccv and (i2t_path is None or t2i_path is None):
        raise ServiceError("the ECCV Caption format needs both --i2t and --t2i")
    if eccv and min_score is not None:
        raise ServiceError("--min-score applies to --cxc only")


def positives_import_eccv(
    *,
    dataset: Dataset,
    label: str,
    i2t_path: Path,
    t2i_path: Path,
    ignore_unknown: bool = False,
) -> tuple[PositiveSet, int]:
    """Import an ECCV-format pair of files as an `imported` positive set named `label`.

    Ids the dataset does not hold are refused, or with `ignore_unknown` dropped (their
    pairs and queries). Returns the set and the number of pairs dropped.
    """
    if PositiveSet.objects.filter(dataset=dataset, name=label).exists():
        raise ServiceError(f"dataset {dataset.name!r} already has a positive set named {label!r}")
    positives = parse_eccv_positives(i2t_path, t2i_path)
    image_pk = dict(Image.objects.filter(dataset=dataset).values_list("ext_id", "pk"))
    caption_pk = dict(Caption.objects.filter(dataset=dataset).values_list("ext_id", "pk"))
    unknown_images = sorted({i for i, _ in positives.pairs if i not in image_pk})
    unknown_captions = sorted({c for _, c in positives.pairs if c not in caption_pk})
    if (unknown_images or unknown_captions) and not ignore_unknown:
        parts = []
        if unknown_images:
            parts.append(f"{len(unknown_images)} unknown image ids (first {unknown_images[0]})")
        if unknown_captions:
            parts.append(
                f"{len(unknown_captions)} unknown caption ids (first {unknown_captions[0]})"
            )
        raise ImportFileError(
            f"{i2t_path} / {t2i_path}: {' and '.join(parts)} in dataset {dataset.name!r} "
            "(--ignore-unknown drops them)"
        )
    known = sorted((i, c) for i, c in positives.pairs if i in image_pk and c in caption_pk)
    queries = {
        "i2t": [q for q in positives.image_queries if q in image_pk],
        "t2i": [q for q in positives.caption_queries if q in caption_pk],
    }
    with transaction.atomic():
        positive_set = PositiveSet.objects.create(
            dataset=dataset, name=label, source=PositiveSource.IMPORTED, queries=queries
        )
        PositivePair.objects.bulk_create(
            [
                PositivePair(
                    positive_set=positive_set, image_id=image_pk[i], caption_id=caption_pk[c]
                )
                for i, c in known
            ],
            batch_size=5000,
        )
    return positive_set, len(positives.pairs) - len(known)


def positives_import_cxc(
    *,
    dataset: Dataset,
    label: str,
    path: Path,
    min_score: float = CXC_MIN_SCORE,
    ignore_unknown: bool = False,
) -> tuple[PositiveSet, int]:
    """Import the pairs of a CxC SITS CSV rated `min_score` or more as an `imported` set.

    The set's queries are the images and captions the file rates, at any score. Rows
    naming ids the dataset does not hold are refused (the first is named by its line), or
    with `ignore_unknown` dropped. Returns the set and the number of positive pairs dropped.
    """
    low, high = CXC_SCORE_RANGE
    if not low <= min_score <= high:
        raise ServiceError(
            f"the minimum score must be between {low:g} and {high:g}, got {min_score}"
        )
    if PositiveSet.objects.filter(dataset=dataset, name=label).exists():
        raise ServiceError(f"dataset {dataset.name!r} already has a positive set named {label!r}")
    ratings = parse_cxc_sits(path)
    image_pk = dict(Image.objects.filter(dataset=dataset).values_list("ext_id", "pk"))
    caption_pk = dict(Caption.objects.filter(dataset=dataset).values_list("ext_id", "pk"))
    unknown = [r for r in ratings if r.image_id not in image_pk or r.caption_id not in caption_pk]
    if unknown and not ignore_unknown:
        first = unknown[0]
        field, kind, ext_id = (
            ("caption", "caption", first.caption_id)
            if first.caption_id not in caption_pk
            else ("image", "image", first.image_id)
        )
        raise ImportFileError(
            f"{path}:{first.line}: field {field}: {kind} id {ext_id} is not in dataset "
            f"{dataset.name!r} ({len(unknown)} of {len(ratings)} rows name unknown ids; "
            "--ignore-unknown drops them)"
        )
    positives = sorted(
        {
            (r.image_id, r.caption_id)
            for r in ratings
            if r.score >= min_score and r.image_id in image_pk and r.caption_id in caption_pk
        }
    )
    dropped = sum(1 for r in unknown if r.score >= min_score)
    queries = {
        "i2t": sorted({r.image_id for r in ratings} & image_pk.keys()),
        "t2i": sorted({r.caption_id for r in ratings} & caption_pk.keys()),
    }
    with transaction.atomic():
        positive_set = PositiveSet.objects.create(
            dataset=dataset,
            name=label,
            source=PositiveSource.IMPORTED,
            queries=queries,
            description=f"CxC SITS pairs rated {min_score:g} or more in {path.name}.",
        )
        PositivePair.objects.bulk_create(
            [
                PositivePair(
                    positive_set=positive_set, image_id=image_pk[i], caption_id=caption_pk[c]
                )
                for i, c in positives
            ],
            batch_size=5000,
        )
    return positive_set, dropped
