"""The release bundle from plain data: positives, stats, manifest, verdicts, judgements, files."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

import pytest

from mitl.bias_html import render_bias_html
from mitl.config import BatchConfig
from mitl.judgements import shortcomings_to_mask, wrong_concepts_to_mask
from mitl.release_bundle import (
    InvalidCaption,
    JudgementRecord,
    ProxyQrels,
    ReleaseSources,
    SourceSet,
    VerdictRecord,
    curation_summary,
    extra_files_check,
    generated_file_names,
    judgement_row,
    release_bundle_build,
    worker_pseudonym,
)
from mitl.release_files import (
    BIAS_HTML_FILE,
    BIAS_JSON_FILE,
    DATASHEET_FILE,
    DIVERSITY_FILE,
    MANIFEST_FILE,
    QRELS_I2T_FILE,
    QRELS_T2I_FILE,
    write_release_dir,
)
from tests.mitl.test_bias_html import make_report

WORK = {
    "candidates": 4,
    "hits": 1,
    "assignments": {"approved": 2},
    "judgements": 8,
    "judgements_on_invalid_captions": 1,
    "verdicts": {"positive": 1, "negative": 2},
    "verdicts_on_invalid_captions": 0,
}


def verdict(image: int, caption: int, *, positive: bool, score: float) -> VerdictRecord:
    return VerdictRecord(
        image_id=image,
        caption_id=caption,
        rule="eccv",
        is_positive=positive,
        score=score,
        confidence=0.6666666666,
        n_judgements=3,
        distribution={"yes": 2, "no": 1},
        stages=((3, 0), (3, 2), (5, 1)),
    )


def judgement(worker: str = "mturk:A1", **changes) -> JudgementRecord:
    record = JudgementRecord(
        image_id=1,
        caption_id=10,
        role="task",
        level="weak_no",
        shortcomings=shortcomings_to_mask(["wrong_description"]),
        wrong_concepts=wrong_concepts_to_mask(["color"]),
        other_text="",
        elapsed_ms=1200,
        worker=worker,
        batch=7,
        hit=0,
        assignment=3,
        assignment_status="approved",
    )
    return dataclasses.replace(record, **changes)


def sources(**changes) -> ReleaseSources:
    """A release of batch 7: captions 10, 11, 20 queried; the crowd added (1, 11) and (2, 10)."""
    base = ReleaseSources(
        name="small",
        version=2,
        dataset="small",
        rule="eccv",
        rules={7: "eccv"},
        source_sets=[
            SourceSet("original", "original", "", 2),
            SourceSet("human-batch-7", "human", "judged positive", 2),
        ],
        image_queries=[2, 1],
        caption_queries=[10, 11, 20],
        original_pairs={(1, 10), (2, 20)},
        extended_pairs={(1, 10), (2, 20), (1, 11), (2, 10)},
        work=WORK,
        curation={"strategy": "fixed", "rounds": 1, "directions": {}},
        verdicts=[
            verdict(1, 11, positive=True, score=0.8333333333),
            verdict(2, 10, positive=True, score=0.5),
            verdict(1, 12, positive=False, score=0.25),
        ],
        judgements=[judgement()],
        invalid_captions=[],
        pseudonym_key="secret",
    )
    return dataclasses.replace(base, **changes)


def qrels(text: str) -> dict[tuple[int, int], int]:
    rows = (line.split() for line in text.splitlines())
    return {(int(query), int(doc)): int(grade) for query, _, doc, grade in rows}


def test_every_query_lists_its_merged_positives_and_the_stats_count_before_and_after():
    bundle = release_bundle_build(sources())

    assert bundle.i2t == {"1": [10, 11], "2": [10, 20]}
    assert bundle.t2i == {"10": [1, 2], "11": [1], "20": [2]}
    assert bundle.stats["i2t"]["positives_original"] == 2
    assert bundle.stats["i2t"]["positives_extended"] == 4
    assert bundle.stats["t2i"]["factor"] == 2.0
    assert bundle.stats["hits"] == 1
    assert bundle.stats["curation"]["strategy"] == "fixed"


def test_the_manifest_names_sources_rules_counts_and_the_zip_folder():
    bundle = release_bundle_build(sources())
    manifest = bundle.manifest

    assert manifest["batches"] == [7]
    assert manifest["sources"] == ["original", "human-batch-7"]
    assert manifest["source_sets"][1] == {
        "name": "human-batch-7",
        "source": "human",
        "description": "judged positive",
        "pairs": 2,
    }
    assert manifest["rules"] == {"7": "eccv"}
    assert manifest["rule_description"].startswith("majority")
    assert manifest["counts"]["pairs_original"] == 2
    assert manifest["counts"]["pairs_extended"] == 4
    assert manifest["counts"]["judgements_on_invalid_captions"] == 1
    assert "relevance" not in manifest
    assert bundle.root == "small-v2"


def test_a_factor_over_no_original_positive_is_none_in_the_manifest_but_nan_in_the_stats():
    bundle = release_bundle_build(sources(original_pairs=set()))

    assert bundle.manifest["counts"]["i2t"]["factor"] is None
    assert bundle.stats["i2t"]["factor"] != bundle.stats["i2t"]["factor"]  # NaN


def test_invalid_captions_are_listed_with_their_reason_and_time():
    marked = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    invalid = [InvalidCaption(20, 2, "meaningless", marked), InvalidCaption(21, 2, "wrong", None)]

    manifest = release_bundle_build(sources(invalid_captions=invalid)).manifest

    assert manifest["invalid_captions_excluded"] == [20, 21]
    assert manifest["invalid_captions"][0] == {
        "caption_id": 20,
        "image_id": 2,
        "reason": "meaningless",
        "marked_at": "2024-01-02T03:04:05+00:00",
    }
    assert manifest["invalid_captions"][1]["marked_at"] is None


def test_verdict_rows_round_scores_and_count_every_level():
    row = release_bundle_build(sources()).verdicts[0]

    assert row == {
        "image_id": 1,
        "caption_id": 11,
        "rule": "eccv",
        "is_positive": 1,
        "score": 0.833333,
        "confidence": 0.666667,
        "n_judgements": 3,
        "yes": 2,
        "weak_yes": 0,
        "weak_no": 0,
        "no": 1,
        "batches": "3 5",
        "rounds": "3:0 3:2 5:1",
    }


def test_qrels_grade_positives_by_their_verdict_score_and_keep_judged_negatives():
    bundle = release_bundle_build(sources())
    i2t = qrels(bundle.text_files[QRELS_I2T_FILE])

    assert i2t[(1, 10)] == 3  # original, no verdict: the top grade
    assert i2t[(1, 11)] == 3  # score ≥ 0.75
    assert i2t[(2, 10)] == 2
    assert i2t[(1, 12)] == 0  # judged, not a positive
    assert qrels(bundle.text_files[QRELS_T2I_FILE])[(11, 1)] == 3


def test_judgements_are_streamed_with_names_spelled_out_and_workers_pseudonymised():
    bundle = release_bundle_build(sources(judgements=iter([judgement(), judgement("web:bob")])))
    rows = list(bundle.judgements)

    assert rows[0]["shortcomings"] == ["wrong_description"]
    assert rows[0]["wrong_concepts"] == ["color"]
    assert rows[0]["worker"] == worker_pseudonym("mturk:A1", key="secret")
    assert rows[1]["worker"] != rows[0]["worker"]
    assert "A1" not in json.dumps(rows)
    assert {row["batch"] for row in rows} == {7}


def test_a_pseudonym_is_stable_under_one_key_and_changes_with_the_key():
    first = judgement_row(judgement(), key="one")["worker"]

    assert first == judgement_row(judgement(), key="one")["worker"]
    assert first != judgement_row(judgement(), key="two")["worker"]
    assert first.startswith("w-") and len(first) == 18


def test_reports_join_as_json_and_the_bias_report_also_as_standalone_html():
    bias = make_report(["tfidf", "bow-plain"])
    bundle = release_bundle_build(sources(diversity={"i2t": {}}, bias=bias))

    assert bundle.reports == {DIVERSITY_FILE: {"i2t": {}}, BIAS_JSON_FILE: bias}
    assert bundle.text_files[BIAS_HTML_FILE] == render_bias_html(bias, standalone=True)
    assert f"- `{BIAS_HTML_FILE}`:" in bundle.text_files[DATASHEET_FILE]


def test_a_release_without_reports_carries_none():
    bundle = release_bundle_build(sources())

    assert bundle.reports == {}
    assert BIAS_HTML_FILE not in bundle.text_files


def test_proxy_qrels_join_the_files_and_the_manifest_names_their_proxies_and_versions():
    relevance = ProxyQrels(
        aggregation="mean",
        versions={"bow": 1, "cider_d": 2},
        files={"qrels_bow_i2t.txt": "1 0 10 90\n", "qrels_cider_d_i2t.txt": "1 0 11 5\n"},
    )
    bundle = release_bundle_build(sources(relevance=relevance))

    assert bundle.manifest["relevance"] == {
        "proxies": ["bow", "cider_d"],
        "aggregation": "mean",
        "versions": {"bow": 1, "cider_d": 2},
    }
    assert bundle.text_files["qrels_bow_i2t.txt"] == "1 0 10 90\n"
    assert "qrels_cider_d_t2i.txt" in bundle.text_files[DATASHEET_FILE]


def test_extra_files_join_the_text_files_and_the_datasheet():
    bundle = release_bundle_build(sources(extra_files={"notes.html": "<p>hi</p>"}))

    assert bundle.text_files["notes.html"] == "<p>hi</p>"
    assert "- `notes.html`: an extra report." in bundle.text_files[DATASHEET_FILE]


@pytest.mark.parametrize("name", [DATASHEET_FILE, QRELS_I2T_FILE, BIAS_JSON_FILE, DIVERSITY_FILE])
def test_an_extra_file_may_not_replace_a_generated_one(name):
    with pytest.raises(ValueError, match="would replace a generated file"):
        release_bundle_build(sources(extra_files={name: "mine"}))


def test_the_proxies_qrels_count_as_generated_files():
    assert {"qrels_bow_i2t.txt", "qrels_bow_t2i.txt"} <= generated_file_names(["bow"])
    extra_files_check({"qrels_bow_i2t.txt": ""}, [])  # no proxy: a free name
    with pytest.raises(ValueError, match=r"qrels_bow_t2i\.txt"):
        extra_files_check({"qrels_bow_t2i.txt": ""}, ["bow"])


def test_the_curation_summary_names_the_adjudication_of_adaptive_batches_only():
    report = {
        "judgements_spent": 90,
        "directions": {"i2t": {"found": 4, "estimate": {"recall": 0.8}, "more": 1}},
    }
    adaptive = BatchConfig(annotators=("a",), strategy="adaptive", budget_judgements=100)

    summary = curation_summary(config=adaptive, report=report, rounds=3)

    assert summary == {
        "strategy": "adaptive",
        "adjudication": "bandit",
        "rounds": 3,
        "budget_judgements": 100,
        "target_recall": None,
        "judgements_spent": 90,
        "directions": {"i2t": {"found": 4, "estimate": {"recall": 0.8}}},
    }
    fixed = curation_summary(config=BatchConfig(annotators=("a",)), report={}, rounds=1)
    assert fixed["adjudication"] is None and fixed["budget_judgements"] is None


def test_the_bundle_writes_as_a_release_whose_manifest_lists_every_file(tmp_path):
    bundle = release_bundle_build(sources(extra_files={"notes.html": "<p>hi</p>"}))
    folder = tmp_path / "small" / "2"

    manifest = write_release_dir(
        folder,
        i2t=bundle.i2t,
        t2i=bundle.t2i,
        judgements=bundle.judgements,
        stats=bundle.stats,
        manifest=bundle.manifest,
        reports=bundle.reports,
        verdicts=bundle.verdicts,
        text_files=bundle.text_files,
        bundle_root=bundle.root,
    )

    assert json.loads((folder / MANIFEST_FILE).read_text()) == manifest
    assert {"notes.html", DATASHEET_FILE, QRELS_I2T_FILE, "verdicts.csv"} <= set(manifest["files"])
    assert (folder / "judgements.jsonl").read_text().count("\n") == 1
