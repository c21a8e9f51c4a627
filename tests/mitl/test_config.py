"""Batch configuration: defaults, and a clear ConfigError for every bad value."""

from __future__ import annotations

import json
from types import MappingProxyType

import pytest

from mitl.config import BatchConfig, ConfigError, batch_config, parse_batch_config

ANNOTATORS = ["tfidf", "clip"]


def parse(**values) -> BatchConfig:
    return parse_batch_config({"annotators": ANNOTATORS, **values})


def test_defaults_give_18_items_per_hit_k_5_and_depth_25():
    config = parse_batch_config({"annotators": ["tfidf"]})
    assert (config.hit_size, config.golden_tp, config.golden_tn) == (16, 1, 1)
    assert config.items_per_hit == 18
    assert config.k == 5
    assert config.golden_negative_depth == 25
    assert config.aggregation == "eccv"
    assert config.followups is True
    assert config.annotators == ("tfidf",)


def test_items_per_hit_counts_tasks_and_both_kinds_of_golden():
    config = parse(hit_size=10, golden_tp=2, golden_tn=0)
    assert config.items_per_hit == 12


def test_given_values_override_the_defaults():
    config = parse(k=3, golden_negative_depth=3, hit_size=8, seed=42, followups=False)
    assert (config.k, config.golden_negative_depth, config.hit_size) == (3, 3, 8)
    assert config.seed == 42
    assert config.followups is False


def test_annotators_are_kept_in_order_as_a_tuple():
    config = parse_batch_config({"annotators": ["b", "a", "c"]})
    assert config.annotators == ("b", "a", "c")


def test_a_read_only_mapping_is_accepted():
    config = parse_batch_config(MappingProxyType({"annotators": ["x"], "k": 2}))
    assert config.k == 2


@pytest.mark.parametrize(
    ("raw", "key", "bad_value"),
    [
        pytest.param({"k": 0}, "k", "0", id="k-zero"),
        pytest.param({"k": 101}, "k", "101", id="k-too-large"),
        pytest.param({"k": -1}, "k", "-1", id="k-negative"),
        pytest.param({"k": 2.5}, "k", "2.5", id="k-float"),
        pytest.param({"k": "5"}, "k", "'5'", id="k-string"),
        pytest.param({"k": True}, "k", "True", id="k-bool"),
        pytest.param({"hit_size": False}, "hit_size", "False", id="hit-size-bool"),
        pytest.param({"seed": True}, "seed", "True", id="seed-bool"),
        pytest.param({"hit_size": 0}, "hit_size", "0", id="hit-size-zero"),
        pytest.param({"golden_tp": 11}, "golden_tp", "11", id="golden-tp-too-many"),
        pytest.param({"golden_tn": -1}, "golden_tn", "-1", id="golden-tn-negative"),
        pytest.param({"assignments_per_hit": 0}, "assignments_per_hit", "0", id="assignments"),
        pytest.param({"seed": -3}, "seed", "-3", id="seed-negative"),
        pytest.param({"golden_suspend_after": -1}, "golden_suspend_after", "-1", id="suspend-neg"),
        pytest.param({"golden_suspend_after": 51}, "golden_suspend_after", "51", id="suspend-big"),
        pytest.param(
            {"golden_suspend_after": "3"}, "golden_suspend_after", "'3'", id="suspend-string"
        ),
        pytest.param({"n_image_queries": None}, "n_image_queries", "None", id="n-none"),
        pytest.param({"followups": "yes"}, "followups", "'yes'", id="followups-string"),
        pytest.param({"followups": 1}, "followups", "1", id="followups-int"),
        pytest.param({"aggregation": "mean"}, "aggregation", "'mean'", id="aggregation"),
        pytest.param({"colour": "red"}, "colour", "'colour'", id="unknown-key"),
        pytest.param(
            {"k": 10, "golden_negative_depth": 4},
            "golden_negative_depth",
            "(4)",
            id="depth-below-k",
        ),
    ],
)
def test_a_bad_value_gives_a_config_error_naming_the_key_and_the_value(raw, key, bad_value):
    with pytest.raises(ConfigError) as caught:
        parse_batch_config({"annotators": ANNOTATORS, **raw})
    message = str(caught.value)
    assert f"`{key}`" in message or repr(key) in message  # quoted, so "k" is not just a letter
    assert bad_value in message
    assert caught.value.key == key  # forms and the API put the message beside this key


def test_depth_below_k_names_both_values():
    with pytest.raises(ConfigError) as caught:
        parse(k=10, golden_negative_depth=4)
    message = str(caught.value)
    assert "`k` (10)" in message
    assert "(4)" in message


def test_depth_equal_to_k_is_allowed():
    assert parse(k=7, golden_negative_depth=7).golden_negative_depth == 7


def test_the_default_depth_must_still_cover_a_larger_k():
    with pytest.raises(ConfigError, match="golden_negative_depth"):
        parse(k=30)


@pytest.mark.parametrize(
    "annotators",
    [
        pytest.param([], id="empty-list"),
        pytest.param((), id="empty-tuple"),
        pytest.param("tfidf", id="a-string"),
        pytest.param({"tfidf": 1}, id="a-dict"),
        pytest.param(None, id="none"),
        pytest.param(["tfidf", 3], id="not-all-strings"),
    ],
)
def test_annotators_must_be_a_non_empty_list_of_names(annotators):
    with pytest.raises(ConfigError) as caught:
        parse_batch_config({"annotators": annotators})
    message = str(caught.value)
    assert "annotators" in message
    assert repr(annotators) in message


def test_missing_annotators_are_an_error():
    with pytest.raises(ConfigError, match="annotators"):
        parse_batch_config({"k": 3})


def test_an_annotator_listed_twice_is_an_error():
    with pytest.raises(ConfigError) as caught:
        parse_batch_config({"annotators": ["tfidf", "clip", "tfidf"]})
    message = str(caught.value)
    assert "annotators" in message
    assert "twice" in message
    assert "'tfidf'" in message


def test_zero_queries_in_both_directions_is_an_error_naming_both_keys():
    with pytest.raises(ConfigError) as caught:
        parse(n_image_queries=0, n_caption_queries=0)
    message = str(caught.value)
    assert "n_image_queries" in message
    assert "n_caption_queries" in message


@pytest.mark.parametrize(
    ("n_image_queries", "n_caption_queries"),
    [(0, 1), (1, 0)],
)
def test_queries_in_one_direction_only_are_enough(n_image_queries, n_caption_queries):
    config = parse(n_image_queries=n_image_queries, n_caption_queries=n_caption_queries)
    assert config.n_image_queries + config.n_caption_queries == 1


@pytest.mark.parametrize("raw", [["annotators"], "annotators", None, 5])
def test_a_config_that_is_not_an_object_is_an_error(raw):
    with pytest.raises(ConfigError, match=type(raw).__name__):
        parse_batch_config(raw)


def test_a_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


def test_unknown_key_error_reports_one_of_the_unknown_keys_and_lists_the_known_ones():
    with pytest.raises(ConfigError) as caught:
        parse(zeta=1, alpha=2)
    message = str(caught.value)
    assert "'alpha'" in message  # the first in sorted order
    assert "golden_negative_depth" in message  # the known keys help fix a typo


@pytest.mark.parametrize(
    "raw",
    [
        {"annotators": ["tfidf"]},
        {
            "annotators": ["b", "a"],
            "n_image_queries": 7,
            "n_caption_queries": 0,
            "k": 4,
            "golden_negative_depth": 9,
            "hit_size": 12,
            "golden_tp": 2,
            "golden_tn": 0,
            "assignments_per_hit": 3,
            "golden_suspend_after": 0,
            "followups": False,
            "aggregation": "eccv",
            "seed": 123,
        },
    ],
    ids=["defaults", "everything-set"],
)
def test_to_json_round_trips_through_parse_batch_config(raw):
    config = parse_batch_config(raw)
    data = config.to_json()
    # It is plain JSON: it survives a dump and load unchanged.
    reloaded = json.loads(json.dumps(data))
    assert reloaded == data
    assert isinstance(data["annotators"], list)
    assert parse_batch_config(reloaded) == config
    for key, value in raw.items():
        assert data[key] == value


def test_an_error_about_the_whole_config_names_no_key():
    with pytest.raises(ConfigError) as caught:
        parse(n_image_queries=0, n_caption_queries=0)
    assert caught.value.key is None


def test_batch_config_reads_a_stored_config_with_the_defaults_filled_in():
    class Stored:  # anything with a raw `config`, as a Batch row has
        config = {"annotators": ["tfidf"], "followups": False}

    config = batch_config(Stored())
    assert config.followups is False
    assert config.golden_policy == "approve_or_flag"
    assert config.assignment_minutes == 30
    assert config.golden_suspend_after == 3


def test_relevance_names_known_proxies_once_and_round_trips():
    config = parse_batch_config({"annotators": ["a"], "relevance": ["cider_d", "bow"]})
    assert config.relevance == ("cider_d", "bow")
    assert parse_batch_config(json.loads(json.dumps(config.to_json()))) == config
    assert parse_batch_config({"annotators": ["a"]}).relevance == ()


@pytest.mark.parametrize("bad", [["spice"], ["bow", "bow"], "bow", [1], ["meteor"]])
def test_relevance_refuses_unknown_repeated_or_malformed_proxies(bad):
    with pytest.raises(ConfigError) as caught:
        parse_batch_config({"annotators": ["a"], "relevance": bad})
    assert caught.value.key == "relevance"
