"""Every number says what it counts: the pure wording the pages, datasheet and demo share."""

from __future__ import annotations

import re

import pytest

from mitl.bias_charts import stacked_bars_svg
from mitl.curation.estimate import RECALL_TRUTH, recall_wording
from mitl.curation.planner import PlanPoint, plan_empty_reason
from mitl.datasheet import datasheet_markdown
from mitl.judgements import LEVEL_LABELS
from mitl.positive_sets import positive_set_coverage

WIDE = {"found": 12, "unfound": 40.0, "unfound_low": 0.0, "unfound_high": 228.0}
WIDE |= {"recall": 0.23, "recall_low": 0.05, "recall_high": 1.0, "rounds_used": 1}
TOO_WIDE = "interval too wide to act on: judge more random pairs"
NARROW = {"found": 90, "unfound": 4.0, "unfound_low": 1.0, "unfound_high": 9.0}
NARROW |= {"recall": 0.957, "recall_low": 0.909, "recall_high": 0.989, "rounds_used": 3}


def test_recall_says_against_which_truth_and_a_wide_interval_says_it_cannot_be_used():
    wide = recall_wording(recall_low=0.05, recall_high=1.0)
    narrow = recall_wording(recall_low=0.909, recall_high=0.989)

    assert wide.truth == narrow.truth == RECALL_TRUTH
    assert "crowd's verdicts" in RECALL_TRUTH and "batch's queries" in RECALL_TRUTH
    assert wide.warning == TOO_WIDE
    assert narrow.warning == ""
    assert wide.sentence() == f"{RECALL_TRUTH}; {wide.warning}"
    assert narrow.sentence() == RECALL_TRUTH


def test_the_datasheet_says_what_recall_counts_and_flags_a_wide_interval():
    stats = {
        "curation": {
            "strategy": "adaptive",
            "directions": {"i2t": {"estimate": WIDE}, "t2i": {"estimate": NARROW}},
        },
    }
    manifest = {"name": "s", "version": 1, "dataset": "s", "rule": "eccv", "source_sets": []}

    text = datasheet_markdown(manifest, stats)

    i2t = next(line for line in text.splitlines() if line.startswith("| i2t | 12 |"))
    t2i = next(line for line in text.splitlines() if line.startswith("| t2i | 90 |"))
    assert i2t.endswith(
        "0.230 (0.050–1.000): interval too wide to act on: judge more random pairs |"
    )
    assert t2i.endswith("0.957 (0.909–0.989) |")
    assert f"Estimated recall: {RECALL_TRUTH}." in text


def test_the_demo_summary_says_what_each_recall_counts():
    from pipeline.management.commands.demo import recall_lines

    agreement = {"released i2t": {"recall": 0.8}, "released t2i": {"recall": 0.9}}
    lines = recall_lines({"i2t": WIDE, "t2i": NARROW}, agreement)

    assert lines[1].endswith(
        "0.230 (0.050-1.000)  interval too wide to act on: judge more random pairs"
    )
    assert lines[2].endswith("0.957 (0.909-0.989)")
    assert lines[3] == f"  true: against the synthetic truth; estimated: {RECALL_TRUTH}"
    assert recall_lines({}, agreement) == []


def test_a_plan_with_nothing_to_chart_says_why():
    nothing = [PlanPoint("adaptive", 100, 0, 0, 0.0, None)]
    zero_yield = [PlanPoint("fixed", 100, 100, 20, 0.0, None)]
    some = [PlanPoint("fixed", 100, 100, 20, 3.5, None)]

    assert plan_empty_reason([], 0).startswith("Nothing to plan: no ranked pair is left")
    assert plan_empty_reason(nothing, 0).startswith("Nothing to plan")
    assert plan_empty_reason(zero_yield, 100).startswith("No chart: no budget is predicted")
    assert plan_empty_reason(some, 100) is None


@pytest.mark.parametrize(
    ("source", "queries", "words"),
    [
        ("imported", {"i2t": [1, 2], "t2i": [3]}, "2 image, 1 caption queries"),
        ("imported", {}, "queries not recorded"),
        ("imported", None, "queries not recorded"),
        ("original", {}, "every image and caption (each caption's own image)"),
        ("human", {}, "the queries of the batch that judged it"),
    ],
)
def test_a_positive_set_never_claims_the_whole_dataset(source, queries, words):
    assert positive_set_coverage(source=source, queries=queries) == words


def test_the_answer_legend_stays_inside_the_chart_with_long_annotator_names():
    levels = [{"value": level.value, "label": label} for level, label in LEVEL_LABELS.items()]
    shares = {"shares": {"yes": 0.3, "weak_yes": 0.2, "weak_no": 0.2, "no": 0.3}}
    rows = [("open_clip ViT-B-32 laion2b_s34b_b79k", shares), ("bow", shares)]

    svg = stacked_bars_svg(rows, levels, label="annotator")

    width = float(re.search(r'viewBox="0 0 ([\d.]+) ', svg)[1])
    texts = dict(
        (text, float(x)) for x, text in re.findall(r'<text[^>]*x="([\d.]+)"[^>]*>([^<]*)<', svg)
    )
    # A generous 0.7 em per character at 10 px: the whole of "100% NO" is drawn.
    assert texts["100% NO"] + 7 * len("100% NO") <= width
    assert all(texts[label] >= 0 for label in LEVEL_LABELS.values())
