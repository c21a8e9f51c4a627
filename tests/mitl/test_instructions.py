"""The instructions' guide and examples: checking examples given as JSON, the snapshot workers
are shown, and the examples picked from a synthetic dataset's truth."""

from __future__ import annotations

import json
import re

import pytest

from mitl.instructions import (
    CONTENT_FORMAT,
    NOTE_MAX,
    Example,
    ExamplesError,
    content_examples,
    example_note,
    instructions_content,
    parse_examples,
)
from mitl.judgements import (
    SHORTCOMING_LABELS,
    SHORTCOMINGS,
    WRONG_CONCEPT_LABELS,
    WRONG_CONCEPTS,
    Level,
)
from mitl.synthetic.examples import scene_text, synthetic_examples
from mitl.synthetic.generation import generate
from mitl.synthetic.scenes import CaptionSpec, ObjectGroup, Phrase, Scene, SyntheticDataset
from mitl.synthetic.truth import judge

WEAK_YES = {
    "level": "weak_yes",
    "image": 20,
    "caption": 97,
    "note": "The triangle is green, not red.",
    "shortcomings": ["wrong_description"],
    "wrong_concepts": ["color"],
}


# --- parse_examples -------------------------------------------------------------------------


def test_examples_come_back_in_the_order_of_the_answers():
    raw = [
        {"level": "no", "image": 3, "caption": 40},
        WEAK_YES,
        {"level": "yes", "image": 1, "caption": 5, "note": "  all right  "},
    ]
    examples = parse_examples(raw)
    assert [e.level for e in examples] == [Level.YES, Level.WEAK_YES, Level.NO]
    assert examples[0] == Example(level=Level.YES, image=1, caption=5, note="all right")
    assert examples[1].shortcomings == ("wrong_description",)
    assert examples[1].wrong_concepts == ("color",)


def test_an_examples_object_is_read_like_its_list():
    assert parse_examples({"examples": [WEAK_YES]}) == parse_examples([WEAK_YES])


def test_an_example_round_trips_through_its_json():
    (example,) = parse_examples([WEAK_YES])
    assert parse_examples(json.loads(json.dumps([example.to_json()]))) == [example]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"level": "yes"}, "must be a JSON list"),
        (["yes"], "example 1: must be an object"),
        ([{"level": "maybe", "image": 1, "caption": 2}], "`level` must be one of yes, weak_yes"),
        ([{"level": "yes", "image": "1", "caption": 2}], "example 1 (yes): `image` must be"),
        ([{"level": "yes", "image": 1, "caption": -2}], "`caption` must be the dataset's caption"),
        ([{"level": "yes", "image": True, "caption": 2}], "`image` must be"),
        # Larger than the database's 64-bit ids: refused here, not a crash in the query.
        ([{"level": "yes", "image": 2**63, "caption": 2}], "a whole number from 0 to"),
        ([{"level": "yes", "image": 1, "caption": 2, "colour": "red"}], "unknown key 'colour'"),
        ([{"level": "yes", "image": 1, "caption": 2, "note": 5}], "`note` must be text"),
        (
            [{"level": "yes", "image": 1, "caption": 2, "note": "x" * (NOTE_MAX + 1)}],
            f"at most {NOTE_MAX}",
        ),
        (
            [{"level": "yes", "image": 1, "caption": 2, "shortcomings": ["grammar"]}],
            "only for the middle levels",
        ),
        (
            [{"level": "weak_no", "image": 1, "caption": 2, "shortcomings": ["rude"]}],
            "unknown shortcoming 'rude'",
        ),
        (
            [{"level": "weak_no", "image": 1, "caption": 2, "wrong_concepts": ["color"]}],
            "wrong concepts need the shortcoming 'wrong_description'",
        ),
        (
            [{"level": "weak_no", "image": 1, "caption": 2, "shortcomings": "grammar"}],
            "`shortcomings` must be a list of names",
        ),
        (
            [{"level": "no", "image": 1, "caption": 2}, {"level": "no", "image": 3, "caption": 4}],
            "two examples for “100% NO”: give at most one per answer",
        ),
    ],
)
def test_bad_examples_are_refused_saying_which_and_why(raw, message):
    with pytest.raises(ExamplesError, match=re.escape(message)):
        parse_examples(raw)


# --- the snapshot ---------------------------------------------------------------------------


def test_the_snapshot_holds_the_guide_and_the_examples_with_their_labels():
    examples = parse_examples([{"level": "no", "image": 3, "caption": 40}, WEAK_YES])
    content = instructions_content(examples)
    assert content["format"] == CONTENT_FORMAT
    assert [a["label"] for a in content["answers"]] == [
        "100% YES",
        "Partially YES, but…",
        "Mostly NO, because…",
        "100% NO",
    ]
    assert [a["asks_why"] for a in content["answers"]] == [False, True, True, False]
    assert all(a["meaning"] for a in content["answers"])
    assert [s["name"] for s in content["shortcomings"]] == list(SHORTCOMINGS)
    assert [c["name"] for c in content["wrong_concepts"]] == list(WRONG_CONCEPTS)
    assert all(entry["meaning"] for entry in content["shortcomings"] + content["wrong_concepts"])
    assert content["shortcomings"][0]["label"] == SHORTCOMING_LABELS["not_in_image"]
    assert content["advice"]
    weak_yes, no = content["examples"]
    assert weak_yes["answer"] == "Partially YES, but…"
    assert weak_yes["shortcoming_labels"] == ["It describes the main concepts in a wrong way"]
    assert weak_yes["wrong_concept_labels"] == [WRONG_CONCEPT_LABELS["color"]]
    assert weak_yes["note"] == "The triangle is green, not red."
    assert (no["level"], no["image"], no["caption"], no["answer"]) == ("no", 3, 40, "100% NO")
    json.dumps(content)  # storable as it is


def test_a_snapshot_gives_back_its_examples():
    examples = parse_examples([WEAK_YES, {"level": "yes", "image": 1, "caption": 5}])
    assert content_examples(instructions_content(examples)) == examples


def test_a_note_explains_a_middle_answer_by_its_reasons():
    example = Example(
        level=Level.WEAK_NO,
        image=1,
        caption=2,
        shortcomings=("not_in_image", "wrong_description"),
        wrong_concepts=("quantity",),
    )
    assert example_note(example) == (
        "Mostly wrong: it describes concepts that do not appear in the image; it describes the "
        "main concepts in a wrong way (wrong: quantity)."
    )
    assert example_note(Example(level=Level.YES, image=1, caption=2)) == (
        "Everything the description says is in the image, as it says."
    )


# --- examples from a synthetic dataset ------------------------------------------------------


@pytest.fixture(scope="module")
def generated():
    return generate(n_images=40, seed=7)


def test_one_example_per_answer_whose_truth_is_that_answer(generated):
    examples = synthetic_examples(generated, seed=1)
    assert [e.level for e in examples] == list(Level)
    for example in examples:
        truth = judge(generated.scene(example.image), generated.caption(example.caption))
        assert truth.level == example.level
        assert truth.shortcomings == example.shortcomings
        assert truth.wrong_concepts == example.wrong_concepts
        assert example.caption_text == generated.caption(example.caption).text
        assert example.note.endswith(
            f"The image shows {scene_text(generated.scene(example.image))}."
        )


def test_the_middle_examples_have_one_plain_reason(generated):
    by_level = {e.level: e for e in synthetic_examples(generated, seed=1)}
    assert by_level[Level.WEAK_YES].shortcomings == ("wrong_description",)
    assert len(by_level[Level.WEAK_YES].wrong_concepts) == 1
    assert by_level[Level.WEAK_NO].shortcomings == ("not_in_image",)


def test_the_same_seed_proposes_the_same_examples(generated):
    assert synthetic_examples(generated, seed=3) == synthetic_examples(generated, seed=3)


def test_examples_use_only_the_allowed_ids(generated):
    images = {s.image_id for s in generated.scenes[:20]}
    captions = {c.caption_id for c in generated.captions if c.caption_id % 2}
    examples = synthetic_examples(generated, seed=0, images=images, captions=captions)
    assert examples
    assert all(e.image in images and e.caption in captions for e in examples)
    assert synthetic_examples(generated, seed=0, captions=set()) == []


def test_the_note_names_the_wrong_detail_and_what_the_image_shows():
    scene = Scene(
        image_id=1,
        groups=(
            ObjectGroup("square", "red", 2, "large", "left"),
            ObjectGroup("circle", "blue", 1, "small", "right"),
        ),
    )
    caption = CaptionSpec(
        caption_id=9,
        image_id=1,
        phrases=(Phrase("square", "green", 2, "left"), Phrase("circle", "blue", None, None)),
        text="Two green squares on the left and a blue circle.",
    )
    dataset = SyntheticDataset(seed=0, scenes=(scene,), captions=(caption,))
    (example,) = synthetic_examples(dataset)
    assert (example.level, example.wrong_concepts) == (Level.WEAK_YES, ("color",))
    assert example.note == (
        "The squares on the left are red, not green. The image shows two large red squares on "
        "the left and one small blue circle on the right."
    )


def test_a_wrong_shape_is_named_in_the_singular_for_one_object():
    scene = Scene(image_id=1, groups=(ObjectGroup("circle", "red", 1, "large", "left"),))
    caption = CaptionSpec(
        caption_id=9,
        image_id=1,
        phrases=(Phrase("square", "red", 1, "left"),),
        text="A red square on the left.",
    )
    dataset = SyntheticDataset(seed=0, scenes=(scene,), captions=(caption,))
    (example,) = synthetic_examples(dataset)
    assert (example.level, example.wrong_concepts) == (Level.WEAK_NO, ("species",))
    assert example.note == (
        "The red shape on the left is a circle, not a square. The image shows one large red "
        "circle on the left."
    )
