"""The judgement vocabulary: bit masks for follow-ups and the follow-up rules."""

from __future__ import annotations

import itertools
import re

import pytest

from mitl.judgements import (
    MIDDLE_LEVELS,
    SHORTCOMINGS,
    SHORTCOMINGS_MASK_MAX,
    WRONG_CONCEPTS,
    WRONG_CONCEPTS_MASK_MAX,
    Level,
    mask_to_shortcomings,
    mask_to_wrong_concepts,
    shortcomings_to_mask,
    validate_followups,
    wrong_concepts_to_mask,
)

VOCABULARIES = [
    pytest.param(
        SHORTCOMINGS,
        shortcomings_to_mask,
        mask_to_shortcomings,
        SHORTCOMINGS_MASK_MAX,
        id="shortcomings",
    ),
    pytest.param(
        WRONG_CONCEPTS,
        wrong_concepts_to_mask,
        mask_to_wrong_concepts,
        WRONG_CONCEPTS_MASK_MAX,
        id="wrong_concepts",
    ),
]


def subsets(vocabulary: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Every subset of the vocabulary, of every size from empty to full."""
    return [
        combo
        for size in range(len(vocabulary) + 1)
        for combo in itertools.combinations(vocabulary, size)
    ]


def followups(level: Level, *, required: bool = True, **overrides) -> tuple[int, int]:
    arguments = {"shortcomings": (), "wrong_concepts": (), "other_text": ""}
    arguments.update(overrides)
    return validate_followups(level=level, required=required, **arguments)


# --- bit masks ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("vocabulary", "encode", "decode", "mask_max"), VOCABULARIES)
def test_every_subset_round_trips_through_its_mask(vocabulary, encode, decode, mask_max):
    seen_masks = set()
    for subset in subsets(vocabulary):
        mask = encode(subset)
        assert 0 <= mask <= mask_max
        assert decode(mask) == list(subset)  # combinations keep vocabulary order
        seen_masks.add(mask)
    # Distinct subsets give distinct masks, and together they use every mask up to the max.
    assert seen_masks == set(range(mask_max + 1))


@pytest.mark.parametrize(("vocabulary", "encode", "decode", "mask_max"), VOCABULARIES)
def test_decoding_lists_names_in_vocabulary_order_whatever_the_input_order(
    vocabulary, encode, decode, mask_max
):
    reversed_names = list(reversed(vocabulary))
    assert encode(reversed_names) == mask_max
    assert decode(encode(reversed_names)) == list(vocabulary)


@pytest.mark.parametrize(("vocabulary", "encode", "decode", "mask_max"), VOCABULARIES)
def test_each_name_owns_its_own_bit(vocabulary, encode, decode, mask_max):
    masks = [encode([name]) for name in vocabulary]
    assert all(mask and mask & (mask - 1) == 0 for mask in masks)  # a single bit each
    assert len(set(masks)) == len(vocabulary)


def test_a_repeated_name_encodes_like_a_single_one():
    assert shortcomings_to_mask(["grammar", "grammar"]) == shortcomings_to_mask(["grammar"])


@pytest.mark.parametrize(
    ("encode", "known", "bad_name"),
    [
        (shortcomings_to_mask, "grammar", "blurry"),
        (shortcomings_to_mask, "grammar", "Grammar"),
        (wrong_concepts_to_mask, "color", "texture"),
        (wrong_concepts_to_mask, "color", "wrong_description"),  # a shortcoming, not a concept
    ],
)
def test_an_unknown_name_raises_with_the_name_in_the_message(encode, known, bad_name):
    with pytest.raises(ValueError, match=repr(bad_name)):
        encode([known, bad_name])


# --- follow-up rules ---------------------------------------------------------------------------


@pytest.mark.parametrize("level", [Level.YES, Level.NO])
@pytest.mark.parametrize(
    "answer",
    [
        {"shortcomings": ["grammar"]},
        {"wrong_concepts": ["color"]},
        {"other_text": "the dog is a cat"},
        {
            "shortcomings": ["wrong_description"],
            "wrong_concepts": ["other"],
            "other_text": "x",
        },
    ],
    ids=["shortcoming", "concept", "text", "all"],
)
@pytest.mark.parametrize("required", [True, False])
def test_followups_are_refused_on_the_yes_and_no_answers(level, answer, required):
    with pytest.raises(ValueError, match=re.escape(repr(level.value))):
        followups(level, required=required, **answer)


@pytest.mark.parametrize("level", [Level.YES, Level.NO])
def test_yes_and_no_answers_without_followups_give_empty_masks(level):
    assert followups(level, required=True) == (0, 0)


@pytest.mark.parametrize("level", sorted(MIDDLE_LEVELS))
def test_a_required_middle_answer_without_a_shortcoming_is_refused(level):
    with pytest.raises(ValueError, match="shortcoming"):
        followups(level, required=True)


@pytest.mark.parametrize("level", sorted(MIDDLE_LEVELS))
def test_a_middle_answer_may_be_empty_when_followups_are_not_required(level):
    assert followups(level, required=False) == (0, 0)


@pytest.mark.parametrize("required", [True, False])
def test_wrong_concepts_without_wrong_description_are_refused(required):
    with pytest.raises(ValueError, match="wrong_description"):
        followups(
            Level.WEAK_NO,
            required=required,
            shortcomings=["grammar"],
            wrong_concepts=["color"],
        )


def test_a_required_wrong_description_needs_a_concept():
    with pytest.raises(ValueError, match="concept"):
        followups(Level.WEAK_YES, required=True, shortcomings=["wrong_description"])


def test_wrong_description_without_a_concept_is_fine_when_not_required():
    shortcomings_mask, concepts_mask = followups(
        Level.WEAK_YES, required=False, shortcomings=["wrong_description"]
    )
    assert mask_to_shortcomings(shortcomings_mask) == ["wrong_description"]
    assert concepts_mask == 0


@pytest.mark.parametrize("text", ["", "   \n\t"])
def test_a_required_other_concept_needs_its_text(text):
    with pytest.raises(ValueError, match="other"):
        followups(
            Level.WEAK_NO,
            required=True,
            shortcomings=["wrong_description"],
            wrong_concepts=["other"],
            other_text=text,
        )


def test_other_without_text_is_fine_when_not_required():
    _, concepts_mask = followups(
        Level.WEAK_NO,
        required=False,
        shortcomings=["wrong_description"],
        wrong_concepts=["other"],
    )
    assert mask_to_wrong_concepts(concepts_mask) == ["other"]


@pytest.mark.parametrize("required", [True, False])
def test_text_without_the_other_concept_is_refused(required):
    with pytest.raises(ValueError, match="text box"):
        followups(
            Level.WEAK_YES,
            required=required,
            shortcomings=["wrong_description"],
            wrong_concepts=["color"],
            other_text="it is blue, not red",
        )


def test_a_complete_middle_answer_returns_the_masks_of_its_choices():
    shortcomings = ["not_in_image", "wrong_description"]
    concepts = ["quantity", "other"]
    result = followups(
        Level.WEAK_NO,
        required=True,
        shortcomings=shortcomings,
        wrong_concepts=concepts,
        other_text="  the clock shows the wrong time  ",
    )
    assert result == (shortcomings_to_mask(shortcomings), wrong_concepts_to_mask(concepts))
    assert mask_to_shortcomings(result[0]) == shortcomings
    assert mask_to_wrong_concepts(result[1]) == concepts


def test_unknown_followup_names_are_refused_by_validation_too():
    with pytest.raises(ValueError, match="'typo'"):
        followups(Level.WEAK_YES, required=True, shortcomings=["typo"])
