"""Evaluating rankings on a release directory: files, checks, graded gains, COCO recalls."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from mitl.evaluation import CaptionSplit, evaluate, format_table
from mitl.evaluation_inputs import (
    EvaluationError,
    rankings_parse,
    rankings_read,
    rankings_sha256,
    release_load,
)
from mitl.release_files import I2T_FILE, T2I_FILE, VERDICT_COLUMNS, VERDICTS_FILE

# Images 1 to 5 with captions 11-15, 21-25, …, 51-55 (caption c belongs to image c // 10).
CAPTIONS = [c for image in (1, 2, 3, 4, 5) for c in range(image * 10 + 1, image * 10 + 6)]
SPLIT = CaptionSplit(caption_ids=CAPTIONS, image_ids=[c // 10 for c in CAPTIONS])
# The release: image queries 1 and 3 (3 has no positive left), caption queries 11 and 21.
I2T = {"1": [11, 12, 21], "3": []}
T2I = {"11": [1], "21": [2, 1]}


def write_release(folder: Path, verdicts: list[dict] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / I2T_FILE).write_text(json.dumps(I2T))
    (folder / T2I_FILE).write_text(json.dumps(T2I))
    if verdicts is not None:
        lines = [",".join(VERDICT_COLUMNS)]
        for row in verdicts:
            full = {column: 0 for column in VERDICT_COLUMNS} | {"rule": "eccv"} | row
            lines.append(",".join(str(full[column]) for column in VERDICT_COLUMNS))
        (folder / VERDICTS_FILE).write_text("\n".join(lines) + "\n")
    return folder


def i2t_ranking(first: list[int]) -> list[int]:
    return first + [c for c in CAPTIONS if c not in first]


def t2i_ranking(first: list[int]) -> list[int]:
    return first + [i for i in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10) if i not in first]


def rankings() -> dict:
    return {
        "i2t": {1: i2t_ranking([12, 31, 11, 21]), 3: i2t_ranking([11])},
        "t2i": {11: t2i_ranking([2, 1]), 21: t2i_ranking([2, 1])},
    }


def test_every_metric_per_direction_over_the_queries_with_positives(tmp_path):
    result = evaluate(release_load(write_release(tmp_path / "r")), rankings())

    i2t, t2i = result["i2t"], result["t2i"]
    # image 1 (R = 3) ranks 12, 31, 11, 21: hits at ranks 1, 3, 4
    assert i2t["recall@1"] == 1.0
    assert i2t["r_precision"] == pytest.approx(2 / 3)
    assert i2t["map_at_r"] == pytest.approx((1 + 2 / 3) / 3)
    assert i2t["pmrp"] == pytest.approx(2 / 3)
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert i2t["ndcg@10"] == pytest.approx((1 + 1 / math.log2(4) + 1 / math.log2(5)) / ideal)
    assert (i2t["queries"], i2t["queries_without_positives"]) == (1, 1)
    # caption 11 ranks image 2 first (a miss), caption 21 ranks its positives 2, 1 on top
    assert t2i["recall@1"] == pytest.approx(1 / 2)
    assert t2i["recall@5"] == 1.0
    assert t2i["map_at_r"] == pytest.approx((0 + 1) / 2)
    assert (t2i["queries"], t2i["queries_without_positives"]) == (2, 0)
    assert not any(key.startswith("coco") for key in i2t)


def test_verdict_scores_grade_ndcg_and_unjudged_positives_gain_one(tmp_path):
    verdicts = [
        {"image_id": 1, "caption_id": 12, "is_positive": 1, "score": 0.5},
        {"image_id": 1, "caption_id": 31, "is_positive": 0, "score": 0.25},
    ]
    result = evaluate(release_load(write_release(tmp_path / "r", verdicts)), rankings())

    # ranking 12 (0.5), 31 (0.25, no positive), 11 (1), 21 (1); ideal 1, 1, 0.5, 0.25
    dcg = 0.5 + 0.25 / math.log2(3) + 1 / math.log2(4) + 1 / math.log2(5)
    ideal = 1 + 1 / math.log2(3) + 0.5 / math.log2(4) + 0.25 / math.log2(5)
    assert result["i2t"]["ndcg@10"] == pytest.approx(dcg / ideal)
    assert result["i2t"]["map_at_r"] == pytest.approx((1 + 2 / 3) / 3)  # positives unchanged


def test_a_bad_verdict_score_names_the_file_and_line(tmp_path):
    folder = write_release(tmp_path / "r", [{"image_id": 1, "caption_id": 12, "score": 2}])
    with pytest.raises(EvaluationError, match=rf"{VERDICTS_FILE}:2: score '2' is not"):
        release_load(folder)


def test_a_missing_release_or_positives_file_is_named(tmp_path):
    with pytest.raises(EvaluationError, match="not a release directory"):
        release_load(tmp_path / "nowhere")
    folder = write_release(tmp_path / "r")
    (folder / T2I_FILE).write_text("{not json")
    with pytest.raises(EvaluationError, match=rf"{T2I_FILE}: not valid JSON"):
        release_load(folder)
    (folder / T2I_FILE).unlink()
    with pytest.raises(EvaluationError, match=rf"{T2I_FILE}: file not found"):
        release_load(folder)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "must be a JSON object"),
        ({"i2t": {}}, r"missing: t2i"),
        ({"i2t": {}, "t2i": {}, "x": {}}, r"unknown: 'x'"),
        ({"i2t": [], "t2i": {}}, r"rankings i2t must be a JSON object"),
        ({"i2t": {"one": [1]}, "t2i": {}}, r"key 'one' is not an integer id"),
        ({"i2t": {"1": [1, "2"]}, "t2i": {}}, r"list of integer ids \(found '2'\)"),
        ({"i2t": {"1": [1, 2.0]}, "t2i": {}}, r"list of integer ids \(found 2.0\)"),
        ({"i2t": {"1": [1, True]}, "t2i": {}}, r"list of integer ids \(found True\)"),
        ({"i2t": {"1": 5}, "t2i": {}}, r"value of '1' must be a list"),
        ({"i2t": {"1": [4, 5, 4]}, "t2i": {}}, r"the list of '1' holds 4 twice"),
    ],
)
def test_rankings_of_the_wrong_shape_are_refused(data, message):
    with pytest.raises(EvaluationError, match=message):
        rankings_parse(data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"i2t": {"1": [2**63]}, "t2i": {}}, r"holds 9223372036854775808, not an id of at most 64"),
        ({"i2t": {"1": [-(2**63) - 1]}, "t2i": {}}, r"not an id of at most 64 bits"),
        ({"i2t": {str(2**64): [1]}, "t2i": {}}, r"key '18446744073709551616' is not an id of"),
    ],
)
def test_ids_wider_than_64_bits_are_refused(data, message):
    with pytest.raises(EvaluationError, match=message):
        rankings_parse(data)


def test_a_ranking_longer_than_max_length_is_refused_before_its_ids_are_read():
    rankings_parse({"i2t": {"1": list(range(10))}, "t2i": {}}, max_length=10)
    too_long = {"i2t": {}, "t2i": {"7": [*range(10), "not even an id"]}}
    with pytest.raises(EvaluationError, match=r"rankings t2i: the list of '7' has 11 ids, more "):
        rankings_parse(too_long, max_length=10)
    assert rankings_parse(too_long | {"t2i": {"7": list(range(11))}})  # no cap by default


def test_more_queries_than_max_queries_are_refused_before_any_is_read():
    rankings = {"i2t": {"1": [1], "2": [1]}, "t2i": {"x": "not even a list"}}
    with pytest.raises(EvaluationError, match=r"rankings t2i ranks 1 queries, more than the 0"):
        rankings_parse(rankings, max_queries={"i2t": 2, "t2i": 0})


def test_a_rankings_file_error_names_the_file(tmp_path):
    path = tmp_path / "model.json"
    with pytest.raises(EvaluationError, match=r"model\.json: file not found"):
        rankings_read(path)
    path.write_text("[1, 2")
    with pytest.raises(EvaluationError, match=r"model\.json: not valid JSON"):
        rankings_read(path)
    path.write_text('{"i2t": {}}')
    with pytest.raises(EvaluationError, match=r"model\.json: rankings must have .*missing: t2i"):
        rankings_read(path)
    path.write_text(json.dumps({"i2t": {"1": [11]}, "t2i": {"11": [1]}}))
    assert rankings_read(path) == {"i2t": {1: [11]}, "t2i": {11: [1]}}


def test_every_release_query_needs_a_ranking_even_without_positives(tmp_path):
    release = release_load(write_release(tmp_path / "r"))
    partial = rankings()
    del partial["i2t"][3]
    with pytest.raises(EvaluationError, match=r"i2t: 1 of the release's 2 queries .*first: 3"):
        evaluate(release, partial)


def test_queries_outside_the_release_are_refused(tmp_path):
    release = release_load(write_release(tmp_path / "r"))
    extra = rankings()
    extra["t2i"][12] = t2i_ranking([1])
    with pytest.raises(EvaluationError, match=r"t2i: 1 ranked queries are not queries .*: 12\)$"):
        evaluate(release, extra)
    with pytest.raises(EvaluationError, match=r"or every image .* for the COCO 1K/5K recalls"):
        evaluate(release, extra, split=SPLIT)
    extra["t2i"][99] = t2i_ranking([1])
    with pytest.raises(EvaluationError, match=r"neither queries of the release nor captions"):
        evaluate(release, extra, split=SPLIT)


def test_a_ranking_shorter_than_r_is_refused_with_the_direction(tmp_path):
    release = release_load(write_release(tmp_path / "r"))
    short = rankings()
    short["i2t"][1] = [12, 31]
    with pytest.raises(EvaluationError, match=r"^i2t: .*query 1 ranks 2 targets"):
        evaluate(release, short)


def test_rankings_of_a_whole_split_add_the_coco_recalls(tmp_path):
    release = release_load(write_release(tmp_path / "r"))
    full = rankings()
    full["i2t"].update({image: i2t_ranking([image * 10 + 1]) for image in (2, 4, 5)})
    full["t2i"].update({c: t2i_ranking([c // 10]) for c in CAPTIONS if c not in full["t2i"]})

    result = evaluate(release, full, split=SPLIT)

    # 5 images in 5 folds of one image and its 5 captions
    for direction in ("i2t", "t2i"):
        assert set(result[direction]) >= {"coco_5k_recall@1", "coco_1k_recall@10"}
    assert result["t2i"]["coco_5k_recall@1"] == pytest.approx(24 / 25)  # 11 ranks 2 first
    assert result["t2i"]["coco_1k_recall@1"] == 1.0  # within a fold, one image per caption
    assert result["i2t"]["coco_5k_recall@1"] == pytest.approx(4 / 5)  # image 3 ranks 11 first
    assert result["i2t"]["coco_1k_recall@1"] == 1.0  # image 3 sees only 31-35
    assert result["i2t"]["recall@1"] == 1.0  # the release's metrics are unchanged


def test_a_split_of_fewer_images_than_coco_folds_gets_no_coco_recalls(tmp_path):
    release = release_load(write_release(tmp_path / "r"))
    small = CaptionSplit(caption_ids=CAPTIONS[:15], image_ids=[c // 10 for c in CAPTIONS[:15]])
    full = rankings()
    full["i2t"][2] = i2t_ranking([21])
    full["t2i"].update(
        {c: t2i_ranking([c // 10]) for c in small.caption_ids if c not in full["t2i"]}
    )

    result = evaluate(release, full, split=small)

    assert not any(key.startswith("coco") for d in ("i2t", "t2i") for key in result[d])
    assert result["i2t"]["recall@1"] == 1.0


def test_the_checksum_follows_the_content_not_the_layout():
    first = rankings_parse(json.loads('{"i2t": {"1": [2, 3], "4": [5]}, "t2i": {}}'))
    second = rankings_parse(json.loads('{"t2i": {}, "i2t": {"4": [5],  "1": [2, 3]}}'))
    third = rankings_parse(json.loads('{"i2t": {"1": [3, 2], "4": [5]}, "t2i": {}}'))
    assert rankings_sha256(first) == rankings_sha256(second) != rankings_sha256(third)


def test_the_table_has_a_row_per_metric_and_the_counts(tmp_path):
    table = format_table(evaluate(release_load(write_release(tmp_path / "r")), rankings()))
    lines = table.splitlines()
    assert lines[0].split() == ["metric", "i2t", "t2i"]
    assert lines[1].split() == ["recall@1", "1.0000", "0.5000"]
    assert lines[-1].split() == ["queries_without_positives", "1", "0"]
