"""The limits every way in holds rankings to (mitl/ranking_limits.py)."""

from __future__ import annotations

import json

import pytest

from mitl.evaluation_inputs import EvaluationError, RankingLimitError
from mitl.ranking_limits import (
    UNLIMITED,
    RankingLimits,
    rankings_file_limited,
    rankings_from_bytes,
)

GOOD = {"i2t": {"1": [11, 12, 13]}, "t2i": {"11": [1, 2]}}
LIMITS = RankingLimits(max_bytes=1024, max_depth=3, max_queries={"i2t": 1, "t2i": 2})


def test_rankings_within_every_limit_come_back_with_integer_ids():
    rankings = rankings_from_bytes(json.dumps(GOOD).encode(), LIMITS)
    assert rankings == {"i2t": {1: [11, 12, 13]}, "t2i": {11: [1, 2]}}


@pytest.mark.parametrize(
    ("content", "limit", "value", "maximum", "words"),
    [
        (b" " * 1025 + b"{}", "size", 1027, 1024, "have 1.0 KB, over the size limit of 1.0 KB"),
        (
            json.dumps({**GOOD, "i2t": {"1": [11, 12, 13, 14]}}).encode(),
            "depth",
            4,
            3,
            "the list of '1' has 4 ids, more than the 3 accepted (the depth limit",
        ),
        (
            json.dumps({**GOOD, "i2t": {"1": [11], "2": [12]}}).encode(),
            "queries",
            2,
            1,
            "rankings i2t ranks 2 queries, more than the 1 there are to rank",
        ),
    ],
)
def test_each_limit_is_named_with_the_value_seen(content, limit, value, maximum, words):
    with pytest.raises(RankingLimitError) as refused:
        rankings_from_bytes(content, LIMITS)
    assert (refused.value.limit, refused.value.value, refused.value.maximum) == (
        limit,
        value,
        maximum,
    )
    assert words in str(refused.value)


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "model.json"
    path.write_bytes(b"[" * 2000)  # not even JSON: never parsed
    with pytest.raises(RankingLimitError, match=r"model\.json: the rankings have 2\.0 KB"):
        rankings_file_limited(path, LIMITS)


@pytest.mark.parametrize(
    ("content", "words"),
    [(b"{oops", "not valid JSON"), (b"[" * 100_000, "nested too deeply"), (b"\xff", "not valid")],
)
def test_what_is_not_json_is_a_clear_error(content, words):
    with pytest.raises(EvaluationError, match=words):
        rankings_from_bytes(content, UNLIMITED)


def test_no_limits_reads_what_the_limits_refuse(tmp_path):
    deep = {"i2t": {str(q): list(range(100)) for q in range(50)}, "t2i": {}}
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(deep))
    with pytest.raises(RankingLimitError):
        rankings_file_limited(path, LIMITS)
    assert len(rankings_file_limited(path, UNLIMITED)["i2t"]) == 50
    with pytest.raises(EvaluationError, match=r"nowhere\.json: file not found"):
        rankings_file_limited(tmp_path / "nowhere.json", UNLIMITED)
