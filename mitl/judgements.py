"""The judgement vocabulary shared by the crowd UI, the simulated crowd and aggregation.

Pure Python: no Django import, so `mitl/` modules and the models can both use it.
Shortcomings and wrong concepts are stored as bit masks, which lets the database check
that only known flags are set and that follow-ups exist only for the two middle levels.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class Level(StrEnum):
    """The four answers to "Is the image correctly described?"."""

    YES = "yes"  # "100% YES"
    WEAK_YES = "weak_yes"  # "Partially YES, but…"
    WEAK_NO = "weak_no"  # "Mostly NO, because…"
    NO = "no"  # "100% NO"


LEVEL_LABELS: dict[Level, str] = {
    Level.YES: "100% YES",
    Level.WEAK_YES: "Partially YES, but…",
    Level.WEAK_NO: "Mostly NO, because…",
    Level.NO: "100% NO",
}

# ECCV Caption rule: the two YES answers make a positive.
POSITIVE_LEVELS: frozenset[Level] = frozenset({Level.YES, Level.WEAK_YES})
# The levels that ask why (the follow-up questions).
MIDDLE_LEVELS: frozenset[Level] = frozenset({Level.WEAK_YES, Level.WEAK_NO})
# ECCV Caption eq. E.4: graded relevance of each answer.
GRADED_SCORE: dict[Level, float] = {
    Level.YES: 1.0,
    Level.WEAK_YES: 0.5,
    Level.WEAK_NO: 0.0,
    Level.NO: 0.0,
}

SHORTCOMINGS: tuple[str, ...] = (
    "not_in_image",  # describes concepts that do not appear in the image
    "misses_main_concept",  # does not describe the main concepts
    "wrong_description",  # describes the main concepts in a wrong way
    "grammar",  # grammatically incorrect or confusing
)

WRONG_CONCEPTS: tuple[str, ...] = (
    "quantity",
    "color",
    "species",
    "gender",
    "age",
    "action",
    "emotion",
    "location",
    "orientation",
    "other",
)

# What the annotator reads, in the order of the ECCV Caption interface.
SHORTCOMING_LABELS: dict[str, str] = {
    "not_in_image": "It describes concepts that do not appear in the image",
    "misses_main_concept": "It does not describe the main concepts of the image",
    "wrong_description": "It describes the main concepts in a wrong way",
    "grammar": "It is grammatically incorrect or confusing",
}
WRONG_CONCEPT_LABELS: dict[str, str] = {
    "quantity": "Quantity",
    "color": "Colour, texture or material",
    "species": "Species or object class",
    "gender": "Gender",
    "age": "Age",
    "action": "Action",
    "emotion": "Emotion",
    "location": "Location",
    "orientation": "Orientation",
    "other": "Others",
}

OTHER_TEXT_MAX = 500  # characters of the "other" concept's text box

SHORTCOMINGS_MASK_MAX = (1 << len(SHORTCOMINGS)) - 1
WRONG_CONCEPTS_MASK_MAX = (1 << len(WRONG_CONCEPTS)) - 1


def _encode(names: Iterable[str], vocabulary: tuple[str, ...], what: str) -> int:
    mask = 0
    for name in names:
        if name not in vocabulary:
            raise ValueError(f"unknown {what} {name!r}; expected one of {', '.join(vocabulary)}")
        mask |= 1 << vocabulary.index(name)
    return mask


def _decode(mask: int, vocabulary: tuple[str, ...]) -> list[str]:
    return [name for bit, name in enumerate(vocabulary) if mask & (1 << bit)]


def shortcomings_to_mask(names: Iterable[str]) -> int:
    """Encode shortcoming names as a bit mask; raise ValueError on an unknown name."""
    return _encode(names, SHORTCOMINGS, "shortcoming")


def mask_to_shortcomings(mask: int) -> list[str]:
    """Decode a shortcomings bit mask into names, in vocabulary order."""
    return _decode(mask, SHORTCOMINGS)


def wrong_concepts_to_mask(names: Iterable[str]) -> int:
    """Encode wrong-concept names as a bit mask; raise ValueError on an unknown name."""
    return _encode(names, WRONG_CONCEPTS, "wrong concept")


def mask_to_wrong_concepts(mask: int) -> list[str]:
    """Decode a wrong-concepts bit mask into names, in vocabulary order."""
    return _decode(mask, WRONG_CONCEPTS)


def validate_followups(
    *,
    level: Level,
    shortcomings: Iterable[str],
    wrong_concepts: Iterable[str],
    other_text: str,
    required: bool,
) -> tuple[int, int]:
    """Check one answer's follow-ups and return (shortcomings mask, wrong concepts mask).

    Follow-ups belong to the two middle levels only. When `required` (the batch asks why),
    a middle answer needs at least one shortcoming, "wrong_description" needs at least one
    wrong concept, and "other" needs its text. Raise ValueError saying what is wrong.
    """
    shortcoming_mask = shortcomings_to_mask(shortcomings)
    concept_mask = wrong_concepts_to_mask(wrong_concepts)
    names = mask_to_shortcomings(shortcoming_mask)
    concepts = mask_to_wrong_concepts(concept_mask)
    other_text = other_text.strip()
    if level not in MIDDLE_LEVELS:
        if shortcoming_mask or concept_mask or other_text:
            raise ValueError(
                f"follow-up answers are only for the middle levels, not {level.value!r}"
            )
        return 0, 0
    if required and not names:
        raise ValueError(
            "choose at least one shortcoming for a 'Partially YES' or 'Mostly NO' answer"
        )
    if concepts and "wrong_description" not in names:
        raise ValueError("wrong concepts need the shortcoming 'wrong_description'")
    if required and "wrong_description" in names and not concepts:
        raise ValueError("say which concept is described in a wrong way")
    if "other" in concepts and required and not other_text:
        raise ValueError("describe the 'other' wrong concept in the text box")
    if other_text and "other" not in concepts:
        raise ValueError("the text box is only for the 'other' wrong concept")
    if len(other_text) > OTHER_TEXT_MAX:
        raise ValueError(
            f"the 'other' text is {len(other_text)} characters long; at most {OTHER_TEXT_MAX}"
        )
    return shortcoming_mask, concept_mask
