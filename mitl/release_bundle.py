"""A release's bundle from plain data: every file's content, its manifest and its statistics.

Pure Python, no database: `pipeline.release` reads the batch into `ReleaseSources` (ids,
counts, records, reports as dicts) and writes the `ReleaseBundle` that `release_bundle_build`
returns with `mitl.release_files.write_release_dir`, which adds the file list and the zip.
What a release holds is decided here; where its inputs come from is the reader's business.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .aggregation import RULE_DESCRIPTIONS
from .bias_html import render_bias_html
from .config import BatchConfig
from .datasheet import datasheet_markdown
from .judgements import Level, mask_to_shortcomings, mask_to_wrong_concepts
from .qrels import proxy_qrels_file, qrels_text
from .release_files import (
    BIAS_HTML_FILE,
    BIAS_JSON_FILE,
    DATASHEET_FILE,
    DIVERSITY_FILE,
    QRELS_I2T_FILE,
    QRELS_T2I_FILE,
    PositivesByQuery,
    positive_counts,
    positives_by_query,
)

RELEASE_FORMAT = "ECCV Caption (image_to_caption.json, caption_to_image.json)"
# Files a release generates besides write_release_dir's standard ones (and the proxy qrels).
GENERATED_FILES = frozenset(
    {QRELS_I2T_FILE, QRELS_T2I_FILE, DATASHEET_FILE, DIVERSITY_FILE, BIAS_HTML_FILE, BIAS_JSON_FILE}
)
DIRECTIONS = ("i2t", "t2i")

Pair = tuple[int, int]  # (image id, caption id), the dataset's external ids


@dataclass(frozen=True)
class SourceSet:
    """A positive set the release merges: its kind and how many valid pairs it holds."""

    name: str
    source: str  # original, human or imported
    description: str
    pairs: int


@dataclass(frozen=True)
class InvalidCaption:
    """A caption marked invalid: left out of the queries, positives, verdicts and qrels."""

    caption_id: int
    image_id: int
    reason: str
    marked_at: datetime | None


@dataclass(frozen=True)
class VerdictRecord:
    """A verdict on a pair with a valid caption, as the aggregation stored it."""

    image_id: int
    caption_id: int
    rule: str
    is_positive: bool
    score: float
    confidence: float
    n_judgements: int
    distribution: Mapping[str, int]  # answers per level
    stages: Sequence[tuple[int, int]] = ()  # (batch, round) of every choice of the pair


@dataclass(frozen=True)
class JudgementRecord:
    """One raw answer of a batch, any caption, before the worker is pseudonymised."""

    image_id: int
    caption_id: int
    role: str
    level: str
    shortcomings: int  # bit mask
    wrong_concepts: int  # bit mask
    other_text: str
    elapsed_ms: int | None
    worker: str  # "<source>:<external id>"
    batch: int
    hit: int
    assignment: int
    assignment_status: str
    round: int = 0  # the round of the batch whose HIT showed the pair


@dataclass(frozen=True)
class ProxyQrels:
    """The caption proxies' graded qrels files (name -> text) and what made them.

    The reader renders the files (`mitl.qrels.proxy_qrels_text`) one proxy at a time, so
    only one proxy's relevance matrices are ever held in memory.
    """

    aggregation: str
    versions: Mapping[str, int | str]  # proxy -> version (calibrated: the model's), in order
    files: Mapping[str, str]


@dataclass(frozen=True)
class ReleaseSources:
    """Everything a release is built from, read from the database as plain data."""

    name: str
    version: int
    dataset: str
    rule: str
    rules: Mapping[int, str]  # batch id -> its aggregation rule, in batch order
    source_sets: Sequence[SourceSet]
    image_queries: Sequence[int]
    caption_queries: Sequence[int]  # valid captions only
    original_pairs: AbstractSet[Pair]
    extended_pairs: AbstractSet[Pair]
    work: Mapping[str, Any]  # counts of candidates, HITs, assignments, judgements, verdicts
    curation: Mapping[str, Any]  # `curation_summary`
    verdicts: Sequence[VerdictRecord]
    judgements: Iterable[JudgementRecord]  # may be a stream: read once, while writing
    invalid_captions: Sequence[InvalidCaption]
    pseudonym_key: str
    diversity: Mapping[str, Any] | None = None
    bias: Mapping[str, Any] | None = None
    relevance: ProxyQrels | None = None
    extra_files: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ReleaseBundle:
    """The content of every file of a release, as `write_release_dir` takes it."""

    i2t: PositivesByQuery
    t2i: PositivesByQuery
    judgements: Iterator[dict[str, Any]]
    verdicts: list[dict[str, Any]]
    stats: dict[str, Any]
    manifest: dict[str, Any]  # without its file list, which the writer adds
    reports: dict[str, Any]  # JSON files
    text_files: dict[str, str]
    root: str  # the folder inside the zip


def generated_file_names(proxies: Iterable[str]) -> frozenset[str]:
    """Return the names of the files a release generates, the proxies' qrels included."""
    proxy_files = {proxy_qrels_file(p, d) for p in proxies for d in DIRECTIONS}
    return GENERATED_FILES | proxy_files


def extra_files_check(extra_files: Iterable[str], proxies: Iterable[str]) -> None:
    """Refuse an extra file that would replace a generated one (ValueError)."""
    clashing = sorted(set(extra_files) & generated_file_names(proxies))
    if clashing:
        raise ValueError(f"extra release file {clashing[0]!r} would replace a generated file")


def worker_pseudonym(worker: str, *, key: str) -> str:
    """Return a stable, non-reversible name for a worker in published files.

    Releases are shared: MTurk WorkerIds link to people's Amazon profiles, and login names
    help password guessing. The same worker keeps one pseudonym across releases signed
    with the same `key` (the installation's SECRET_KEY), so per-worker analyses still work.
    """
    digest = hmac.new(key.encode(), worker.encode(), hashlib.sha256)
    return f"w-{digest.hexdigest()[:16]}"


def curation_summary(
    *, config: BatchConfig, report: Mapping[str, Any], rounds: int
) -> dict[str, Any]:
    """Return strategy, rounds, budget and estimated recall per direction (docs/curation.md).

    `report` is the batch's curation report (empty for a fixed batch).
    """
    return {
        "strategy": config.strategy,
        "adjudication": config.adjudication if config.adaptive else None,
        "rounds": rounds,
        "budget_judgements": config.budget_judgements or None,
        "target_recall": config.target_recall or None,
        "judgements_spent": report.get("judgements_spent"),
        "directions": {
            direction: {"found": values["found"], "estimate": values["estimate"]}
            for direction, values in report.get("directions", {}).items()
        },
    }


def release_bundle_build(sources: ReleaseSources) -> ReleaseBundle:
    """Build every file of the release that `sources` describe (refusing clashing extras)."""
    proxies = list(sources.relevance.versions) if sources.relevance else []
    extra_files_check(sources.extra_files, proxies)
    queries = {"image_queries": sources.image_queries, "caption_queries": sources.caption_queries}
    i2t_before, t2i_before = positives_by_query(sources.original_pairs, **queries)
    i2t, t2i = positives_by_query(sources.extended_pairs, **queries)
    stats = {
        "i2t": positive_counts(i2t_before, i2t),
        "t2i": positive_counts(t2i_before, t2i),
        **sources.work,
        "curation": dict(sources.curation),
    }
    verdicts = [verdict_row(record) for record in sources.verdicts]
    scores = {(row["image_id"], row["caption_id"]): row["score"] for row in verdicts}
    manifest = release_manifest(sources, stats)
    extra_files = dict(sources.extra_files)
    reports = _json_reports(sources)
    if sources.bias is not None:
        extra_files[BIAS_HTML_FILE] = render_bias_html(sources.bias, standalone=True)
    text_files = {
        QRELS_I2T_FILE: qrels_text(i2t, scores, direction="i2t"),
        QRELS_T2I_FILE: qrels_text(t2i, scores, direction="t2i"),
        **(sources.relevance.files if sources.relevance else {}),
        **extra_files,
        DATASHEET_FILE: datasheet_markdown(manifest, stats, extra_files=sorted(extra_files)),
    }
    key = sources.pseudonym_key
    return ReleaseBundle(
        i2t=i2t,
        t2i=t2i,
        judgements=(judgement_row(record, key=key) for record in sources.judgements),
        verdicts=verdicts,
        stats=stats,
        manifest=manifest,
        reports=reports,
        text_files=text_files,
        root=f"{sources.name}-v{sources.version}",
    )


def release_manifest(sources: ReleaseSources, stats: Mapping[str, Any]) -> dict[str, Any]:
    """Return the manifest of a release, before `write_release_dir` adds its file list."""
    manifest: dict[str, Any] = {
        "name": sources.name,
        "version": sources.version,
        "dataset": sources.dataset,
        "batches": list(sources.rules),
        "sources": [source_set.name for source_set in sources.source_sets],
        "source_sets": [_source_set_entry(source_set) for source_set in sources.source_sets],
        "rule": sources.rule,
        "rules": {str(batch): rule for batch, rule in sources.rules.items()},
        "rule_description": RULE_DESCRIPTIONS[sources.rule],
        "counts": _finite(
            {
                "i2t": stats["i2t"],
                "t2i": stats["t2i"],
                "pairs_original": len(sources.original_pairs),
                "pairs_extended": len(sources.extended_pairs),
                "verdicts": stats["verdicts"],
                "judgements": stats["judgements"],
                "judgements_on_invalid_captions": stats["judgements_on_invalid_captions"],
            }
        ),
        "format": RELEASE_FORMAT,
        "invalid_captions_excluded": [entry.caption_id for entry in sources.invalid_captions],
        "invalid_captions": [_invalid_entry(entry) for entry in sources.invalid_captions],
    }
    if sources.relevance and sources.relevance.versions:
        manifest["relevance"] = {
            "proxies": list(sources.relevance.versions),
            "aggregation": sources.relevance.aggregation,
            "versions": dict(sources.relevance.versions),
        }
    return manifest


def verdict_row(record: VerdictRecord) -> dict[str, Any]:
    """Return a row of verdicts.csv (`mitl.release_files.VERDICT_COLUMNS`)."""
    return {
        "image_id": record.image_id,
        "caption_id": record.caption_id,
        "rule": record.rule,
        "is_positive": int(record.is_positive),
        "score": round(record.score, 6),
        "confidence": round(record.confidence, 6),
        "n_judgements": record.n_judgements,
        **{level.value: record.distribution.get(level.value, 0) for level in Level},
        "batches": " ".join(str(b) for b in dict.fromkeys(b for b, _ in record.stages)),
        "rounds": " ".join(f"{b}:{r}" for b, r in record.stages),
    }


def judgement_row(record: JudgementRecord, *, key: str) -> dict[str, Any]:
    """Return a line of judgements.jsonl: the answer's names spelled out, its worker hidden."""
    return {
        "image_id": record.image_id,
        "caption_id": record.caption_id,
        "role": record.role,
        "level": record.level,
        "shortcomings": mask_to_shortcomings(record.shortcomings),
        "wrong_concepts": mask_to_wrong_concepts(record.wrong_concepts),
        "other_text": record.other_text,
        "elapsed_ms": record.elapsed_ms,
        "worker": worker_pseudonym(record.worker, key=key),
        "batch": record.batch,
        "round": record.round,
        "hit": record.hit,
        "assignment": record.assignment,
        "assignment_status": record.assignment_status,
    }


def _json_reports(sources: ReleaseSources) -> dict[str, Any]:
    """Return the JSON reports a release carries: the annotators' diversity, the model bias."""
    reports: dict[str, Any] = {}
    if sources.diversity is not None:
        reports[DIVERSITY_FILE] = sources.diversity
    if sources.bias is not None:
        reports[BIAS_JSON_FILE] = sources.bias
    return reports


def _source_set_entry(source_set: SourceSet) -> dict[str, Any]:
    return {
        "name": source_set.name,
        "source": source_set.source,
        "description": source_set.description,
        "pairs": source_set.pairs,
    }


def _invalid_entry(entry: InvalidCaption) -> dict[str, Any]:
    return {
        "caption_id": entry.caption_id,
        "image_id": entry.image_id,
        "reason": entry.reason,
        "marked_at": entry.marked_at.isoformat() if entry.marked_at else None,
    }


def _finite(value: Any) -> Any:
    """Replace NaN by None: JSON columns (PostgreSQL jsonb) refuse NaN."""
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
