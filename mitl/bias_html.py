"""Render a bias report (`pipeline.bias.bias_report_build`) as HTML with inline SVG charts.

The output needs nothing else: the charts (`mitl.bias_charts`) are SVG text inside the page,
so `bias_report.html` opens anywhere and the same fragment sits inside the web UI. Pure
Python: the same report gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from mitl.bias_charts import DIRECTION_TITLES, bias_by_size_svg, stacked_bars_svg
from mitl.judgements import SHORTCOMINGS

# Shown whole up to this many subsets (6 annotators); past it the matrix table keeps the
# single annotators, the leave-one-out subsets and All (the JSON keeps every subset).
MATRIX_ROWS_MAX = 63
BIAS_CSS = """
.bias-report table { border-collapse: collapse; width: 100%; margin: .5rem 0 1.5rem; }
.bias-report th, .bias-report td { text-align: left; padding: .3rem .5rem;
  border-bottom: 1px solid #d0d0d0; vertical-align: top; }
.bias-report td.num, .bias-report th.num { text-align: right; font-variant-numeric: tabular-nums; }
.bias-report td.self { font-weight: 700; }
.bias-report figure { margin: 1rem 0; }
.bias-report figure svg { max-width: 100%; height: auto; }
.bias-report figcaption, .bias-report .note { color: #555; font-size: .9rem; }
.bias-report .table-wrap { overflow-x: auto; }
"""


def render_bias_html(
    report: Mapping[str, Any], *, standalone: bool = True, folded: bool = False
) -> str:
    """Return the report as HTML: a whole document, or the fragment a page embeds.

    The fragment is one `<section class="bias-report">`; its styles are `BIAS_CSS`, which
    the standalone document carries in its head. `folded` puts each section after the
    summary in a `<details>`, only the first one open, so a long report starts short.
    """
    sections = [
        _answers_by_annotator(report),
        _answers_by_rank(report),
        _rationales(report),
        _positives(report),
        _bias(report),
    ]
    if folded:
        sections = [_fold(section, opened=index == 0) for index, section in enumerate(sections)]
    parts = [_summary(report), *sections]
    fragment = '<section class="bias-report">\n' + "\n".join(parts) + "\n</section>"
    if not standalone:
        return fragment
    batch = report["batch"]
    title = escape(f"Model bias report · batch {batch['id']} ({batch['name']})")
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{title}</title>\n<style>\nbody {{ font-family: system-ui, sans-serif; "
        "margin: 2rem auto; max-width: 64rem; padding: 0 1rem; color: #1a1a1a; }"
        f"{BIAS_CSS}</style>\n</head>\n<body>\n<h1>{title}</h1>\n{fragment}\n</body>\n</html>\n"
    )


# --- sections -----------------------------------------------------------------------------


def _summary(report: Mapping[str, Any]) -> str:
    batch = report["batch"]
    names = ", ".join(escape(name) for name in report["annotators"])
    headline = report["bias"].get(report["headline"])
    lines = [
        f"<p>Dataset <strong>{escape(str(batch['dataset']))}</strong>, batch "
        f"{batch['id']} ({escape(str(batch['name']))}, {escape(str(batch['state']))}): "
        f"{len(report['annotators'])} machine annotators ({names}), top {batch['k']} each; "
        f"{report['positives']['verified_positives']} human-verified positive pairs.</p>",
        '<p class="note">Following ECCV Caption (Chun et al., 2022), Appendices B and E. The '
        "release built from a subset Θ of the annotators holds the original positives plus "
        "the verified positives among the candidates Θ proposed; s<sub>Θ</sub>(φ) is "
        "annotator φ's R@1 (%) against it. Model bias B<sub>Θ</sub> = mean over every "
        "annotator φ of |s<sub>Θ</sub>(φ) − s<sub>All</sub>(φ)|; self-bias takes the mean "
        "over φ ∈ Θ, non-self-bias over φ ∉ Θ.</p>",
        '<p class="note">Captions an admin marked invalid are left out, as the release '
        f"leaves them out: {report.get('candidates_on_invalid_captions', 0)} candidates and "
        f"{report.get('judgements_on_invalid_captions', 0)} approved judgements on them "
        "count in none of the answers, reasons or positives below.</p>",
    ]
    if headline:
        singles = [s for s in headline["subsets"] if s["size"] == 1]
        figures = "; ".join(
            f"B<sub>{escape(s['members'][0])}</sub> = {_num(s['bias'])} (self "
            f"{_num(s['self_bias'])}, non-self {_num(s['non_self_bias'])})"
            for s in singles
        )
        lines.append(f"<p>Text-to-image R@1, one annotator's candidates alone: {figures}.</p>")
    return "\n".join(lines)


def _answers_by_annotator(report: Mapping[str, Any]) -> str:
    rows = list(report["answers"]["by_annotator"].items())
    return "\n".join(
        [
            "<h2>Answers per annotator</h2>",
            '<p class="note">Share of each answer among the approved judgements of the '
            "candidates each annotator proposed (ECCV Caption Table B.2); a candidate "
            "proposed by several annotators counts for each.</p>",
            _figure(
                stacked_bars_svg(rows, report["levels"], label="annotator"),
                "Answer shares per annotator",
            ),
            _shares_table(rows, report["levels"], first="Annotator"),
        ]
    )


def _answers_by_rank(report: Mapping[str, Any]) -> str:
    rows = [(f"rank {rank}", shares) for rank, shares in report["answers"]["by_rank"].items()]
    detail = [
        (f"{name}, rank {rank}", shares)
        for name, ranks in report["answers"]["by_annotator_rank"].items()
        for rank, shares in ranks.items()
    ]
    return "\n".join(
        [
            "<h2>Answers per rank</h2>",
            '<p class="note">Share of each answer by the rank at which the candidate was '
            "proposed (a candidate proposed at two ranks counts for both).</p>",
            _figure(
                stacked_bars_svg(rows, report["levels"], label="rank"),
                "Answer shares per rank of the proposal",
            ),
            _shares_table(rows, report["levels"], first="Rank"),
            "<details><summary>Per annotator and rank</summary>",
            _shares_table(detail, report["levels"], first="Annotator, rank"),
            "</details>",
        ]
    )


def _rationales(report: Mapping[str, Any]) -> str:
    labels = {level["value"]: level["label"] for level in report["levels"]}
    shortcomings = list(SHORTCOMINGS)
    head = "".join(f'<th class="num">{escape(_label(s))}</th>' for s in shortcomings)
    body = []
    for name, levels in report["rationales"].items():
        for level, stats in levels.items():
            cells = "".join(
                f'<td class="num">{_share(stats["shortcomings"].get(s))}</td>' for s in shortcomings
            )
            concepts = sorted(
                ((share, concept) for concept, share in stats["wrong_concepts"].items() if share),
                reverse=True,
            )
            named = ", ".join(f"{escape(_label(c))} {_share(share)}" for share, c in concepts)
            body.append(
                f"<tr><td>{escape(name)}</td><td>{escape(labels.get(level, level))}</td>"
                f'<td class="num">{stats["judgements"]}</td>{cells}'
                f'<td class="num">{stats["wrong_description"]}</td><td>{named or "—"}</td></tr>'
            )
    return "\n".join(
        [
            "<h2>Reasons for the middle answers</h2>",
            '<p class="note">For "Partially YES" and "Mostly NO" answers: the share that gave '
            "each shortcoming (several may be given), and among those that said the caption "
            "describes the main concepts in a wrong way, which concepts (ECCV Caption "
            "Table B.3).</p>",
            '<div class="table-wrap"><table><thead><tr><th>Annotator</th><th>Answer</th>'
            f'<th class="num">Judgements</th>{head}<th class="num">Wrong description</th>'
            "<th>Wrong concepts</th></tr></thead><tbody>",
            *body,
            "</tbody></table></div>",
        ]
    )


def _positives(report: Mapping[str, Any]) -> str:
    k = report["batch"]["k"]
    directions = [d for d in ("t2i", "i2t") if d in report["bias"]]
    head = "".join(f'<th class="num">P@{k} {d} (%)</th>' for d in directions)
    body = []
    for name, stats in report["positives"]["by_annotator"].items():
        precision = "".join(
            f'<td class="num">{_num(report["bias"][d]["precision_at_k"][name])}</td>'
            for d in directions
        )
        body.append(
            f'<tr><td>{escape(name)}</td><td class="num">{stats["candidates"]}</td>'
            f'<td class="num">{stats["judged"]}</td><td class="num">{stats["verified"]}</td>'
            f'<td class="num">{_share(stats["verified_share"])}</td>'
            f'<td class="num">{stats["only_this"]}</td>'
            f'<td class="num">{_share(stats["only_this_share"])}</td>{precision}</tr>'
        )
    return "\n".join(
        [
            "<h2>Positives per annotator</h2>",
            '<p class="note">Candidates each annotator proposed, how many were judged and '
            "verified positive, how many of those no other annotator proposed, and the "
            f"precision of its own top {k} against the full release.</p>",
            '<div class="table-wrap"><table><thead><tr><th>Annotator</th>'
            '<th class="num">Candidates</th><th class="num">Judged</th>'
            '<th class="num">Verified</th><th class="num">Verified share</th>'
            '<th class="num">Found by it alone</th><th class="num">Share of its positives</th>'
            f"{head}</tr></thead><tbody>",
            *body,
            "</tbody></table></div>",
        ]
    )


def _bias(report: Mapping[str, Any]) -> str:
    directions = [d for d in ("t2i", "i2t") if d in report["bias"]]
    if not directions:
        return "<h2>Model bias</h2><p>No queries to score.</p>"
    parts = [
        "<h2>Model bias</h2>",
        '<p class="note">The rankings scored here are the ones that proposed the candidates, '
        "so each annotator's top 1 is among its own candidates: self-bias is 0 by "
        "construction, and B<sub>Θ</sub> is the non-self-bias weighted by the share of "
        "annotators outside Θ.</p>",
        _figure(
            bias_by_size_svg({d: report["bias"][d]["by_size"] for d in directions}),
            "Bias against the size of the annotator subset, averaged over every subset of "
            "that size (ECCV Caption Fig. E.2)",
        ),
    ]
    for direction in directions:
        parts.append(_direction(report, direction))
    return "\n".join(parts)


def _direction(report: Mapping[str, Any], direction: str) -> str:
    section = report["bias"][direction]
    names = report["annotators"]
    n = len(names)
    subsets = section["subsets"]
    shown = subsets
    note = ""
    if len(subsets) > MATRIX_ROWS_MAX:
        shown = [s for s in subsets if s["size"] in (1, n - 1, n)]
        note = (
            f'<p class="note">{len(subsets)} subsets: the table shows single annotators, '
            "leave-one-out subsets and All; bias_report.json holds every subset.</p>"
        )
    anchors = "".join(
        f'<tr><td>{escape(name)}</td><td class="num">'
        f"{_num(section['recall_at_1_original'][name])}</td>"
        f'<td class="num">{_num(section["recall_at_1_release"][name])}</td></tr>'
        for name in names
    )
    head = "".join(f'<th class="num">s<sub>Θ</sub>({escape(name)})</th>' for name in names)
    rows = []
    for subset in shown:
        members = set(subset["members"])
        cells = "".join(
            f'<td class="num{" self" if name in members else ""}">'
            f"{_num(subset['recall_at_1'][name])}</td>"
            for name in names
        )
        label = "All" if subset["size"] == n else " + ".join(escape(m) for m in subset["members"])
        rows.append(
            f'<tr><td>{label}</td>{cells}<td class="num">{_num(subset["bias"])}</td>'
            f'<td class="num">{_num(subset["self_bias"])}</td>'
            f'<td class="num">{_num(subset["non_self_bias"])}</td></tr>'
        )
    sizes = "".join(
        f'<tr><td class="num">{row["size"]}</td><td class="num">{row["subsets"]}</td>'
        f'<td class="num">{_num(row["bias"])}</td><td class="num">{_num(row["self_bias"])}</td>'
        f'<td class="num">{_num(row["non_self_bias"])}</td></tr>'
        for row in section["by_size"]
    )
    return "\n".join(
        [
            f"<h3>{escape(DIRECTION_TITLES.get(direction, direction))}: "
            f"{section['queries']} queries</h3>",
            '<table><thead><tr><th>Annotator</th><th class="num">R@1 original (%)</th>'
            f'<th class="num">R@1 release (%)</th></tr></thead><tbody>{anchors}</tbody></table>',
            '<p class="note">R@1 (%) of each annotator (columns) on the release built from '
            "each subset's candidates (rows; bold: the annotator is in the subset), as in "
            "ECCV Caption Table E.1, with the subset's bias.</p>",
            note,
            '<div class="table-wrap"><table><thead><tr><th>Subset Θ</th>'
            f'{head}<th class="num">B<sub>Θ</sub></th><th class="num">Self-bias</th>'
            '<th class="num">Non-self-bias</th></tr></thead><tbody>',
            *rows,
            "</tbody></table></div>",
            '<table><thead><tr><th class="num">Subset size</th><th class="num">Subsets</th>'
            '<th class="num">Mean B<sub>Θ</sub></th><th class="num">Mean self-bias</th>'
            f'<th class="num">Mean non-self-bias</th></tr></thead><tbody>{sizes}</tbody></table>',
        ]
    )


def _shares_table(
    rows: Sequence[tuple[str, Mapping[str, Any]]], levels: Sequence[Mapping[str, str]], first: str
) -> str:
    head = "".join(f'<th class="num">{escape(level["label"])}</th>' for level in levels)
    body = "".join(
        f'<tr><td>{escape(label)}</td><td class="num">{shares["judgements"]}</td>'
        + "".join(
            f'<td class="num">{_share(shares["shares"][level["value"]])}</td>' for level in levels
        )
        + "</tr>"
        for label, shares in rows
    )
    return (
        f'<div class="table-wrap"><table><thead><tr><th>{escape(first)}</th>'
        f'<th class="num">Judgements</th>{head}</tr></thead><tbody>{body}</tbody></table></div>'
    )


def _fold(section: str, *, opened: bool) -> str:
    """Put a section that starts with its `<h2>` heading in a `<details>` it summarises."""
    heading, _, rest = section.partition("</h2>")
    title = heading.removeprefix("<h2>")
    return (
        f'<details class="bias-section"{" open" if opened else ""}>'
        f"<summary><h2>{title}</h2></summary>\n{rest}\n</details>"
    )


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>"


# --- numbers ------------------------------------------------------------------------------


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def _share(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _label(name: str) -> str:
    return name.replace("_", " ")
