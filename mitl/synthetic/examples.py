"""Worked examples for the instructions, picked from a synthetic dataset's known truth.

One clear pair per answer: pairs are looked at image by image in a seeded order (each
image's own captions, and a few captions of other images), judged by `truth.judge`, and
the clearest candidate of each answer wins: a fully detailed description for "100% YES",
a single reason (a colour, a number or a kind of object wrong, best) for the middle
answers. The note says why, and what the image shows, so a worker can check it.
Pure Python: no Django import.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import replace

import numpy as np

from mitl.instructions import Example, example_note
from mitl.judgements import Level

from .scenes import CaptionSpec, ObjectGroup, Phrase, Scene, SyntheticDataset
from .truth import Truth, judge, phrase_findings

OTHER_CAPTIONS_PER_IMAGE = 12  # captions of other images judged against each image
MAX_IMAGES = 200  # images looked at, at most
# Wrong concepts a worker checks at a glance, clearest first; others rank after them.
CLEAR_CONCEPTS: tuple[str, ...] = ("color", "quantity", "species")
# The reasons that make the plainest example of each middle answer, best first.
PLAIN_REASONS: dict[Level, tuple[tuple[str, ...], ...]] = {
    Level.WEAK_YES: (("wrong_description",), ("misses_main_concept",)),
    Level.WEAK_NO: (("not_in_image",), ("wrong_description",)),
}

Candidate = tuple[Scene, CaptionSpec, Truth]


def synthetic_examples(
    dataset: SyntheticDataset,
    *,
    seed: int = 0,
    images: Collection[int] | None = None,
    captions: Collection[int] | None = None,
) -> list[Example]:
    """Return one example per answer (fewer when the dataset has no pair of some answer).

    `images` and `captions` limit the pairs to ids that may be shown (those stored, and
    captions not marked invalid); None allows all.
    """
    found = _candidates(dataset, seed=seed, images=images, captions=captions)
    examples = []
    for level in Level:
        if found[level]:
            scene, caption, truth = min(found[level], key=_CLARITY[level])
            examples.append(_example(scene, caption, truth))
    return examples


def _candidates(
    dataset: SyntheticDataset,
    *,
    seed: int,
    images: Collection[int] | None,
    captions: Collection[int] | None,
) -> dict[Level, list[Candidate]]:
    rng = np.random.default_rng([seed, dataset.seed])
    allowed = [c for c in dataset.captions if captions is None or c.caption_id in captions]
    scenes = [s for s in dataset.scenes if images is None or s.image_id in images]
    found: dict[Level, list[Candidate]] = {level: [] for level in Level}
    if not allowed:
        return found
    for index in rng.permutation(len(scenes))[:MAX_IMAGES]:
        scene = scenes[int(index)]
        own = [c for c in allowed if c.image_id == scene.image_id]
        drawn = rng.integers(len(allowed), size=OTHER_CAPTIONS_PER_IMAGE)
        others = [allowed[int(i)] for i in drawn if allowed[int(i)].image_id != scene.image_id]
        for caption in own + others:
            truth = judge(scene, caption)
            found[truth.level].append((scene, caption, truth))
    return found


def _details(caption: CaptionSpec) -> int:
    """Count the details a caption mentions (shapes, colours, counts, sizes, positions)."""
    return sum(
        value is not None
        for phrase in caption.phrases
        for value in (phrase.shape, phrase.color, phrase.count, phrase.size, phrase.position)
    )


def _concept_rank(truth: Truth) -> int:
    ranks = [
        CLEAR_CONCEPTS.index(c) if c in CLEAR_CONCEPTS else len(CLEAR_CONCEPTS)
        for c in truth.wrong_concepts
    ]
    return max(ranks, default=0)


def _middle_clarity(level: Level) -> Callable[[Candidate], tuple[int, ...]]:
    """Plain reasons first (PLAIN_REASONS), then one clear wrong concept, then a caption
    that names each shape once (no "red triangles and orange triangles"), then a short
    caption, then the caption's id (a fixed order)."""
    plain = PLAIN_REASONS[level]

    def key(candidate: Candidate) -> tuple[int, ...]:
        _, caption, truth = candidate
        reasons = plain.index(truth.shortcomings) if truth.shortcomings in plain else len(plain)
        concepts = (len(truth.wrong_concepts), _concept_rank(truth))
        shapes = [phrase.shape for phrase in caption.phrases]
        repeats = len(shapes) - len(set(shapes))
        return reasons, *concepts, repeats, len(caption.phrases), caption.caption_id

    return key


_CLARITY: dict[Level, Callable[[Candidate], tuple[int, ...]]] = {
    # A YES that names every detail shows what "everything right" means.
    Level.YES: lambda c: (-_details(c[1]), c[1].caption_id),
    Level.WEAK_YES: _middle_clarity(Level.WEAK_YES),
    Level.WEAK_NO: _middle_clarity(Level.WEAK_NO),
    # A NO with a short caption is obviously about something else.
    Level.NO: lambda c: (len(c[1].phrases), c[1].caption_id),
}


def _example(scene: Scene, caption: CaptionSpec, truth: Truth) -> Example:
    example = Example(
        level=truth.level,
        image=scene.image_id,
        caption=caption.caption_id,
        caption_text=caption.text,
        shortcomings=truth.shortcomings,
        wrong_concepts=truth.wrong_concepts,
    )
    # What exactly is wrong says more than the reasons' labels, which the page shows anyway.
    details = " ".join(f"{text[0].upper()}{text[1:]}." for text in _findings(scene, caption, truth))
    note = f"{details or example_note(example)} The image shows {scene_text(scene)}."
    return replace(example, note=note)


def _findings(scene: Scene, caption: CaptionSpec, truth: Truth) -> list[str]:
    """Say what a middle answer's description gets wrong, phrase by phrase."""
    if truth.level not in (Level.WEAK_YES, Level.WEAK_NO):
        return []
    texts = []
    for phrase, (kind, index, attribute) in zip(
        caption.phrases, phrase_findings(scene, caption), strict=True
    ):
        if kind == "near" and index is not None and attribute is not None:
            texts.append(_wrong_detail(phrase, scene.groups[index], attribute))
        elif kind == "none":
            shape = _plural(phrase.shape)
            texts.append(f"there are no {phrase.color + ' ' if phrase.color else ''}{shape}")
    if "misses_main_concept" in truth.shortcomings:
        texts.append(f"it leaves out the main thing: {_group_text(scene.groups[0])}")
    return texts


def _wrong_detail(phrase: Phrase, group: ObjectGroup, attribute: str) -> str:
    """One wrong detail of a phrase that nearly matches `group`, in words."""
    said, seen = getattr(phrase, attribute), getattr(group, attribute)
    noun = group.shape if group.count == 1 else _plural(group.shape)
    be = "is" if group.count == 1 else "are"
    where = _POSITION_WORDS[group.position]
    if attribute == "count":
        return f"there {be} {_COUNT_WORDS[seen]} {noun} {where}, not {_COUNT_WORDS[said]}"
    if attribute == "shape":
        if group.count == 1:  # no shape starts with a vowel: "a" fits each
            return f"the {group.color} shape {where} is a {seen}, not a {said}"
        return f"the {group.color} shapes {where} are {_plural(seen)}, not {_plural(said)}"
    if attribute == "position":
        return f"the {group.color} {noun} {be} {where}, not {_POSITION_WORDS[said]}"
    return f"the {noun} {where} {be} {seen}, not {said}"  # colour or size


def _group_text(group: ObjectGroup) -> str:
    noun = group.shape if group.count == 1 else _plural(group.shape)
    words = (_COUNT_WORDS[group.count], group.size, group.color, noun)
    return f"{' '.join(words)} {_POSITION_WORDS[group.position]}"


def scene_text(scene: Scene) -> str:
    """Describe a scene's groups in words, main group first: "two large red squares on the
    left and one small blue circle in the center"."""
    parts = [_group_text(group) for group in scene.groups]
    if len(parts) == 1:
        return parts[0]
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _plural(shape: str) -> str:
    return shape + ("es" if shape.endswith("s") else "s")


_COUNT_WORDS = {1: "one", 2: "two", 3: "three"}
_POSITION_WORDS = {"left": "on the left", "center": "in the center", "right": "on the right"}
