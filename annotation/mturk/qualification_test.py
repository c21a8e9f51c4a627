"""A batch's qualification round as MTurk's own test: the QuestionForm workers answer, the
AnswerKey MTurk scores it with, and the requirement a HIT type puts on its score.

One question per qualification pair: the image (a signed public link to this platform),
the description, and the four answers as radio buttons. Either YES answer is right for a
positive pair, either NO answer for a negative one (`mitl.quality.golden_answered_right`'s
rule); each right answer scores 1, and the worker's qualification value is the percentage
of pairs answered right (`PercentageMapping`). MTurk tells the worker that value, never
which answer was wrong, and shows the same test on every retry: its pairs are the test's
own (`annotation.qualification.pairs.qualification_test_pairs`), never shown in the
platform's round, whose feedback tells the answers.

Pure: no Django, no boto3.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mitl.judgements import LEVEL_LABELS, POSITIVE_LEVELS, Level
from mitl.qualification import qualification_pairs_to_pass

from .errors import MTurkInputError

SCHEMAS = "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas"
QUESTION_FORM_NS = f"{SCHEMAS}/2017-11-06/QuestionForm.xsd"
ANSWER_KEY_NS = f"{SCHEMAS}/2005-10-01/AnswerKey.xsd"  # the AnswerKey schema's latest version
XML_MAX_BYTES = 65535  # CreateQualificationType: Test and AnswerKey, each
TEST_SECONDS_PER_PAIR = 60
TEST_SECONDS_MIN = 5 * 60
# What each answer means, in a line: the test's overview (the full instructions, with
# examples, are on the HIT page).
ANSWER_MEANINGS: dict[Level, str] = {
    Level.YES: "the description is right about the image, with nothing wrong in it.",
    Level.WEAK_YES: "right about the main things in the image, with a small mistake or gap.",
    Level.WEAK_NO: "mostly wrong for the image, though some of it fits.",
    Level.NO: "the description is not about this image.",
}
IMAGE_SUBTYPES = frozenset({"jpeg", "png", "gif", "webp", "bmp", "tiff"})
_SUBTYPE_ALIASES = {"jpg": "jpeg", "tif": "tiff"}
# Characters XML 1.0 cannot carry at all, not even escaped (a caption may hold them).
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_IDENTIFIER = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class QualificationQuestion:
    """One question of the test: a pair with its known answer."""

    identifier: str  # the QuestionIdentifier, e.g. "pair-1"
    caption: str
    image_url: str  # public HTTPS, signed (the worker's browser loads it from this platform)
    image_subtype: str  # the image's MIME subtype: jpeg, png, …
    positive: bool  # the known answer: YES (either YES level) or NO


def image_subtype(file_name: str) -> str:
    """Return the MIME subtype of an image file from its extension ("photo.JPG" → "jpeg")."""
    extension = file_name.rpartition(".")[2].lower() if "." in file_name else ""
    subtype = _SUBTYPE_ALIASES.get(extension, extension)
    if subtype not in IMAGE_SUBTYPES:
        raise MTurkInputError(
            f"qualification test: cannot tell the image type of {file_name!r} (expected one of "
            f"{', '.join(sorted(IMAGE_SUBTYPES))})"
        )
    return subtype


def question_form_xml(pairs: Sequence[QualificationQuestion], *, title: str) -> str:
    """Return the test's QuestionForm: an overview of the four answers, then one question
    per pair (image, description, the four answers as radio buttons)."""
    _check_pairs(pairs)
    form = ET.Element("QuestionForm", xmlns=QUESTION_FORM_NS)
    overview = ET.SubElement(form, "Overview")
    _text(overview, "Title", title)
    _text(
        overview,
        "Text",
        f"Each of the {len(pairs)} questions shows an image and a description. Say whether "
        "the description is correct for the image, with one of four answers:",
    )
    for level in Level:
        _text(overview, "Text", f"{LEVEL_LABELS[level]}: {ANSWER_MEANINGS[level]}")
    _text(
        overview,
        "Text",
        "Your score is the share of pairs answered right: either YES answer is right when "
        "the description fits, either NO answer when it does not.",
    )
    for number, pair in enumerate(pairs, start=1):
        question = ET.SubElement(form, "Question")
        _text(question, "QuestionIdentifier", pair.identifier)
        _text(question, "DisplayName", f"Pair {number}")
        _text(question, "IsRequired", "true")
        content = ET.SubElement(question, "QuestionContent")
        binary = ET.SubElement(content, "Binary")
        mime = ET.SubElement(binary, "MimeType")
        _text(mime, "Type", "image")
        _text(mime, "SubType", pair.image_subtype)
        _text(binary, "DataURL", pair.image_url)
        _text(binary, "AltText", f"Image of pair {number}")
        _text(content, "Text", f"Description: {pair.caption}")
        selection = ET.SubElement(ET.SubElement(question, "AnswerSpecification"), "SelectionAnswer")
        _text(selection, "StyleSuggestion", "radiobutton")
        selections = ET.SubElement(selection, "Selections")
        for level in Level:
            option = ET.SubElement(selections, "Selection")
            _text(option, "SelectionIdentifier", level.value)
            _text(option, "Text", LEVEL_LABELS[level])
    return _document(form, what="Test")


def answer_key_xml(pairs: Sequence[QualificationQuestion]) -> str:
    """Return the test's AnswerKey: 1 point for either right level of each pair, and the
    qualification value as the percentage of the pairs' total (`MaximumSummedScore`)."""
    _check_pairs(pairs)
    key = ET.Element("AnswerKey", xmlns=ANSWER_KEY_NS)
    for pair in pairs:
        question = ET.SubElement(key, "Question")
        _text(question, "QuestionIdentifier", pair.identifier)
        for level in right_levels(positive=pair.positive):
            option = ET.SubElement(question, "AnswerOption")
            _text(option, "SelectionIdentifier", level.value)
            _text(option, "AnswerScore", "1")
    mapping = ET.SubElement(ET.SubElement(key, "QualificationValueMapping"), "PercentageMapping")
    _text(mapping, "MaximumSummedScore", str(len(pairs)))
    return _document(key, what="AnswerKey")


def right_levels(*, positive: bool) -> tuple[Level, ...]:
    """Return the two right answers: the YES levels for a positive pair, else the NO levels."""
    return tuple(level for level in Level if (level in POSITIVE_LEVELS) == positive)


def time_allowed_seconds(pairs: int) -> int:
    """Return TestDurationInSeconds: a minute per pair, at least five minutes."""
    return max(TEST_SECONDS_MIN, pairs * TEST_SECONDS_PER_PAIR)


def pairs_to_pass(share: float, pairs: int) -> int:
    """Return how many of `pairs` must be right to reach `share` (0.8 of 5 → 4; 2/3 of 3 → 2):
    the platform round's own rule (`mitl.qualification`), so MTurk passes the same workers."""
    if pairs < 1:
        raise MTurkInputError("qualification test: it needs at least one pair")
    return max(1, qualification_pairs_to_pass(pairs, share))


def pass_mark(share: float, pairs: int) -> int:
    """Return the lowest qualification value (a percentage) that passes the test.

    The percentage of the fewest right answers that pass, rounded down: 4 of 5 → 80,
    3 of 4 → 75, 2 of 3 → 66 (66.67%). Rounded down, it holds whether MTurk rounds or
    truncates a worker's percentage, and one answer fewer is always below it (a pair is
    worth at least 2 points with at most 50 pairs). `ceil(share × 100)` would turn away a
    worker with 2 of 3 right at a 2/3 pass share, if MTurk truncates 66.67 to 66.
    """
    if pairs < 1:
        raise MTurkInputError("qualification test: it needs at least one pair")
    return (pairs_to_pass(share, pairs) * 100) // pairs


def qualification_requirement(
    qualification_type_id: str, *, minimum: int, actions_guarded: str
) -> dict[str, Any]:
    """Return the QualificationRequirement that a worker's value be at least `minimum`."""
    return {
        "QualificationTypeId": qualification_type_id,
        "Comparator": "GreaterThanOrEqualTo",
        "IntegerValues": [minimum],
        "ActionsGuarded": actions_guarded,
    }


def _check_pairs(pairs: Sequence[QualificationQuestion]) -> None:
    if not pairs:
        raise MTurkInputError("qualification test: it needs at least one pair")
    identifiers = [pair.identifier for pair in pairs]
    if len(set(identifiers)) != len(identifiers):
        raise MTurkInputError("qualification test: two pairs have the same identifier")
    bad = next((name for name in identifiers if not _IDENTIFIER.match(name)), None)
    if bad is not None:
        raise MTurkInputError(f"qualification test: {bad!r} is not a usable question identifier")
    for pair in pairs:
        if not pair.image_url.startswith(("https://", "http://")):
            raise MTurkInputError(
                f"qualification test: the image of {pair.identifier} needs a public URL "
                f"(got {pair.image_url!r})"
            )
        if pair.image_subtype not in IMAGE_SUBTYPES:
            raise MTurkInputError(
                f"qualification test: {pair.image_subtype!r} is not an image type MTurk shows"
            )


def _text(parent: ET.Element, tag: str, text: str) -> ET.Element:
    """Add a child holding `text`: ElementTree escapes &, < and >; what XML cannot hold goes."""
    element = ET.SubElement(parent, tag)
    element.text = _NOT_XML.sub("", text)
    return element


def _document(root: ET.Element, *, what: str) -> str:
    xml = '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")
    size = len(xml.encode("utf-8"))
    if size > XML_MAX_BYTES:
        raise MTurkInputError(
            f"qualification test: its {what} is {size} bytes; MTurk takes {XML_MAX_BYTES}. "
            "Use fewer qualification pairs (`qualification_pairs`) or shorter descriptions"
        )
    return xml
