"""The explain report as HTML: self-contained, escaped, and whole even with sections missing."""

from __future__ import annotations

import json
import re

from mitl.explain.concepts import ConceptObject, ImageConcepts
from mitl.explain.failures import ExplainInputs, explain_direction
from mitl.explain.html import render_explanation, render_report
from tests.explain_data import (
    IMAGE_SRC,
    NO_SRC_CAPTION,
    SCRIPT_CAPTION,
    explanation_block,
    images,
    report,
)


def test_the_page_is_self_contained_with_charts_and_no_script():
    page = render_report(report())

    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert "<script" not in page  # the caption's script is text, and the page needs none
    assert "<link" not in page and "@import" not in page
    assert page.count("<svg") == 4  # CA/NCS/CE histograms per model and direction
    assert "<h2>model (rankings)</h2>" in page and "<h2>bow (annotator (bow))</h2>" in page


def test_every_caption_and_example_text_is_escaped():
    page = render_report(report())

    assert "a dog &lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; chasing a ball" in page
    assert SCRIPT_CAPTION not in page
    assert "a dog catching a frisbee &amp; more" in page
    assert "“a red &lt;b&gt;car&lt;/b&gt;” → “a blue &lt;b&gt;car&lt;/b&gt;”: rank 1 → 7" in page


def test_an_image_with_a_file_is_shown_and_one_without_is_its_caption():
    fragment = render_explanation(explanation_block(), images(), title="m")

    card = fragment[fragment.index('<article class="failure"') :]
    truth = card[card.index('<figure class="truth">') : card.index('<figure class="retrieved">')]
    retrieved = card[card.index('<figure class="retrieved">') :]
    assert f'<img src="{IMAGE_SRC}"' in truth
    assert "<img" not in retrieved.split("</figure>")[0]
    assert '<p class="caption-text">a dog catching a frisbee &amp; more</p>' in retrieved
    assert NO_SRC_CAPTION.replace("&", "&amp;") in retrieved
    assert "Concepts: ball, dog ×2, park" in truth


def test_a_script_url_is_never_an_image_source():
    pictures = images()
    pictures["1"]["src"] = "javascript:alert(1)"

    fragment = render_explanation(explanation_block(), pictures, title="m")

    assert "javascript:" not in fragment
    assert "<img" not in fragment


def test_a_failure_card_lists_the_concept_differences():
    fragment = render_explanation(explanation_block(), images(), title="m")

    assert "Caption 10 → image 2 (first positive at rank 3)" in fragment
    assert "Image 1 → caption 20 of image 2 (first positive at rank 3)" in fragment
    assert "<dt>Missing (ground truth only)</dt><dd>ball</dd>" in fragment
    assert "<dt>Extra (retrieved only)</dt><dd>frisbee</dd>" in fragment
    assert "ball → frisbee (0.25)" in fragment
    assert "dog 2 vs 1" in fragment


def test_the_metric_table_shows_both_sides_and_which_way_is_better():
    fragment = render_explanation(explanation_block(), images(), title="m")
    table = fragment[fragment.index('<table class="metrics">') :].split("</table>")[0]

    assert re.search(r"<th>CA <span title=\"higher is better\">↑</span></th>"
                     r'<td class="num">0\.667</td><td class="num">1</td>'
                     r'<td class="num">0\.500</td>', table)  # fmt: skip
    assert '<span title="lower is better">↓</span>' in table
    assert "1 failures" not in fragment and "failure rate 25.0%" in fragment


def test_a_blind_kind_is_highlighted_and_one_that_reads_is_not():
    page = render_report(report())

    blind = re.search(r'<tr class="blind" data-kind="color_all">.*?</tr>', page).group(0)
    reads = re.search(r'<tr class="reads" data-kind="size">.*?</tr>', page).group(0)
    assert '<span class="badge">blind</span>' in blind and "badge" not in reads
    assert "60.0% → 40.0% (−20.0)" in blind and "0.700 → 0.550 (−0.150)" in blind
    assert "blind to color_all" in blind


def test_the_crowd_table_sets_concept_shares_beside_machine_metrics():
    page = render_report(report())
    crowd = page[page.index('id="crowd"') :]

    bow = re.search(r"<tr><td>bow</td>.*?</tr>", crowd).group(0)
    assert "25.0%" in bow and "50.0%" in bow  # quantity, colour
    assert "0.667 / 0.667" in bow  # CA t2i / i2t
    assert '<td class="num blind">10.0%</td>' in bow  # colour: blind
    assert "crowd: species" not in crowd  # no annotator has a share for it
    assert re.search(r"<tr><td>clip</td>.*?— / —", crowd)  # no machine model of that name


def test_missing_sections_leave_the_page_whole():
    bare = report(crowd=None)
    for model in bare["models"]:
        model["adversarial"] = None
        model["explanation"] = explanation_block(informed=False)

    page = render_report(bare)

    assert "Crowd vs machine" not in page and "Adversarial" not in page
    assert "they were not computed" in page
    assert "Query-informed</strong>" not in page


def test_a_skipped_re_ranking_and_an_empty_direction_say_so():
    block = explanation_block()
    block["i2t"] |= {"failures": 0, "failure_rate": 0.0, "explained": 0, "worst": []}
    block["i2t"]["confusions"] = {"missed": [], "swapped": []}
    for side in ("agnostic", "informed"):
        for histogram in block["i2t"][side]["histograms"].values():
            histogram["counts"] = [0] * len(histogram["counts"])
    full = report(models=[{"name": "x", "source": "annotator (precomputed)", "explanation": block,
                           "adversarial": {"skipped": "cannot score free text"}}])  # fmt: skip

    page = render_report(full)

    assert "Not run: cannot score free text." in page
    assert "No concept was missed or swapped." in page
    assert page.count("<svg") == 1  # t2i only: nothing to draw for i2t
    assert render_explanation({}, {}, title="none").count("No direction was explained") == 1


def test_the_renderer_reads_what_explain_direction_writes():
    """The hand-built data above has the pipeline's shape: render its real output too."""

    def scene(image_id: int, *categories: str) -> ImageConcepts:
        objects = tuple(ConceptObject(c, 0.1) for c in categories)
        return ImageConcepts(image_id, objects, "instances")

    inputs = ExplainInputs(
        positives={"t2i": {10: [1], 20: [2]}, "i2t": {1: [10], 2: [20]}},
        caption_image={10: 1, 20: 2},
        concepts={1: scene(1, "dog", "ball"), 2: scene(2, "dog", "frisbee")},
        mentioned=lambda caption, categories: categories,
        similarity=lambda a, b: 1.0 if a == b else 0.3,
    )
    rankings = {"t2i": {10: [2, 1], 20: [2, 1]}, "i2t": {1: [20, 10], 2: [20, 10]}}
    block = {d: explain_direction(d, rankings[d], inputs) for d in ("t2i", "i2t")}
    stored = json.loads(json.dumps(block))  # as the JSON field gives it back

    fragment = render_explanation(stored, {}, title="real")

    assert "<dt>Missing (ground truth only)</dt><dd>ball</dd>" in fragment
    assert "ball → frisbee (0.30)" in fragment


def test_the_text_summary_has_a_line_per_model_and_direction_and_every_verdict():
    from mitl.explain.table import summary_table

    full = report()
    full["models"].append(
        {
            "name": "labels",
            "source": "annotator (object_labels)",
            "explanation": explanation_block(),
            "adversarial": {"skipped": "a object_labels annotator cannot score free text"},
        }
    )
    lines = summary_table(full).splitlines()
    rows = [line.split() for line in lines[1:] if not line.startswith("  ")]
    assert [(row[0], row[1]) for row in rows] == [
        (name, direction) for name in ("model", "bow", "labels") for direction in ("t2i", "i2t")
    ]
    # model t2i: 1 failure, CA .667, NCS .25, CE 1, SD .5, SD>T .5, no AA, informed CA .5.
    assert rows[0][2:] == ["1", "0.667", "0.250", "1.00", "0.50", "0.500", "-", "|", "0.500"]
    verdicts = [line.strip() for line in lines if line.startswith("  ")]
    # The hand-built data's own verdict sentences, each on its kind's line.
    assert verdicts[0] == "color_all  blind to color_all: the positive moved lower for 10% of 10"
    assert verdicts[1].startswith("size") and "reads size" in verdicts[1]
    assert verdicts[2] == "no re-ranking: a object_labels annotator cannot score free text"
