"""Releasing: extended positive sets (original ∪ human ∪ imported, minus invalid captions)."""

from __future__ import annotations

import hashlib
import hmac
import math
import shutil
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from annotation.errors import ServiceError
from annotation.models import (
    HIT,
    ORIGINAL_SET,
    Assignment,
    AssignmentStatus,
    Batch,
    Candidate,
    Direction,
    Judgement,
    PositivePair,
    PositiveSet,
    PositiveSource,
    Query,
    Release,
    Verdict,
)
from mitl.aggregation import RULE_DESCRIPTIONS
from mitl.bias_html import render_bias_html
from mitl.config import BatchConfig, parse_relevance
from mitl.datasheet import datasheet_markdown
from mitl.judgements import Level, mask_to_shortcomings, mask_to_wrong_concepts
from mitl.qrels import proxy_qrels_file, qrels_text
from mitl.release_files import (
    DATASHEET_FILE,
    QRELS_I2T_FILE,
    QRELS_T2I_FILE,
    bundle_checksum_path,
    bundle_path,
    positive_counts,
    positives_by_query,
    write_release_dir,
)
from mitl.relevance.images import Progress
from mitl.relevance.proxies import proxy_spec

from .aggregate import human_set_name
from .bias import bias_report_build
from .curation import REPORT_KEY as CURATION_REPORT
from .diversity import DIVERSITY_FILE
from .relevance import RELEASE_AGGREGATION, proxy_qrels_files

BIAS_HTML_FILE = "bias_report.html"
BIAS_JSON_FILE = "bias_report.json"
# Files release_create writes besides write_release_dir's standard ones.
GENERATED_FILES = frozenset(
    {QRELS_I2T_FILE, QRELS_T2I_FILE, DATASHEET_FILE, DIVERSITY_FILE, BIAS_HTML_FILE, BIAS_JSON_FILE}
)


def release_create(
    *,
    batch: Batch,
    config: BatchConfig,
    name: str | None = None,
    include_sets: Sequence[str] = (),
    extra_files: Mapping[str, str] | None = None,
    relevance: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> Release:
    """Write a new version of release `name` (default: the dataset's name) for the batch.

    The positives are the original set ∪ the batch's human verdicts ∪ each imported set
    named in `include_sets`, without invalid captions. `extra_files` maps further file
    names (e.g. "bias_report.html") to their text; they join the release and its zip.
    `relevance` (default: the config's) names caption proxies whose graded qrels the
    release carries (qrels_<proxy>_i2t.txt, qrels_<proxy>_t2i.txt); their matrices are
    computed in blocks (`progress`) and cached for the leaderboard's graded metrics.
    """
    name = name or batch.dataset.name
    imported = _imported_sets(batch, include_sets)
    extra_files = dict(extra_files or {})
    proxies = list(config.relevance if relevance is None else parse_relevance(relevance))
    generated = GENERATED_FILES | {proxy_qrels_file(p, d) for p in proxies for d in ("i2t", "t2i")}
    clashing = sorted(set(extra_files) & generated)
    if clashing:
        raise ServiceError(f"extra release file {clashing[0]!r} would replace a generated file")
    sources = [ORIGINAL_SET, human_set_name(batch), *imported]
    image_queries, caption_queries = _query_ext_ids(batch)
    original = _pairs(batch, [ORIGINAL_SET])
    extended = _pairs(batch, sources)
    i2t_before, t2i_before = positives_by_query(
        original, image_queries=image_queries, caption_queries=caption_queries
    )
    i2t, t2i = positives_by_query(
        extended, image_queries=image_queries, caption_queries=caption_queries
    )
    stats = {
        "i2t": positive_counts(i2t_before, i2t),
        "t2i": positive_counts(t2i_before, t2i),
        **_work_stats(batch),
        "curation": _curation_stats(batch, config),
    }
    verdict_rows = _verdict_rows(batch)
    scores = {(row["image_id"], row["caption_id"]): row["score"] for row in verdict_rows}
    version = _next_version(name)
    final_dir = settings.RELEASES_DIR / name / str(version)
    invalid = _invalid_captions(batch)
    manifest: dict[str, Any] = {
        "name": name,
        "version": version,
        "dataset": batch.dataset.name,
        "batches": [batch.pk],
        "sources": sources,
        "source_sets": _source_sets(batch, sources),
        "rule": config.aggregation,
        "rules": {str(batch.pk): config.aggregation},
        "rule_description": RULE_DESCRIPTIONS[config.aggregation],
        "counts": _finite(
            {
                "i2t": stats["i2t"],
                "t2i": stats["t2i"],
                "pairs_original": len(original),
                "pairs_extended": len(extended),
                "verdicts": stats["verdicts"],
                "judgements": stats["judgements"],
                "judgements_on_invalid_captions": stats["judgements_on_invalid_captions"],
            }
        ),
        "format": "ECCV Caption (image_to_caption.json, caption_to_image.json)",
        "invalid_captions_excluded": [entry["caption_id"] for entry in invalid],
        "invalid_captions": invalid,
    }
    reports = {DIVERSITY_FILE: batch.reports["diversity"]} if "diversity" in batch.reports else {}
    bias = _bias_report(batch)
    if bias is not None:
        reports[BIAS_JSON_FILE] = bias
        extra_files[BIAS_HTML_FILE] = render_bias_html(bias, standalone=True)
    if proxies:
        manifest["relevance"] = {
            "proxies": proxies,
            "aggregation": RELEASE_AGGREGATION,
            "versions": {proxy: proxy_spec(proxy).version for proxy in proxies},
        }
    text_files = {
        QRELS_I2T_FILE: qrels_text(i2t, scores, direction="i2t"),
        QRELS_T2I_FILE: qrels_text(t2i, scores, direction="t2i"),
        **proxy_qrels_files(batch.dataset, proxies, list(i2t), list(t2i), progress),
        **extra_files,
        DATASHEET_FILE: datasheet_markdown(manifest, stats, extra_files=sorted(extra_files)),
    }
    manifest = write_release_dir(
        final_dir,
        i2t=i2t,
        t2i=t2i,
        judgements=_judgement_rows(batch),
        stats=stats,
        reports=reports,
        verdicts=verdict_rows,
        text_files=text_files,
        bundle_root=f"{name}-v{version}",
        manifest=manifest,
    )
    try:
        with transaction.atomic():
            release = Release.objects.create(
                dataset=batch.dataset,
                name=name,
                version=version,
                rule=config.aggregation,
                path=str(final_dir),
                manifest=manifest,
            )
            release.batches.add(batch)
    except BaseException:
        # No release on disk without its database row.
        shutil.rmtree(final_dir, ignore_errors=True)
        bundle_path(final_dir).unlink(missing_ok=True)
        bundle_checksum_path(final_dir).unlink(missing_ok=True)
        raise
    return release


def _curation_stats(batch: Batch, config: BatchConfig) -> dict[str, Any]:
    """Strategy, rounds, budget and the estimated recall per direction (docs/curation.md)."""
    report = batch.reports.get(CURATION_REPORT, {})
    return {
        "strategy": config.strategy,
        "adjudication": config.adjudication if config.adaptive else None,
        "rounds": batch.round + 1,
        "budget_judgements": config.budget_judgements or None,
        "judgements_spent": report.get("judgements_spent"),
        "directions": {
            direction: {"found": values["found"], "estimate": values["estimate"]}
            for direction, values in report.get("directions", {}).items()
        },
    }


def worker_pseudonym(worker: str) -> str:
    """Return a stable, non-reversible name for a worker in published files.

    Releases are shared: MTurk WorkerIds link to people's Amazon profiles, and login names
    help password guessing. The same worker keeps one pseudonym across releases of this
    installation (keyed by SECRET_KEY), so per-worker analyses still work.
    """
    digest = hmac.new(settings.SECRET_KEY.encode(), worker.encode(), hashlib.sha256)
    return f"w-{digest.hexdigest()[:16]}"


def _bias_report(batch: Batch) -> dict[str, Any] | None:
    """Return the batch's model-bias report, or None when it cannot have one.

    A batch with no verdicts (nothing judged) or more annotators than the report scores
    is released without it; the manifest's file list says which reports are there.
    """
    try:
        return bias_report_build(batch=batch)
    except ServiceError:
        return None


def _imported_sets(batch: Batch, names: Sequence[str]) -> list[str]:
    """Return the named imported sets of the batch's dataset, in order, without repeats."""
    available = set(
        PositiveSet.objects.filter(
            dataset_id=batch.dataset_id, source=PositiveSource.IMPORTED
        ).values_list("name", flat=True)
    )
    missing = [n for n in names if n not in available]
    if missing:
        listed = ", ".join(sorted(available)) or "none; import one with import_positives"
        raise ServiceError(
            f"dataset {batch.dataset.name!r} has no imported positive set {missing[0]!r} "
            f"(imported sets: {listed})"
        )
    return list(dict.fromkeys(names))


def _source_sets(batch: Batch, names: list[str]) -> list[dict[str, Any]]:
    """Describe each source set: its kind and how many valid pairs it holds."""
    sets = {
        s.name: s for s in PositiveSet.objects.filter(dataset_id=batch.dataset_id, name__in=names)
    }
    described = []
    for set_name in names:
        positive_set = sets.get(set_name)
        described.append(
            {
                "name": set_name,
                "source": positive_set.source if positive_set else PositiveSource.HUMAN.value,
                "description": positive_set.description if positive_set else "",
                "pairs": positive_set.pairs.filter(caption__is_invalid=False).count()
                if positive_set
                else 0,
            }
        )
    return described


def _invalid_captions(batch: Batch) -> list[dict[str, Any]]:
    return [
        {
            "caption_id": ext_id,
            "image_id": image_ext_id,
            "reason": reason,
            "marked_at": marked_at.isoformat() if marked_at else None,
        }
        for ext_id, image_ext_id, reason, marked_at in batch.dataset.captions.filter(
            is_invalid=True
        )
        .order_by("ext_id")
        .values_list("ext_id", "image__ext_id", "invalid_reason", "invalid_marked_at")
    ]


def _finite(value: Any) -> Any:
    """Replace NaN by None: JSON columns (PostgreSQL jsonb) refuse NaN."""
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _verdict_rows(batch: Batch) -> list[dict[str, Any]]:
    """Return the rows of verdicts.csv: every verdict on a valid caption, by pair."""
    rows = []
    for image, caption, rule, is_positive, score, confidence, n, distribution in (
        Verdict.objects.filter(candidate__batch=batch, candidate__caption__is_invalid=False)
        .order_by("candidate__image__ext_id", "candidate__caption__ext_id")
        .values_list(
            "candidate__image__ext_id",
            "candidate__caption__ext_id",
            "rule",
            "is_positive",
            "score",
            "confidence",
            "n_judgements",
            "distribution",
        )
    ):
        rows.append(
            {
                "image_id": image,
                "caption_id": caption,
                "rule": rule,
                "is_positive": int(is_positive),
                "score": round(score, 6),
                "confidence": round(confidence, 6),
                "n_judgements": n,
                **{level.value: distribution.get(level.value, 0) for level in Level},
            }
        )
    return rows


def _next_version(name: str) -> int:
    """Return the next version of a release name, past any folder already on disk too.

    A folder can exist without its row (a database reset, or a copy from elsewhere); a
    release never overwrites one.
    """
    in_database = Release.objects.filter(name=name).aggregate(v=Max("version"))["v"] or 0
    folder = settings.RELEASES_DIR / name
    on_disk = (
        [int(p.name.split(".")[0]) for p in folder.iterdir() if p.name.split(".")[0].isdigit()]
        if folder.is_dir()
        else []
    )
    return max([in_database, *on_disk]) + 1


def _query_ext_ids(batch: Batch) -> tuple[list[int], list[int]]:
    queries = Query.objects.filter(batch=batch)
    images = list(queries.filter(direction=Direction.I2T).values_list("image__ext_id", flat=True))
    captions = list(
        queries.filter(direction=Direction.T2I, caption__is_invalid=False).values_list(
            "caption__ext_id", flat=True
        )
    )
    return images, captions


def _pairs(batch: Batch, set_names: list[str]) -> set[tuple[int, int]]:
    return set(
        PositivePair.objects.filter(
            positive_set__dataset_id=batch.dataset_id,
            positive_set__name__in=set_names,
            caption__is_invalid=False,
        ).values_list("image__ext_id", "caption__ext_id")
    )


def _work_stats(batch: Batch) -> dict[str, Any]:
    """Count the batch's work, judgements and verdicts on invalid captions apart.

    They are left out of `judgements` and `verdicts` as the positives and verdicts.csv
    leave those captions out (judgements.jsonl keeps every raw answer). HITs, candidates
    and assignments are counted whole: a HIT with one invalid caption was still worked.
    """
    judgements = Judgement.objects.filter(assignment__hit__batch=batch)
    verdicts = Verdict.objects.filter(candidate__batch=batch)
    valid_verdicts = verdicts.filter(candidate__caption__is_invalid=False)
    assignment_status = Counter(
        Assignment.objects.filter(hit__batch=batch).values_list("status", flat=True)
    )
    return {
        "candidates": Candidate.objects.filter(batch=batch).count(),
        "hits": HIT.objects.filter(batch=batch).count(),
        "assignments": dict(sorted(assignment_status.items())),
        "judgements": judgements.filter(item__caption__is_invalid=False).count(),
        "judgements_on_invalid_captions": judgements.filter(item__caption__is_invalid=True).count(),
        "verdicts": {
            "positive": valid_verdicts.filter(is_positive=True).count(),
            "negative": valid_verdicts.filter(is_positive=False).count(),
        },
        "verdicts_on_invalid_captions": verdicts.filter(
            candidate__caption__is_invalid=True
        ).count(),
    }


def _judgement_rows(batch: Batch) -> Iterator[dict[str, Any]]:
    rows = (
        Judgement.objects.filter(assignment__hit__batch=batch)
        .exclude(assignment__status=AssignmentStatus.ACCEPTED)
        .order_by("assignment__hit__index", "assignment_id", "item__position")
        .values_list(
            "item__image__ext_id",
            "item__caption__ext_id",
            "item__role",
            "level",
            "shortcomings",
            "wrong_concepts",
            "other_text",
            "elapsed_ms",
            "assignment__worker__source",
            "assignment__worker__external_id",
            "assignment__hit__index",
            "assignment_id",
            "assignment__status",
        )
    )
    for (
        image,
        caption,
        role,
        level,
        shortcomings,
        concepts,
        other,
        elapsed,
        source,
        worker,
        hit,
        assignment,
        status,
    ) in rows.iterator(chunk_size=5000):
        yield {
            "image_id": image,
            "caption_id": caption,
            "role": role,
            "level": level,
            "shortcomings": mask_to_shortcomings(shortcomings),
            "wrong_concepts": mask_to_wrong_concepts(concepts),
            "other_text": other,
            "elapsed_ms": elapsed,
            "worker": worker_pseudonym(f"{source}:{worker}"),
            "batch": batch.pk,
            "hit": hit,
            "assignment": assignment,
            "assignment_status": status,
        }
