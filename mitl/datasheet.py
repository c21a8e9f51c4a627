"""The datasheet of a release: a README.md that says what the release is and how to use it.

Pure Python: built from the release manifest (before its file list exists) and stats.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .curation.estimate import RECALL_TRUTH, recall_wording
from .qrels import GRADE_THRESHOLDS, TOP_GRADE, proxy_qrels_file
from .release_files import (
    I2T_FILE,
    JUDGEMENTS_FILE,
    MANIFEST_FILE,
    QRELS_I2T_FILE,
    QRELS_T2I_FILE,
    STATS_FILE,
    T2I_FILE,
    VERDICT_COLUMNS,
    VERDICTS_FILE,
)

_SOURCE_KINDS = {
    "original": "the dataset's own links (each caption with the image it was written for)",
    "human": "pairs the crowd judged positive in a batch of this platform",
    "imported": "a positive set imported from elsewhere (e.g. CxC, ECCV Caption)",
}


def datasheet_markdown(
    manifest: Mapping[str, Any],
    stats: Mapping[str, Any],
    *,
    extra_files: Sequence[str] = (),
) -> str:
    """Return the README.md of a release described by `manifest` and `stats`."""
    name, version = manifest["name"], manifest["version"]
    folder = f"{name}-v{version}"
    sections = [
        f"# {name} v{version}\n\n"
        f"Extended positive sets for image-caption retrieval on the dataset "
        f"`{manifest['dataset']}`, curated by machines and people in one loop (after ECCV "
        "Caption, Chun et al. 2022): retrieval models proposed candidate pairs for sampled "
        "queries, crowd workers judged them on four levels, and the judgements were "
        "aggregated into verdicts. The positives of a query are its original positives, "
        "the pairs judged positive in any batch this release covers (one verdict per pair "
        "from all their judgements), and any imported positive set, without invalid "
        "captions. Releases are immutable: a new curation is a new version, which keeps "
        "every earlier positive unless a later verdict overturns it.\n",
        _sources(manifest),
        _counts(stats),
        _completeness(stats),
        _provenance(manifest, stats),
        _files(extra_files, manifest),
        _qrels_scale(),
        _evaluate(folder),
        _invalid(manifest, stats),
        "## Licence\n\nThis release holds only ids, judgements and statistics. The images "
        f"and captions stay under the licence and terms of `{manifest['dataset']}` itself; "
        "check them before you redistribute anything.\n",
    ]
    return "\n".join(sections)


def _sources(manifest: Mapping[str, Any]) -> str:
    rows = [
        f"| `{s['name']}` | {s['source']}: {_SOURCE_KINDS.get(s['source'], '')} | {s['pairs']} |"
        for s in manifest.get("source_sets", [])
    ]
    batches = ", ".join(str(b) for b in manifest.get("batches", []))
    return (
        "## Sources\n\n"
        "| positive set | kind | pairs |\n|---|---|---|\n" + "\n".join(rows) + "\n\n"
        f"Batches: {batches}. Aggregation rule: `{manifest['rule']}` "
        f"({manifest.get('rule_description', '')}).\n"
    )


def _number(value: Any) -> str:
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else f"{value:.2f}"
    return str(value)


def _counts(stats: Mapping[str, Any]) -> str:
    lines = [
        "## Counts\n",
        "| direction | queries | original positives | extended positives | per query "
        "(original → extended) | factor |",
        "|---|---|---|---|---|---|",
    ]
    for direction, label in (("i2t", "image → captions"), ("t2i", "caption → images")):
        c = stats.get(direction)
        if not c:
            continue
        lines.append(
            f"| {label} | {c['queries']} | {c['positives_original']} | "
            f"{c['positives_extended']} | {_number(c['per_query_original'])} → "
            f"{_number(c['per_query_extended'])} | ×{_number(c['factor'])} |"
        )
    verdicts = stats.get("verdicts", {})
    lines.append(
        f"\nCandidates: {stats.get('candidates', 0)}; HITs: {stats.get('hits', 0)}; "
        f"judgements: {stats.get('judgements', 0)}; verdicts: "
        f"{verdicts.get('positive', 0)} positive, {verdicts.get('negative', 0)} negative.\n"
    )
    return "\n".join(lines)


def _completeness(stats: Mapping[str, Any]) -> str:
    """How many positives the release may still miss (adaptive batches' estimate)."""
    curation = stats.get("curation") or {}
    lines = ["## Completeness\n"]
    strategy = curation.get("strategy", "fixed")
    budget = curation.get("budget_judgements")
    spent = curation.get("judgements_spent")
    lines.append(
        f"Strategy: `{strategy}`"
        + (
            f" ({curation.get('adjudication')} adjudication)"
            if curation.get("adjudication")
            else ""
        )
        + f", {curation.get('rounds', 1)} round(s)"
        + (f", {spent} of {budget} judgements spent" if budget else "")
        + ".\n"
    )
    estimates = {
        d: v["estimate"] for d, v in curation.get("directions", {}).items() if v.get("estimate")
    }
    if not estimates:
        lines.append(_target_line(curation, {}))
        lines.append(
            "No estimate of the positives still missing: only the adaptive strategy spends a "
            "share of its judgements on the random sample it needs.\n"
        )
        return "\n".join(lines)
    lines += [
        "| direction | positives found | estimated still missing (95% interval) | "
        "estimated recall (95% interval) |",
        "|---|---|---|---|",
    ]
    for direction, e in sorted(estimates.items()):
        warning = recall_wording(recall_low=e["recall_low"], recall_high=e["recall_high"]).warning
        lines.append(
            f"| {direction} | {e['found']} | {e['unfound']:.0f} ({e['unfound_low']:.0f}–"
            f"{e['unfound_high']:.0f}) | {e['recall']:.3f} ({e['recall_low']:.3f}–"
            f"{e['recall_high']:.3f}){f': {warning}' if warning else ''} |"
        )
    lines.append(_target_line(curation, estimates))
    lines.append(
        f"\nEstimated recall: {RECALL_TRUTH}. Estimated from a stratified random sample of "
        "the pairs left unjudged, judged by the same crowd (inverse-probability weights).\n"
    )
    return "\n".join(lines)


def _target_line(curation: Mapping[str, Any], estimates: Mapping[str, Any]) -> str:
    """Say whether the rounds reached the curator's target recall (its lower bound)."""
    target = curation.get("target_recall")
    if not target:
        return ""
    lows = [e["recall_low"] for e in estimates.values()]
    if lows and min(lows) >= target:
        return f"Target recall {target:.2f}: reached (every lower 95% bound is at least it).\n"
    return (
        f"Target recall {target:.2f}: not reached; the rounds stopped first (budget spent, "
        "finished by an admin, or nothing left to choose).\n"
    )


DATASHEET_CHANGES = 50  # removed positives the datasheet lists; stats.json lists more


def _provenance(manifest: Mapping[str, Any], stats: Mapping[str, Any]) -> str:
    """Which batch found the crowd's positives, and what changed since the last version."""
    lines = ["## Provenance\n"]
    by_batch = stats.get("positives_by_batch") or {}
    if by_batch:
        lines.append(
            "Crowd positives by the batch that first chose the pair (one verdict per pair "
            f"from every covered batch's approved judgements, rule `{manifest['rule']}`): "
            + ", ".join(f"batch {batch}: {count}" for batch, count in by_batch.items())
            + ". `verdicts.csv` names every batch and round behind each verdict.\n"
        )
    changes = stats.get("changes")
    if not changes:
        lines.append("This is the first version of this release.\n")
        return "\n".join(lines)
    lines.append(
        f"Since version {changes['since_version']}: {changes['added']} positives added, "
        f"{changes['removed']} removed.\n"
    )
    removed = changes.get("removed_pairs", [])[:DATASHEET_CHANGES]
    if removed:
        lines += ["| direction | query | target | why removed |", "|---|---|---|---|"]
        lines += [
            f"| {r['direction']} | {r['query']} | {r['target']} | {r['reason']} |" for r in removed
        ]
        if changes["removed"] > len(removed):
            lines.append(f"\n… and {changes['removed'] - len(removed)} more (see stats.json).")
        lines.append("")
    return "\n".join(lines)


def _files(extra_files: Sequence[str], manifest: Mapping[str, Any]) -> str:
    columns = ",".join(VERDICT_COLUMNS)
    described = {
        I2T_FILE: '`{"<image id>": [caption ids]}` for every image query (ECCV Caption format).',
        T2I_FILE: '`{"<caption id>": [image ids]}` for every valid caption query.',
        JUDGEMENTS_FILE: "one JSON object per judgement: `image_id`, `caption_id`, `role` "
        "(task, golden_tp, golden_tn), `level` (yes, weak_yes, weak_no, no), `shortcomings`, "
        "`wrong_concepts`, `other_text`, `elapsed_ms`, `worker`, `batch`, `hit`, "
        "`assignment`, `assignment_status`. It keeps every judgement of the batch, including "
        "those on golden pairs, on work that was rejected, and on captions marked invalid.",
        VERDICTS_FILE: f"one row per judged pair, header `{columns}`; `score` is the graded "
        "relevance (mean of 1 / 0.5 / 0 / 0 over the answers, ECCV Caption eq. E.4), "
        "`confidence` the share of answers agreeing with the label (Dawid-Skene: the "
        "posterior probability of the label), `yes`…`no` the answer counts.",
        QRELS_I2T_FILE: "graded TREC qrels for image queries: `image_id 0 caption_id relevance`.",
        QRELS_T2I_FILE: "graded TREC qrels for caption queries: `caption_id 0 image_id relevance`.",
        **_proxy_qrels_files(manifest),
        STATS_FILE: "queries and positives per direction before and after curation; "
        "candidates, HITs, assignments, judgements, verdicts (the judgements and verdicts on "
        "invalid captions counted apart, in `judgements_on_invalid_captions` and "
        "`verdicts_on_invalid_captions`).",
        MANIFEST_FILE: "sources, batches, rule, counts, invalid captions and the sha256 "
        "checksum and size of every other file.",
    }
    lines = ["## Files\n"]
    lines += [f"- `{name}`: {text}" for name, text in described.items()]
    lines += [f"- `{name}`: an extra report." for name in extra_files if name not in described]
    lines.append(
        "\nThe zip of the release holds the same files; its checksum is published beside it "
        "(`<version>.zip.sha256`).\n"
    )
    return "\n".join(lines)


def _proxy_qrels_files(manifest: Mapping[str, Any]) -> dict[str, str]:
    relevance = manifest.get("relevance") or {}
    files = {}
    for proxy in relevance.get("proxies", []):
        for direction, kind in (("i2t", "image"), ("t2i", "caption")):
            files[proxy_qrels_file(proxy, direction)] = (
                f"graded TREC qrels of {kind} queries by the caption proxy `{proxy}` "
                f"({relevance.get('aggregation', 'mean')} over an image's captions): each "
                "query's 100 most relevant items, graded round(100 × relevance) "
                "(docs/relevance.md of the platform)."
            )
    return files


def _qrels_scale() -> str:
    (high, _), (middle, _) = GRADE_THRESHOLDS
    return (
        "## Relevance grades (qrels)\n\n"
        f"- {TOP_GRADE}: a known positive without a verdict (original or imported), or a "
        f"verdict score ≥ {high};\n"
        f"- 2: a released positive with {middle} ≤ score < {high};\n"
        f"- 1: a released positive with score < {middle};\n"
        "- 0: judged, and not a released positive.\n\n"
        "A grade of 1 or more marks exactly the positives of the ECCV-format files.\n"
    )


def _evaluate(folder: str) -> str:
    return (
        "## How to evaluate\n\n"
        "With the reference package (`pip install eccv-caption`):\n\n"
        "```python\n"
        "from eccv_caption import Metrics\n"
        "metrics = Metrics()\n"
        f'metrics.set_eccv_gts("{folder}/{I2T_FILE}", "{folder}/{T2I_FILE}")\n'
        "```\n\n"
        "With this platform: `python manage.py evaluate --release DIR --rankings FILE` "
        "(mAP@R, R-Precision, R@K, and nDCG from the `score` column of `verdicts.csv`). "
        f"With TREC tools: `trec_eval -m ndcg_cut.10 {QRELS_I2T_FILE} run.txt`.\n"
    )


def _invalid(manifest: Mapping[str, Any], stats: Mapping[str, Any]) -> str:
    invalid = manifest.get("invalid_captions", [])
    reasons: dict[str, int] = {}
    for entry in invalid:
        reasons[entry["reason"]] = reasons.get(entry["reason"], 0) + 1
    listed = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
    return (
        "## Invalid captions\n\n"
        'Original captions that people judged "100% NO" for their own image were reviewed '
        "by an admin (ECCV Caption Appendix C.1). Captions marked invalid (meaningless, or "
        "wrong for their own image) are left out as queries and as positives (and out of "
        "`verdicts.csv` and the qrels); `judgements.jsonl` keeps every raw answer. "
        f"This release leaves out {len(invalid)}"
        + (f" ({listed})" if listed else "")
        + "; `manifest.json` lists them with their reasons. The counts above leave out "
        f"the {stats.get('judgements_on_invalid_captions', 0)} judgements and "
        f"{stats.get('verdicts_on_invalid_captions', 0)} verdicts on them.\n"
    )
