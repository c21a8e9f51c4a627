"""Releasing: extended positive sets (original ∪ human ∪ imported, minus invalid captions).

`release_create` reads a batch into plain data (`mitl.release_bundle.ReleaseSources`),
builds the bundle with `mitl.release_bundle.release_bundle_build` and writes it atomically
(`mitl.release_files.write_release_dir`) with its database row.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
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
from mitl.config import BatchConfig, parse_relevance
from mitl.release_bundle import (
    InvalidCaption,
    JudgementRecord,
    ProxyQrels,
    ReleaseBundle,
    ReleaseSources,
    SourceSet,
    VerdictRecord,
    curation_summary,
    extra_files_check,
    release_bundle_build,
)
from mitl.release_files import bundle_checksum_path, bundle_path, write_release_dir
from mitl.relevance.images import Progress
from mitl.relevance.proxies import proxy_spec

from .aggregate import human_set_name
from .bias import bias_report_build
from .curation import REPORT_KEY as CURATION_REPORT
from .relevance import RELEASE_AGGREGATION, proxy_qrels_files


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
    try:
        extra_files_check(extra_files, proxies)
    except ValueError as error:
        raise ServiceError(str(error)) from None
    sources = release_sources_read(
        batch=batch,
        config=config,
        name=name,
        version=_next_version(name),
        set_names=[ORIGINAL_SET, human_set_name(batch), *imported],
        proxies=proxies,
        extra_files=extra_files,
        progress=progress,
    )
    final_dir = settings.RELEASES_DIR / name / str(sources.version)
    manifest = _bundle_write(release_bundle_build(sources), final_dir)
    try:
        with transaction.atomic():
            release = Release.objects.create(
                dataset=batch.dataset,
                name=name,
                version=sources.version,
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


def release_sources_read(
    *,
    batch: Batch,
    config: BatchConfig,
    name: str,
    version: int,
    set_names: Sequence[str],
    proxies: Sequence[str],
    extra_files: Mapping[str, str],
    progress: Progress | None = None,
) -> ReleaseSources:
    """Read what a release of the batch is built from, as plain data.

    That is the named positive sets' valid pairs, the batch's queries, work, verdicts,
    judgements (a stream, read while the release is written) and reports, and the
    proxies' graded qrels, computed here (`progress`).
    """
    image_queries, caption_queries = _query_ext_ids(batch)
    return ReleaseSources(
        name=name,
        version=version,
        dataset=batch.dataset.name,
        rule=config.aggregation,
        rules={batch.pk: config.aggregation},
        source_sets=_source_sets(batch, set_names),
        image_queries=image_queries,
        caption_queries=caption_queries,
        original_pairs=_pairs(batch, [ORIGINAL_SET]),
        extended_pairs=_pairs(batch, set_names),
        work=_work_stats(batch),
        curation=curation_summary(
            config=config, report=batch.reports.get(CURATION_REPORT, {}), rounds=batch.round + 1
        ),
        verdicts=_verdict_records(batch),
        judgements=_judgement_records(batch),
        invalid_captions=_invalid_captions(batch),
        pseudonym_key=settings.SECRET_KEY,
        diversity=batch.reports.get("diversity"),
        bias=_bias_report(batch),
        relevance=_proxy_qrels(batch, proxies, image_queries, caption_queries, progress),
        extra_files=extra_files,
    )


def _bundle_write(bundle: ReleaseBundle, final_dir: Path) -> dict[str, Any]:
    """Write the bundle into `final_dir` and its zip; return the manifest with its files."""
    return write_release_dir(
        final_dir,
        i2t=bundle.i2t,
        t2i=bundle.t2i,
        judgements=bundle.judgements,
        stats=bundle.stats,
        reports=bundle.reports,
        verdicts=bundle.verdicts,
        text_files=bundle.text_files,
        bundle_root=bundle.root,
        manifest=bundle.manifest,
    )


def _proxy_qrels(
    batch: Batch,
    proxies: Sequence[str],
    image_queries: Sequence[int],
    caption_queries: Sequence[int],
    progress: Progress | None,
) -> ProxyQrels | None:
    """Compute the proxies' graded qrels of the release's queries (each query once, sorted)."""
    if not proxies:
        return None
    files = proxy_qrels_files(
        batch.dataset, proxies, sorted(set(image_queries)), sorted(set(caption_queries)), progress
    )
    return ProxyQrels(
        aggregation=RELEASE_AGGREGATION,
        versions={proxy: proxy_spec(proxy).version for proxy in proxies},
        files=files,
    )


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


def _source_sets(batch: Batch, names: Sequence[str]) -> list[SourceSet]:
    """Describe each source set: its kind and how many valid pairs it holds."""
    sets = {
        s.name: s for s in PositiveSet.objects.filter(dataset_id=batch.dataset_id, name__in=names)
    }
    described = []
    for set_name in names:
        positive_set = sets.get(set_name)
        if positive_set is None:  # the batch's human set before its aggregation stored it
            described.append(SourceSet(set_name, PositiveSource.HUMAN.value, "", 0))
            continue
        pairs = positive_set.pairs.filter(caption__is_invalid=False).count()
        described.append(SourceSet(set_name, positive_set.source, positive_set.description, pairs))
    return described


def _invalid_captions(batch: Batch) -> list[InvalidCaption]:
    return [
        InvalidCaption(caption_id=ext_id, image_id=image_ext_id, reason=reason, marked_at=marked_at)
        for ext_id, image_ext_id, reason, marked_at in batch.dataset.captions.filter(
            is_invalid=True
        )
        .order_by("ext_id")
        .values_list("ext_id", "image__ext_id", "invalid_reason", "invalid_marked_at")
    ]


def _verdict_records(batch: Batch) -> list[VerdictRecord]:
    """Return every verdict of the batch on a valid caption, by pair."""
    return [
        VerdictRecord(*row)
        for row in Verdict.objects.filter(
            candidate__batch=batch, candidate__caption__is_invalid=False
        )
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
    ]


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


def _pairs(batch: Batch, set_names: Sequence[str]) -> set[tuple[int, int]]:
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


def _judgement_records(batch: Batch) -> Iterator[JudgementRecord]:
    """Stream every raw answer of the batch but those of accepted (not yet submitted) work."""
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
    for *answer, source, worker, hit, assignment, status in rows.iterator(chunk_size=5000):
        yield JudgementRecord(
            *answer,
            worker=f"{source}:{worker}",
            batch=batch.pk,
            hit=hit,
            assignment=assignment,
            assignment_status=status,
        )
