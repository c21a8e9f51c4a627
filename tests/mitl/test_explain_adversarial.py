"""Adversarial caption queries: colour, size and antonym substitutions that touch only the
substituted words, the colour-distance threshold, and seeded determinism."""

from __future__ import annotations

import math
import random

import pytest

from mitl.explain.adversarial import (
    LARGE_WORDS,
    NAMED_COLORS,
    PERTURBATION_KINDS,
    SMALL_WORDS,
    Perturbation,
    PerturbationError,
    antonyms,
    color_distance,
    colors_in_texts,
    perturb,
    perturb_all,
)
from mitl.relevance import wordnet as wordnet_module

needs_wordnet = pytest.mark.skipif(
    not wordnet_module.wordnet_available(), reason="WordNet files are not installed"
)


def _draws(text: str, kind: str, n: int = 200, **kwargs: object) -> list[Perturbation | None]:
    return [perturb(text, kind, rng=random.Random(seed), **kwargs) for seed in range(n)]


def _assert_only_substitutions_changed(p: Perturbation) -> None:
    """Rebuild the perturbed text from the original and the spans: nothing else may differ."""
    rebuilt, cursor = "", 0
    for sub in p.substitutions:
        assert p.original[sub.start : sub.end] == sub.old
        assert sub.old != sub.new
        rebuilt += p.original[cursor : sub.start] + sub.new
        cursor = sub.end
    assert rebuilt + p.original[cursor:] == p.text


# --- colour distance ---------------------------------------------------------------------


def test_black_and_white_are_100_apart_and_a_colour_0_from_itself() -> None:
    assert color_distance("black", "white") == pytest.approx(100.0, abs=1e-6)
    assert color_distance("red", "red") == 0.0
    assert color_distance("grey", "gray") == 0.0


def test_color_distance_matches_hand_computed_lab_values() -> None:
    # sRGB 128 -> linear ((128/255 + 0.055) / 1.055) ** 2.4 = 0.21586 -> L* = 116 * Y^(1/3) - 16
    assert color_distance("gray", "black") == pytest.approx(53.585, abs=1e-2)
    # red is L*a*b* (53.2408, 80.0925, 67.2032); black is the origin
    assert color_distance("red", "black") == pytest.approx(
        math.sqrt(53.2408**2 + 80.0925**2 + 67.2032**2), abs=1e-3
    )
    assert color_distance("Red", "BLACK") == color_distance("red", "black")


def test_color_distance_rejects_unknown_names() -> None:
    with pytest.raises(PerturbationError, match="unknown colour 'chartreusey'"):
        color_distance("red", "chartreusey")


def test_named_colors_cover_the_common_colour_words() -> None:
    common = "red green blue yellow purple orange pink brown black white gray grey silver gold"
    assert set(common.split()) | {"beige", "tan", "navy", "maroon", "teal"} <= set(NAMED_COLORS)
    assert all(name.isalpha() and name.islower() for name in NAMED_COLORS)


def test_colors_in_texts_lists_whole_colour_words_in_named_colors_order() -> None:
    texts = ["A grey cat on a redwood bench", "a RED bus", "a bored man"]
    assert colors_in_texts(texts) == ["red", "grey"]


# --- colour perturbations ----------------------------------------------------------------


def test_color_all_changes_the_colour_word_and_nothing_else() -> None:
    text = "A red  bus, parked next to a redwood;  bored driver!"
    for p in _draws(text, "color_all", n=50):
        assert p is not None
        [sub] = p.substitutions
        assert (sub.start, sub.end, sub.old) == (2, 5, "red")
        assert sub.new in NAMED_COLORS
        assert p.text == "A " + sub.new + "  bus, parked next to a redwood;  bored driver!"
        _assert_only_substitutions_changed(p)


def test_colour_substitution_keeps_the_case_of_the_word() -> None:
    p = perturb("Red car next to a RED bus", "color_in", rng=random.Random(0), colors=["blue"])
    assert p is not None
    assert p.text == "Blue car next to a BLUE bus"


def test_a_repeated_colour_gets_the_same_substitute() -> None:
    for p in _draws("a red car and a red bus beside a white van", "color_all", n=50):
        assert p is not None
        first, second, third = p.substitutions
        assert first.new == second.new
        assert third.old == "white"
        _assert_only_substitutions_changed(p)


def test_every_colour_choice_respects_the_distance_threshold() -> None:
    seen = set()
    for p in _draws("a red kite", "color_all", n=400, min_color_distance=95.0):
        assert p is not None
        seen.add(p.substitutions[0].new)
    # orange (61), maroon (51) and pink (90) are closer than 95 to red; khaki (99) is not
    assert seen.isdisjoint({"orange", "pink", "maroon", "crimson", "scarlet", "red"})
    assert all(color_distance("red", c) >= 95.0 for c in seen)
    assert {"khaki", "blue", "black", "white"} <= seen
    assert not {"gray", "grey"} <= seen  # one spelling of grey is a candidate, not two


def test_grey_never_becomes_gray() -> None:
    for p in _draws("a grey cat", "color_all", n=200, min_color_distance=0.0):
        assert p is not None
        assert p.substitutions[0].new not in {"gray", "grey"}
    assert perturb("a grey cat", "color_in", rng=random.Random(0), colors=["gray"]) is None


def test_color_in_draws_only_from_the_given_colours() -> None:
    seen = {
        p.substitutions[0].new
        for p in _draws("a red kite", "color_in", colors=["blue", "green", "red"])
        if p
    }
    assert seen == {"blue", "green"}


def test_color_in_returns_none_when_no_colour_is_far_enough() -> None:
    # crimson is 35 and scarlet 4 from red, under the default threshold of 50
    p = perturb("a red kite", "color_in", rng=random.Random(0), colors=["crimson", "scarlet"])
    assert p is None


def test_color_in_needs_the_dataset_colours() -> None:
    with pytest.raises(PerturbationError, match="colors_in_texts"):
        perturb("a red kite", "color_in", rng=random.Random(0))


def test_texts_without_colour_words_are_not_perturbed() -> None:
    assert perturb("a redwood near a bored man", "color_all", rng=random.Random(0)) is None


def test_hyphenated_colour_words_are_whole_words() -> None:
    p = perturb("a red-haired girl", "color_in", rng=random.Random(0), colors=["blue"])
    assert p is not None
    assert p.text == "a blue-haired girl"


# --- size perturbations ------------------------------------------------------------------


def test_size_swaps_large_and_small_words_both_ways() -> None:
    for p in _draws("A big dog and a Tiny cat, tall trees, short hair.", "size", n=50):
        assert p is not None
        # "tall" and "short" are height and length, not size: they stay.
        big, tiny = p.substitutions
        assert big.new in SMALL_WORDS
        assert tiny.new[0].isupper() and tiny.new.lower() in LARGE_WORDS
        assert "tall trees, short hair." in p.text
        _assert_only_substitutions_changed(p)


def test_size_matches_whole_words_only() -> None:
    text = "the tallest of the smaller bigwigs in shorts"
    assert perturb(text, "size", rng=random.Random(0)) is None


# --- antonyms ----------------------------------------------------------------------------


@needs_wordnet
def test_wordnet_antonyms_of_common_adjectives() -> None:
    assert antonyms("wet") == ("dry",)
    assert antonyms("dry") == ("phlegmy", "sweet", "wet")
    assert antonyms("large") == ("small",)
    assert antonyms("old") == ("new", "young")
    assert antonyms("larger") == ()  # the exact form only, so the grammar holds


@needs_wordnet
def test_antonym_reverses_the_adjectives_of_a_caption() -> None:
    dry_substitutes = set()
    for p in _draws("a wet dog on a dry beach", "antonym", n=100):
        assert p is not None
        wet, dry = p.substitutions
        assert (wet.old, wet.new) == ("wet", "dry")
        assert dry.old == "dry"  # an adjective before a noun, though the tagger says verb
        dry_substitutes.add(dry.new)
        _assert_only_substitutions_changed(p)
    assert dry_substitutes == {"phlegmy", "sweet", "wet"}


@needs_wordnet
def test_antonym_picks_among_several_at_random() -> None:
    texts = {p.text for p in _draws("Two old men near a large bus", "antonym", n=100) if p}
    assert texts == {"Two new men near a small bus", "Two young men near a small bus"}


@needs_wordnet
def test_antonym_leaves_colours_function_words_and_verbs_alone() -> None:
    for text in ["a white dog", "a man on a horse", "people dry their clothes", "a larger dog"]:
        assert perturb(text, "antonym", rng=random.Random(0)) is None, text


# --- whole datasets ----------------------------------------------------------------------

QUERIES = {
    7: "a red car next to a blue bus",
    3: "a big dog on a small boat",
    12: "a man riding a horse",
    5: "Two black cats and a white dog",
    9: "a huge yellow kite",
}


@pytest.mark.parametrize("kind", ["color_all", "size"])
def test_perturb_all_is_deterministic_for_a_seed_and_order_free(kind: str) -> None:
    first = perturb_all(QUERIES, kind, seed=4)
    assert perturb_all(QUERIES, kind, seed=4) == first
    assert perturb_all(dict(reversed(QUERIES.items())), kind, seed=4) == first
    assert perturb_all({9: QUERIES[9]}, kind, seed=4) == {9: first[9]}
    assert list(first) == sorted(first)


def test_perturb_all_keeps_only_changed_queries() -> None:
    assert set(perturb_all(QUERIES, "size")) == {3, 9}
    assert set(perturb_all(QUERIES, "color_all")) == {5, 7, 9}


def test_seeds_give_different_draws() -> None:
    texts = {i: "a red car" for i in range(20)}
    a, b = perturb_all(texts, "color_all", seed=0), perturb_all(texts, "color_all", seed=1)
    assert [p.text for p in a.values()] != [p.text for p in b.values()]
    assert len({p.text for p in a.values()}) > 1  # each query has its own generator


def test_unknown_kinds_and_colours_are_rejected() -> None:
    assert PERTURBATION_KINDS == ("antonym", "color_all", "color_in", "size")
    with pytest.raises(PerturbationError, match="unknown perturbation kind 'colour'"):
        perturb_all(QUERIES, "colour")
    with pytest.raises(PerturbationError, match="unknown colour 'rouge'"):
        perturb("a red car", "color_in", rng=random.Random(0), colors=["rouge"])
    with pytest.raises(PerturbationError, match="min_color_distance"):
        perturb("a red car", "color_all", rng=random.Random(0), min_color_distance=-1)
