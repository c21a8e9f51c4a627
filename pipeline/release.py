"""Releasing: extended positive sets (original ∪ human ∪ imported, minus invalid captions).

`release_create` reads what a release covers (`pipeline.release_scope`: by default every
released batch of the dataset) into plain data (`mitl.release_bundle.ReleaseSources`),
builds the bundle with `mitl.release_bundle.release_bundle_build` and writes it atomically
(`mitl.release_files.write_release_dir`) with its database row.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from annotation.errors import ServiceError
from annotation.models import (
    ORIGINAL_SET,
    Batch,
    PositivePair,
    PositiveSet,
    PositiveSource,
    Release,
)
from mitl.config import BatchConfig, batch_config, parse_relevance
from mitl.release_bundle import (
    InvalidCaption,
    ProxyQrels,
    ReleaseBundle,
    ReleaseSources,
    SourceSet,
    curation_summary,
    extra_files_check,
    release_bundle_build,
)
from mitl.release_files import (
    bundle_checksum_path,
    bundle_path,
    positives_by_query,
    write_release_dir,
)
from mitl.relevance.calibrated import CALIBRATED
from mitl.relevance.images import Progress
from mitl.relevance.proxies import proxy_spec

from .bias import bias_report_build
from .calibrated_relevance import calibrated_model
from .curation import REPORT_KEY as CURATION_REPORT
from .release_scope import (
    ReleaseScope,
    human_positives,
    judgement_records,
    positives_by_batch,
    release_changes,
    release_estimates,
    release_scope,
    verdict_records,
    work_stats,
)
from .relevance import RELEASE_AGGREGATION, proxy_qrels_files

# The source set a release lists for the crowd's positives (the cumulative truth).
HUMAN_SOURCE = "human"


def release_create(
    *,
    batch: Batch,
    config: BatchConfig,
    name: str | None = None,
    include_sets: Sequence[str] = (),
    extra_files: Mapping[str, str] | None = None,
    relevance: Sequence[str] | None = None,
    only_batch: bool = False,
    progress: Progress | None = None,
) -> Release:
    """Write a new version of release `name` (default: the dataset's name) for the batch.

    The release covers every released batch of the dataset and this one (`only_batch`:
    this one alone, for studies): the union of their queries, whose positives are the
    original set ∪ every pair the dataset's cumulative truth holds positive
    (`pipeline.release_scope`) ∪ each imported set named in `include_sets`, without invalid
    captions. `extra_files` maps further file names (e.g. "bias_report.html") to their
    text; they join the release and its zip. `relevance` (default: the config's) names
    caption proxies whose graded qrels the release carries (qrels_<proxy>_i2t.txt,
    qrels_<proxy>_t2i.txt); their matrices are computed in blocks (`progress`) and cached
    for the leaderboard's graded metrics.
    """
    name = name or batch.dataset.name
    imported = _imported_sets(batch, include_sets)
    extra_files = dict(extra_files or {})
    proxies = list(config.relevance if relevance is None else parse_relevance(relevance))
    try:
        extra_files_check(extra_files, proxies)
    except ValueError as error:
        raise ServiceError(str(error)) from None
    scope = release_scope(batch=batch, config=config, only_batch=only_batch)
    sources = release_sources_read(
        batch=batch,
        config=config,
        scope=scope,
        name=name,
        version=_next_version(name),
        set_names=[ORIGINAL_SET, *imported],
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
            release.batches.add(*scope.batch_ids)
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
    scope: ReleaseScope,
    name: str,
    version: int,
    set_names: Sequence[str],
    proxies: Sequence[str],
    extra_files: Mapping[str, str],
    progress: Progress | None = None,
) -> ReleaseSources:
    """Read what a release is built from, as plain data.

    That is the named positive sets' valid pairs and the cumulative truth's positives on
    the scope's queries, the covered batches' work, verdicts, judgements (a stream, read
    while the release is written), the batch's reports, and the proxies' graded qrels,
    computed here (`progress`).
    """
    image_queries, caption_queries = scope.image_queries, scope.caption_queries
    human = human_positives(scope)
    extended = _pairs(batch, set_names) | human
    shipped = _on_queries(extended, image_queries, caption_queries)
    curation = curation_summary(
        config=config, report=batch.reports.get(CURATION_REPORT, {}), rounds=batch.round + 1
    )
    curation["directions"] = release_estimates(scope, shipped)
    i2t, t2i = positives_by_query(
        extended, image_queries=image_queries, caption_queries=caption_queries
    )
    work = {
        **work_stats(scope.batch_ids, scope),
        "positives_by_batch": positives_by_batch(scope, shipped),
        "changes": release_changes(name=name, scope=scope, i2t=i2t, t2i=t2i),
    }
    return ReleaseSources(
        name=name,
        version=version,
        dataset=batch.dataset.name,
        rule=config.aggregation,
        rules=_batch_rules(scope.batch_ids),
        source_sets=_with_human_source(_source_sets(batch, set_names), scope, config, len(human)),
        image_queries=image_queries,
        caption_queries=caption_queries,
        original_pairs=_pairs(batch, [ORIGINAL_SET]),
        extended_pairs=extended,
        work=work,
        curation=curation,
        verdicts=verdict_records(scope),
        judgements=judgement_records(scope.batch_ids),
        invalid_captions=_invalid_captions(batch),
        pseudonym_key=settings.SECRET_KEY,
        diversity=batch.reports.get("diversity"),
        bias=_bias_report(batch),
        relevance=_proxy_qrels(batch, proxies, image_queries, caption_queries, progress),
        extra_files=extra_files,
    )


def _on_queries(
    pairs: set[tuple[int, int]], image_queries: Sequence[int], caption_queries: Sequence[int]
) -> set[tuple[int, int]]:
    """The pairs a release ships: those of its image or caption queries."""
    images, captions = set(image_queries), set(caption_queries)
    return {pair for pair in pairs if pair[0] in images or pair[1] in captions}


def _with_human_source(
    sets: Sequence[SourceSet], scope: ReleaseScope, config: BatchConfig, human_pairs: int
) -> list[SourceSet]:
    """The source sets with the crowd's cumulative positives after the original set."""
    batches = ", ".join(str(pk) for pk in scope.batch_ids)
    human = SourceSet(
        HUMAN_SOURCE,
        PositiveSource.HUMAN.value,
        f"Pairs judged positive in batch(es) {batches}: one verdict per pair from all their "
        f"approved judgements ({config.aggregation} rule).",
        human_pairs,
    )
    return [sets[0], human, *sets[1:]]


def _batch_rules(batch_ids: Sequence[int]) -> dict[int, str]:
    """Each covered batch's own aggregation rule, in batch order."""
    return {
        batch.pk: batch_config(batch).aggregation
        for batch in Batch.objects.filter(pk__in=list(batch_ids)).order_by("pk")
    }


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
    """Compute the proxies' graded qrels of the release's queries (each query once, sorted);
    `calibrated` is the dataset's newest stored model, recorded by its version."""
    if not proxies:
        return None
    calibrated = None
    if CALIBRATED in proxies:
        try:
            calibrated = calibrated_model(batch.dataset)
        except RuntimeError as exc:
            raise ServiceError(f"relevance {CALIBRATED}: {exc}") from None
    files = proxy_qrels_files(
        batch.dataset,
        proxies,
        sorted(set(image_queries)),
        sorted(set(caption_queries)),
        progress,
        calibrated=calibrated,
    )
    versions: dict[str, int | str] = {
        proxy: calibrated.version
        if calibrated and proxy == CALIBRATED
        else proxy_spec(proxy).version
        for proxy in proxies
    }
    return ProxyQrels(aggregation=RELEASE_AGGREGATION, versions=versions, files=files)


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


def _pairs(batch: Batch, set_names: Sequence[str]) -> set[tuple[int, int]]:
    return set(
        PositivePair.objects.filter(
            positive_set__dataset_id=batch.dataset_id,
            positive_set__name__in=set_names,
            caption__is_invalid=False,
        ).values_list("image__ext_id", "caption__ext_id")
    )
