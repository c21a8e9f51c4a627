"""The bias report as HTML: standalone, charts inline, names escaped, the same bytes each time."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np

from mitl.bias import direction_bias, json_safe
from mitl.bias_html import BIAS_CSS, MATRIX_ROWS_MAX, render_bias_html
from mitl.crowd_answers import (
    LEVELS,
    JudgedAnswer,
    answer_shares,
    positives_by_annotator,
    rationale_shares,
)
from mitl.judgements import LEVEL_LABELS, Level, shortcomings_to_mask, wrong_concepts_to_mask

ANSWERS = [
    JudgedAnswer(Level.YES, 0, 0, ((0, 1), (1, 2))),
    JudgedAnswer(Level.WEAK_YES, shortcomings_to_mask(["grammar"]), 0, ((0, 1),)),
    JudgedAnswer(
        Level.WEAK_NO,
        shortcomings_to_mask(["wrong_description"]),
        wrong_concepts_to_mask(["color"]),
        ((1, 1),),
    ),
    JudgedAnswer(Level.NO, 0, 0, ((0, 2),)),
]


def make_report(names: list[str], *, batch_name: str = "small", seed: int = 0) -> dict:
    """A report shaped as `bias_report_build` returns it, from random rankings."""
    rng = np.random.default_rng(seed)
    n, queries = len(names), list(range(40))
    original = {q: {q} for q in queries}
    verified = {q: {q + 100: int(rng.integers(1, 2**n))} for q in queries if q % 3}

    def direction():
        rankings = [
            {q: rng.choice([q, q + 100, 999, 998], 3, replace=False).tolist() for q in queries}
            for _ in names
        ]
        return direction_bias(
            rankings,
            queries,
            annotators=names,
            original=original,
            verified=verified,
            precision_k=2,
        )

    return json_safe(
        {
            "batch": {"id": 7, "name": batch_name, "dataset": "small", "state": "released", "k": 2},
            "annotators": names,
            "levels": [{"value": lv.value, "label": LEVEL_LABELS[lv]} for lv in LEVELS],
            "headline": "t2i",
            "metric": "R@1 (%)",
            "max_annotators": 12,
            "answers": answer_shares(ANSWERS, names),
            "rationales": rationale_shares(ANSWERS, names),
            "positives": positives_by_annotator([(1, True), (3, True), (2, None)], names),
            "bias": {"t2i": direction(), "i2t": direction()},
        }
    )


def svgs(html: str) -> list[str]:
    return re.findall(r"<svg.*?</svg>", html, flags=re.S)


def test_standalone_report_is_one_document_with_its_charts_inline_and_nothing_to_fetch():
    html = render_bias_html(make_report(["alpha", "beta", "gamma"]))

    assert html.startswith("<!doctype html>") and html.rstrip().endswith("</html>")
    charts = svgs(html)
    assert len(charts) == 3  # answers per annotator, answers per rank, bias against size
    for chart in charts:
        ET.fromstring(chart)  # well-formed SVG
    assert "<script" not in html and "<link" not in html and "<img" not in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert "@import" not in html and "url(http" not in html


def test_fragment_is_the_documents_section_without_the_page_around_it():
    report = make_report(["alpha", "beta"])
    fragment = render_bias_html(report, standalone=False)

    assert fragment.startswith('<section class="bias-report">')
    assert fragment.endswith("</section>")
    assert "<html" not in fragment and "<head" not in fragment
    assert BIAS_CSS not in fragment  # the page that embeds it carries the styles
    # no style rule of the charts reaches beyond the report (matplotlib writes a bare `*`)
    assert "*{" not in fragment.replace(".bias-report svg *{", "")
    assert fragment in render_bias_html(report)


def test_the_same_report_renders_to_the_same_bytes():
    report = make_report(["alpha", "beta", "gamma"])
    assert render_bias_html(report) == render_bias_html(report)


def test_names_are_escaped():
    report = make_report(["alpha", "beta"], batch_name="<script>alert(1)</script>")
    html = render_bias_html(report)
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_tables_show_the_numbers_of_the_report():
    report = make_report(["alpha", "beta", "gamma"])
    html = render_bias_html(report, standalone=False)
    t2i = report["bias"]["t2i"]
    single = t2i["subsets"][0]
    assert f"{single['bias']:.1f}" in html
    assert "alpha + beta" in html  # a size-2 subset row
    assert html.count("<td>All</td>") == 2  # one matrix per direction
    assert "—" in html  # All has no non-self bias
    shares = report["answers"]["by_annotator"]["alpha"]["shares"]
    assert f"{100 * shares['yes']:.1f}%" in html
    assert "Partially YES" in html and "color 100.0%" in html


def test_a_large_matrix_keeps_single_leave_one_out_and_all_rows():
    names = [f"m{i}" for i in range(7)]  # 127 subsets
    report = make_report(names)
    assert len(report["bias"]["t2i"]["subsets"]) > MATRIX_ROWS_MAX
    html = render_bias_html(report, standalone=False)

    assert "127 subsets: the table shows single annotators" in html
    assert "<td>m0 + m1 + m2 + m3 + m4 + m5</td>" in html  # leave-one-out
    assert "<td>m0 + m1</td>" not in html  # size 2: only in the JSON
