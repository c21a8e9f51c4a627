"""The release datasheet: what the release is, its sources, rule, counts, files and grades."""

from __future__ import annotations

from mitl.datasheet import datasheet_markdown
from mitl.release_files import QRELS_I2T_FILE, STANDARD_FILES

MANIFEST = {
    "name": "coco5k",
    "version": 2,
    "dataset": "coco5k",
    "batches": [7],
    "rule": "dawid_skene",
    "rule_description": "Dawid-Skene posterior",
    "source_sets": [
        {"name": "original", "source": "original", "pairs": 25000},
        {"name": "human-batch-7", "source": "human", "pairs": 900},
        {"name": "cxc", "source": "imported", "pairs": 1200},
    ],
    "invalid_captions": [
        {"caption_id": 5, "image_id": 1, "reason": "meaningless", "marked_at": None},
        {"caption_id": 6, "image_id": 2, "reason": "wrong_for_image", "marked_at": None},
        {"caption_id": 8, "image_id": 2, "reason": "wrong_for_image", "marked_at": None},
    ],
}
STATS = {
    "i2t": {
        "queries": 100,
        "positives_original": 500,
        "positives_extended": 1790,
        "per_query_original": 5.0,
        "per_query_extended": 17.9,
        "factor": 3.58,
    },
    "t2i": {
        "queries": 100,
        "positives_original": 100,
        "positives_extended": 847,
        "per_query_original": 1.0,
        "per_query_extended": 8.47,
        "factor": float("nan"),
    },
    "candidates": 4000,
    "hits": 250,
    "judgements": 13500,
    "verdicts": {"positive": 900, "negative": 3100},
}


def test_the_datasheet_names_the_release_dataset_rule_and_every_source():
    text = datasheet_markdown(MANIFEST, STATS)
    assert text.startswith("# coco5k v2\n")
    assert "`dawid_skene`" in text
    for name in ("original", "human-batch-7", "cxc"):
        assert f"| `{name}` |" in text
    assert "| 1200 |" in text


def test_the_datasheet_gives_the_counts_per_direction():
    text = datasheet_markdown(MANIFEST, STATS)
    assert "| image → captions | 100 | 500 | 1790 | 5.00 → 17.90 | ×3.58 |" in text
    assert "×n/a" in text  # a factor without original positives
    assert "judgements: 13500" in text


def test_the_datasheet_describes_every_standard_file_and_the_extra_ones():
    text = datasheet_markdown(MANIFEST, STATS, extra_files=["bias_report.html"])
    for name in [*STANDARD_FILES, QRELS_I2T_FILE, "bias_report.html"]:
        assert f"- `{name}`:" in text
    assert "image_id,caption_id,rule,is_positive,score,confidence" in text


def test_the_datasheet_explains_grades_evaluation_invalid_captions_and_licence():
    text = datasheet_markdown(MANIFEST, STATS)
    assert "## Relevance grades (qrels)" in text
    assert 'metrics.set_eccv_gts("coco5k-v2/image_to_caption.json"' in text
    assert "leaves out 3 (1 meaningless, 2 wrong_for_image)" in text
    assert "## Licence" in text
