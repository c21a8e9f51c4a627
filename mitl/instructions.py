"""The instructions workers read: what each answer and reason means, and worked examples.

`instructions_content` freezes the guide and a batch's examples into one JSON snapshot,
stored as a version of the batch's instructions (`annotation.models.Instructions`): the
HIT pages render that snapshot only, so a later change of the prose or the labels here
never changes what an earlier assignment was shown. `parse_examples` checks examples
given as JSON (the wizard, the `batch_instructions` command) with messages that say how
to fix them. Pure Python: no Django import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .judgements import (
    LEVEL_LABELS,
    MIDDLE_LEVELS,
    SHORTCOMING_LABELS,
    WRONG_CONCEPT_LABELS,
    Level,
    validate_followups,
)

CONTENT_FORMAT = 1  # bump when the snapshot's shape changes; pages read older ones too
NOTE_MAX = 1000  # characters of an example's note
ID_MAX = 2**63 - 1  # the dataset ids are 64-bit integers in the database
EXAMPLE_KEYS = frozenset(
    {"level", "image", "caption", "caption_text", "note", "shortcomings", "wrong_concepts"}
)

TITLE = "Is the image correctly described?"
INTRODUCTION = (
    "Each pair shows an image and a description. Read the description, look at the image, "
    "and say how well the description fits the image, on its own: it does not matter what "
    "other images or descriptions the HIT shows."
)

ANSWER_MEANINGS: dict[Level, str] = {
    Level.YES: (
        "Everything the description says is in the image and right: the main things, their "
        "number, colours, actions and places. It may leave out minor details; a description "
        "does not have to mention everything to be correct."
    ),
    Level.WEAK_YES: (
        "The description is about this image and gets the main things right, but something "
        "is off: a detail is wrong (a colour, a number), it describes only a minor part of "
        "the image, or it is hard to read. You would still accept it as a description of "
        "this image. Say what is off."
    ),
    Level.WEAK_NO: (
        "Some of the description fits, but the main part of it is wrong or is not in the "
        "image: you would not accept it as a description of this image. Say what is wrong."
    ),
    Level.NO: (
        "The description is about something else: its main things are not in the image, "
        "or it describes a different scene altogether."
    ),
}

SHORTCOMING_MEANINGS: dict[str, str] = {
    "not_in_image": (
        "The description mentions things you cannot see in the image (an object, a person, "
        "an animal that is not there)."
    ),
    "misses_main_concept": (
        "The description is about a minor part of the image and leaves out what the image "
        "is mainly about: the largest or most eye-catching thing in it."
    ),
    "wrong_description": (
        "The main things are there, but the description gets something about them wrong. "
        "Then say which concept is wrong (below)."
    ),
    "grammar": (
        "The sentence is broken, garbled or so confusing that you cannot tell for sure what "
        "it means."
    ),
}

WRONG_CONCEPT_MEANINGS: dict[str, str] = {
    "quantity": "The number is wrong: “two dogs” when there are three, “a cake” for many.",
    "color": "A colour, texture or material is wrong: “a red car” for a blue one, “wooden” "
    "for metal.",
    "species": "The kind of thing is wrong: a cat called a dog, a triangle called a square.",
    "gender": "A person's gender is wrong: “a man” for a woman.",
    "age": "An age is wrong: “a child” for an adult, “a puppy” for a grown dog.",
    "action": "What someone does is wrong: “running” for sitting, “eating” for cooking.",
    "emotion": "A feeling or expression is wrong: “smiling” for crying.",
    "location": "A place or position is wrong: “on the left” for the right, “at the beach” "
    "for a park.",
    "orientation": "Which way something faces or lies is wrong: “upside down”, “facing the "
    "camera” when it faces away.",
    "other": "Any other concept (a size, a shape, a brand): describe it in the text box.",
}

ADVICE: tuple[str, ...] = (
    "Judge the main things first: the largest or most eye-catching objects, people or "
    "animals, and what they do. A description that gets those right is at least "
    "“Partially YES”; one that gets them wrong is at most “Mostly NO”.",
    "Count when the description gives a number, and compare colours and positions: these "
    "details are often what separates “100% YES” from “Partially YES”.",
    "Be strict but fair: a correct description that leaves details out is still "
    "“100% YES”; a single wrong detail about the main things makes it “Partially YES” at "
    "best; a description mostly about things that are not there is “100% NO”.",
    "When you are unsure between two answers, take the one closer to the middle and say "
    "why: the reasons help as much as the answer.",
    "Some pairs have a known answer and check the quality of the work.",
)


class ExamplesError(ValueError):
    """Examples that cannot be used, with a message that says which one and how to fix it."""


@dataclass(frozen=True)
class Example:
    """A worked example: a pair of the batch's dataset and its right answer, explained."""

    level: Level
    image: int  # the dataset's own image id (Image.ext_id)
    caption: int  # the dataset's own caption id (Caption.ext_id)
    caption_text: str = ""  # filled from the dataset when the instructions are saved
    note: str = ""  # why the answer is what it is
    shortcomings: tuple[str, ...] = ()
    wrong_concepts: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Return the example as `parse_examples` reads it."""
        return {
            "level": self.level.value,
            "image": self.image,
            "caption": self.caption,
            "caption_text": self.caption_text,
            "note": self.note,
            "shortcomings": list(self.shortcomings),
            "wrong_concepts": list(self.wrong_concepts),
        }


def parse_examples(raw: Any) -> list[Example]:
    """Check examples given as JSON and return them in the order of the answers.

    `raw` is a list of objects (or `{"examples": [...]}`), each with `level` (one of
    yes, weak_yes, weak_no, no), `image` and `caption` (the dataset's own ids), and
    optionally `note`, `caption_text`, and for the two middle levels `shortcomings` and
    `wrong_concepts`. At most one example per level. Raise ExamplesError saying what is
    wrong.
    """
    if isinstance(raw, Mapping) and set(raw) == {"examples"}:
        raw = raw["examples"]
    if not isinstance(raw, list):
        raise ExamplesError(
            'examples must be a JSON list of objects like {"level": "yes", "image": 12, '
            '"caption": 61, "note": "…"} (or {"examples": [...]})'
        )
    examples = [_parse_one(index, entry) for index, entry in enumerate(raw, start=1)]
    examples_check_levels(examples)
    return examples_sorted(examples)


def examples_check_levels(examples: Iterable[Example]) -> None:
    """Raise ExamplesError when two examples show the same answer."""
    seen: set[Level] = set()
    for example in examples:
        if example.level in seen:
            raise ExamplesError(
                f"two examples for “{LEVEL_LABELS[example.level]}”: give at most one per answer"
            )
        seen.add(example.level)


def examples_sorted(examples: Iterable[Example]) -> list[Example]:
    """Return the examples in the order of the answers (100% YES first)."""
    order = list(Level)
    return sorted(examples, key=lambda example: order.index(example.level))


def _parse_one(index: int, entry: Any) -> Example:
    where = f"example {index}"
    if not isinstance(entry, Mapping):
        raise ExamplesError(f"{where}: must be an object with level, image, caption and note")
    unknown = sorted(set(entry) - EXAMPLE_KEYS)
    if unknown:
        raise ExamplesError(
            f"{where}: unknown key {unknown[0]!r}; expected {', '.join(sorted(EXAMPLE_KEYS))}"
        )
    level = _level(where, entry.get("level"))
    where = f"{where} ({level.value})"
    note = _text(where, entry, "note")
    if len(note) > NOTE_MAX:
        raise ExamplesError(f"{where}: the note is {len(note)} characters long; at most {NOTE_MAX}")
    shortcomings = _names(where, entry, "shortcomings")
    wrong_concepts = _names(where, entry, "wrong_concepts")
    try:
        validate_followups(
            level=level,
            shortcomings=shortcomings,
            wrong_concepts=wrong_concepts,
            other_text="",
            required=False,
        )
    except ValueError as exc:
        raise ExamplesError(f"{where}: {exc}") from None
    return Example(
        level=level,
        image=_id(where, entry, "image"),
        caption=_id(where, entry, "caption"),
        caption_text=_text(where, entry, "caption_text"),
        note=note,
        shortcomings=shortcomings,
        wrong_concepts=wrong_concepts,
    )


def _level(where: str, value: Any) -> Level:
    try:
        return Level(value)
    except ValueError:
        names = ", ".join(level.value for level in Level)
        raise ExamplesError(f"{where}: `level` must be one of {names} (got {value!r})") from None


def _id(where: str, entry: Mapping[str, Any], key: str) -> int:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= ID_MAX:
        raise ExamplesError(
            f"{where}: `{key}` must be the dataset's {key} id, a whole number from 0 to "
            f"{ID_MAX} (got {value!r})"
        )
    return value


def _text(where: str, entry: Mapping[str, Any], key: str) -> str:
    value = entry.get(key, "")
    if not isinstance(value, str):
        raise ExamplesError(f"{where}: `{key}` must be text (got {value!r})")
    return value.strip()


def _names(where: str, entry: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise ExamplesError(f"{where}: `{key}` must be a list of names")
    return tuple(dict.fromkeys(value))


def example_note(example: Example) -> str:
    """Explain an example's answer from its level and reasons (for proposed examples)."""
    if example.level == Level.YES:
        return "Everything the description says is in the image, as it says."
    if example.level == Level.NO:
        return "Nothing the description names is in the image: it is about something else."
    start = "Mostly right, but" if example.level == Level.WEAK_YES else "Mostly wrong:"
    reasons = "; ".join(SHORTCOMING_LABELS[name].lower() for name in example.shortcomings)
    text = f"{start} {reasons or 'something is off'}"
    if example.wrong_concepts:
        concepts = ", ".join(WRONG_CONCEPT_LABELS[name].lower() for name in example.wrong_concepts)
        text += f" (wrong: {concepts})"
    return text + "."


def instructions_content(examples: Sequence[Example]) -> dict[str, Any]:
    """Return the snapshot workers are shown: the guide, and the examples in answer order."""
    return {
        "format": CONTENT_FORMAT,
        "title": TITLE,
        "introduction": INTRODUCTION,
        "answers": [
            {
                "level": level.value,
                "label": LEVEL_LABELS[level],
                "meaning": ANSWER_MEANINGS[level],
                "asks_why": level in MIDDLE_LEVELS,
            }
            for level in Level
        ],
        "shortcomings": _entries(SHORTCOMING_LABELS, SHORTCOMING_MEANINGS),
        "wrong_concepts": _entries(WRONG_CONCEPT_LABELS, WRONG_CONCEPT_MEANINGS),
        "advice": list(ADVICE),
        "examples": [_example_content(example) for example in examples_sorted(examples)],
    }


def _entries(labels: Mapping[str, str], meanings: Mapping[str, str]) -> list[dict[str, str]]:
    return [
        {"name": name, "label": label, "meaning": meanings[name]} for name, label in labels.items()
    ]


def _example_content(example: Example) -> dict[str, Any]:
    """An example as stored: its ids and text, with the labels of its answer and reasons."""
    return {
        **example.to_json(),
        "answer": LEVEL_LABELS[example.level],
        "shortcoming_labels": [SHORTCOMING_LABELS[name] for name in example.shortcomings],
        "wrong_concept_labels": [WRONG_CONCEPT_LABELS[name] for name in example.wrong_concepts],
    }


def content_examples(content: Mapping[str, Any]) -> list[Example]:
    """Return the examples of a stored snapshot (to copy them into a new version)."""
    return parse_examples(
        [{key: entry[key] for key in EXAMPLE_KEYS if key in entry} for entry in content["examples"]]
    )
