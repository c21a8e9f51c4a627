"""Render an `explain` report (`pipeline.explain_report`) as HTML with inline SVG charts.

`render_report` writes one self-contained page (inline CSS, SVG charts, images as data: URIs
or linked; no script). `render_explanation` is the fragment for one model's {i2t, t2i}
explanation that the page and the leaderboard's Explain view share; its styles are
`EXPLAIN_CSS`. Every text from the report is escaped. Pure Python: no Django import.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any
from urllib.parse import urlsplit

from mitl.bias_charts import DIRECTION_TITLES
from mitl.explain.charts import HISTOGRAM_METRICS, has_values, histograms_svg
from mitl.explain.failures import METRICS
from mitl.explain.html_models import (
    DIGITS,
    NAMES,
    better_arrow,
    number,
    percent,
    render_adversarial,
    render_crowd,
    table,
    text,
)

EXPLAIN_CSS = """
.explain-report table { border-collapse: collapse; margin: .5rem 0 1.2rem; }
.explain-report th, .explain-report td { text-align: left; padding: .25rem .5rem;
  border-bottom: 1px solid #d0d0d0; vertical-align: top; }
.explain-report .num { text-align: right; font-variant-numeric: tabular-nums; }
.explain-report .note, .explain-report figcaption { color: #555; font-size: .9rem; }
.explain-report figure { margin: .8rem 0; }
.explain-report figure svg { max-width: 100%; height: auto; }
.explain-report .table-wrap { overflow-x: auto; }
.explain-report .columns { display: flex; flex-wrap: wrap; gap: 2rem; }
.explain-report .failure { border: 1px solid #ccc; border-radius: 6px; padding: .6rem .8rem;
  margin: .8rem 0; }
.explain-report .pair { display: flex; flex-wrap: wrap; gap: 1rem; }
.explain-report .pair figure { flex: 1 1 16rem; margin: 0; }
.explain-report .pair img { max-width: 100%; max-height: 16rem; display: block; }
.explain-report .caption-text { background: #f3f3f3; padding: .6rem; font-style: italic; }
.explain-report .truth figcaption { color: #146c2e; font-weight: 600; }
.explain-report .retrieved figcaption { color: #b3261e; font-weight: 600; }
.explain-report dl.diff { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
.explain-report dl.diff dt { font-weight: 600; }
.explain-report dl.diff dd { margin: 0; }
.explain-report tr.blind td, .explain-report td.blind { background: #fde2e1; }
.explain-report td.num { white-space: nowrap; }
.explain-report .badge { background: #b3261e; color: #fff; border-radius: 3px;
  padding: 0 .3rem; font-size: .8rem; }
"""
PAGE_CSS = (
    "body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; "
    "padding: 0 1rem; color: #1a1a1a; }"
)
MEANINGS = {
    "ca": "share of the ground truth's concepts the retrieved image has",
    "ncs": "WordNet path similarity of the concepts only one image has, best matched",
    "ce": "difference in counts of the common concepts",
    "sd": "mean relative box-area difference of matched objects, summed over concepts",
    "sd_rate": "share of matched object pairs whose sizes disagree",
    "aa": "share of the ground truth's attributes (colour, size) its common concepts keep "
    "(not in the paper)",
}
EXAMPLES_SHOWN = 2

# --- one model's explanation ----------------------------------------------------------------


def render_explanation(
    explanation: Mapping[str, Any],
    images: Mapping[str, Any],
    *,
    title: str,
    anchor: str = "explain",
) -> str:
    """Return one model's {i2t, t2i} explanation as a `<section class="explain-report">`."""
    parts = [f'<section class="explain-report" id="{text(anchor)}">', f"<h2>{text(title)}</h2>"]
    directions = [d for d in ("t2i", "i2t") if explanation.get(d)]
    if not directions:
        parts.append("<p>No direction was explained.</p>")
    for direction in directions:
        parts.append(_direction(direction, explanation[direction], images, f"{anchor}-{direction}"))
    parts.append("</section>")
    return "\n".join(parts)


def _direction(
    direction: str, result: Mapping[str, Any], images: Mapping[str, Any], anchor: str
) -> str:
    agnostic, informed = result["agnostic"], result.get("informed")
    failures = result["failures"]
    parts = [
        f'<section class="explain-direction" id="{text(anchor)}">',
        f"<h3>{text(DIRECTION_TITLES.get(direction, direction))}</h3>",
        f"<p>{text(failures)} failure{'' if failures == 1 else 's'} (top-1 not a positive) among "
        f"{text(result['queries'])} "
        f"queries: failure rate {percent(result.get('failure_rate'))}; {text(result['explained'])} "
        "explained (both images have concepts). Ground-truth objects found in the retrieved "
        f"image: {text(agnostic['object_hit'])} hit, {text(agnostic['object_miss'])} missed "
        f"(matched share {percent(agnostic.get('matched_share'))}; count disagreement "
        f"{percent(agnostic.get('enumeration_disagreement'))}).</p>",
        _metrics_table(agnostic, informed),
    ]
    if any(has_values(agnostic, m) for m in HISTOGRAM_METRICS):
        svg = histograms_svg({"agnostic": agnostic, "informed": informed})
        parts.append(
            f"<figure>{svg}<figcaption>Failures per value of CA, NCS and CE "
            "(query-agnostic and, where computed, query-informed).</figcaption></figure>"
        )
    parts.append(_confusions(result.get("confusions") or {}))
    worst = result.get("worst") or []
    if worst:
        shown = "The worst failure" if len(worst) == 1 else f"The {len(worst)} worst failures"
        parts.append(f"<h4>{shown} (lowest CA, then NCS, highest CE)</h4>")
        parts += [_failure_card(failure, images) for failure in worst]
    parts.append("</section>")
    return "\n".join(parts)


def _metrics_table(agnostic: Mapping[str, Any], informed: Mapping[str, Any] | None) -> str:
    rows = []
    # An explanation stored before a metric existed lacks it: that row is left out.
    for metric in (m for m in METRICS if m in agnostic["means"]):
        digits = DIGITS[metric]
        cells = [
            f'<td class="num">{number(agnostic["means"][metric], digits)}</td>'
            f'<td class="num">{text(agnostic["defined"][metric])}</td>'
        ]
        if informed:
            cells.append(
                f'<td class="num">{number(informed["means"].get(metric), digits)}</td>'
                f'<td class="num">{text(informed["defined"].get(metric, "—"))}</td>'
            )
        else:
            cells.append('<td class="num">—</td><td class="num">—</td>')
        rows.append(
            f"<tr><th>{NAMES[metric]} {better_arrow(metric)}</th>{''.join(cells)}"
            f'<td class="note">{text(MEANINGS[metric])}</td></tr>'
        )
    head = [
        "<th>Metric (better)</th>",
        '<th class="num">Query-agnostic mean</th>',
        '<th class="num">over failures</th>',
        '<th class="num">Query-informed mean</th>',
        '<th class="num">over failures</th>',
        "<th>Meaning</th>",
    ]
    html = table(head, rows, cls="metrics")
    if informed is None:
        html += (
            '<p class="note">Query-informed metrics need WordNet to read which concepts the '
            "query mentions; they were not computed.</p>"
        )
    return html


def _confusions(confusions: Mapping[str, Any]) -> str:
    missed = confusions.get("missed") or []
    swapped = confusions.get("swapped") or []
    if not missed and not swapped:
        return '<p class="note">No concept was missed or swapped.</p>'
    missed_rows = (
        f'<tr><td>{text(row["concept"])}</td><td class="num">{text(row["failures"])}</td></tr>'
        for row in missed
    )
    swapped_rows = (
        f"<tr><td>{text(row['truth'])} → {text(row['retrieved'])}</td>"
        f'<td class="num">{text(row["failures"])}</td></tr>'
        for row in swapped
    )
    return (
        '<div class="columns confusions"><div><h4>Most missed concepts</h4>'
        + table(["<th>In the ground truth only</th>", '<th class="num">Failures</th>'], missed_rows)
        + "</div><div><h4>Most frequent swaps</h4>"
        + table(["<th>Truth → retrieved</th>", '<th class="num">Failures</th>'], swapped_rows)
        + "</div></div>"
    )


def _failure_card(failure: Mapping[str, Any], images: Mapping[str, Any]) -> str:
    rank = failure.get("truth_rank")
    where = "not ranked" if rank is None else f"first positive at rank {rank}"
    if failure["direction"] == "t2i":
        heading = f"Caption {failure['query']} → image {failure['retrieved']} ({where})"
    else:
        heading = (
            f"Image {failure['query']} → caption {failure['retrieved']} of image "
            f"{failure['retrieved_image']} ({where})"
        )
    truth, retrieved = failure["truth_image"], failure["retrieved_image"]
    parts = [
        f'<article class="failure" data-query="{text(failure["query"])}">',
        f"<h5>{text(heading)}</h5>",
        '<div class="pair">',
        _image_figure(truth, images, "truth", "Ground truth"),
        _image_figure(retrieved, images, "retrieved", "Retrieved first"),
        "</div>",
        _differences(failure["agnostic"], "Query-agnostic"),
    ]
    if failure.get("informed"):
        parts.append(_differences(failure["informed"], "Query-informed"))
    parts.append("</article>")
    return "\n".join(parts)


def _safe_src(src: object) -> str | None:
    """Return a URL an <img> may load (http(s), relative, data:image/), else None."""
    if not isinstance(src, str) or not src.strip():
        return None
    if src.lower().startswith("data:image/"):
        return src
    return src if urlsplit(src).scheme in ("", "http", "https") else None


def _image_figure(image_id: int, images: Mapping[str, Any], cls: str, label: str) -> str:
    detail = images.get(str(image_id)) or {}
    caption = str(detail.get("caption") or "")
    src = _safe_src(detail.get("src"))
    if src is not None:
        alt = text(caption or f"image {image_id}")
        visual = f'<img src="{escape(src, quote=True)}" alt="{alt}" loading="lazy">'
    else:
        visual = (
            f'<p class="caption-text">{text(caption) if caption else "(no image, no caption)"}</p>'
        )
    concepts = detail.get("concepts") or {}
    listed = ", ".join(
        text(name) if count == 1 else f"{text(name)} ×{text(count)}"
        for name, count in concepts.items()
    )
    return (
        f'<figure class="{cls}"><figcaption>{text(label)} · image {text(image_id)}</figcaption>'
        f'{visual}<p class="concepts">Concepts: {listed or "none known"}</p></figure>'
    )


def _differences(metrics: Mapping[str, Any], label: str) -> str:
    figures = " · ".join(f"{NAMES[m]} {number(metrics.get(m), DIGITS[m])}" for m in METRICS)
    pairs = ", ".join(
        f"{text(p['truth'])} → {text(p['retrieved'])} ({p['weight']:.2f})"
        for p in metrics.get("ncs_pairs") or []
    )
    counts = ", ".join(
        f"{text(name)} {text(n_truth)} vs {text(n_retrieved)}"
        for name, n_truth, n_retrieved in metrics.get("count_differences") or []
    )
    rows = [
        ("Common", ", ".join(text(c) for c in metrics.get("common") or [])),
        ("Missing (ground truth only)", ", ".join(text(c) for c in metrics.get("missing") or [])),
        ("Extra (retrieved only)", ", ".join(text(c) for c in metrics.get("extra") or [])),
        ("Matched pairs (path similarity)", pairs),
        ("Count differences (truth vs retrieved)", counts),
        (
            "Attributes lost (ground truth only)",
            ", ".join(text(a) for a in metrics.get("attribute_misses") or []),
        ),
    ]
    items = "".join(f"<dt>{name}</dt><dd>{value or '—'}</dd>" for name, value in rows)
    line = f'<p class="metrics-line"><strong>{text(label)}</strong>: {figures}</p>'
    return f'{line}<dl class="diff">{items}</dl>'


# --- the page -------------------------------------------------------------------------------


def render_report(report: Mapping[str, Any]) -> str:
    """Return the report as one self-contained HTML page."""
    images = report.get("images") or {}
    title = f"Explained failures · {report.get('dataset', '')}"
    sources = ", ".join(
        f"{text(k)}: {text(v)} images" for k, v in (report.get("concept_sources") or {}).items()
    )
    settings = ", ".join(
        f"{text(k)} = {text(v)}" for k, v in (report.get("settings") or {}).items()
    )
    parts = [
        f"<p>Release <code>{text(report.get('release', ''))}</code>, dataset "
        f"<strong>{text(report.get('dataset', ''))}</strong>. Concepts from "
        f"{sources or 'nowhere'}; settings: {settings or 'defaults'}.</p>",
        '<p class="note">A failure is a query whose first result is not a positive of the '
        "release. Its ground-truth image and the image retrieved first are compared concept by "
        "concept (Lymperaiou et al., sections 4-5): CA, NCS and AA higher is better, CE, SD "
        "and the SD rate lower is better. Query-informed metrics keep only the ground-truth "
        "concepts the query mentions.</p>",
    ]
    parts += [
        f'<p class="note">{text(s["name"])} was not explained: {text(s["reason"])}</p>'
        for s in report.get("skipped_annotators") or []
    ]
    for index, model in enumerate(report.get("models") or []):
        label = f"{model['name']} ({model.get('source', '')})"
        parts.append(
            render_explanation(model["explanation"], images, title=label, anchor=f"model-{index}")
        )
        parts.append(render_adversarial(model.get("adversarial"), title=str(model["name"])))
    parts.append(render_crowd(report.get("crowd"), report.get("models") or []))
    body = "\n".join(p for p in parts if p)
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{text(title)}</title>\n<style>\n{PAGE_CSS}{EXPLAIN_CSS}</style>\n</head>\n<body>\n"
        f'<h1>{text(title)}</h1>\n<div class="explain-report">\n{body}\n</div>\n</body>\n</html>\n'
    )
