"""Generate a synthetic dataset: seeded scenes and the captions annotators would write.

Five captions per image describe the scene at varying detail, the way COCO annotators do:
some name every group with count, colour and position, others only the main group or only
the shapes. About 5% of captions are deliberately noisy: they get one detail wrong for their
own image, like real annotation errors. Pure Python: no Django import.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from mitl.synthetic.captions import caption_text, flip
from mitl.synthetic.scenes import (
    COLORS,
    MAX_COUNT,
    POSITIONS,
    SHAPES,
    SIZES,
    CaptionSpec,
    ObjectGroup,
    Phrase,
    Scene,
    SyntheticDataset,
)

# Caption styles, from loose to exhaustive, and how often annotators write each.
_STYLES: tuple[str, ...] = ("full", "objects", "main_color", "main_position", "pair", "main_shape")
_STYLE_WEIGHTS: tuple[float, ...] = (0.22, 0.16, 0.26, 0.14, 0.16, 0.06)
_GROUP_COUNT_WEIGHTS: tuple[float, ...] = (0.3, 0.45, 0.25)
_NOISE_SHARE = 0.05


def _random_scene(image_id: int, rng: np.random.Generator) -> Scene:
    n_groups = int(rng.choice(len(_GROUP_COUNT_WEIGHTS), p=_GROUP_COUNT_WEIGHTS)) + 1
    positions = rng.permutation(len(POSITIONS))[:n_groups]
    # Distinct (shape, colour) pairs keep every group nameable without ambiguity.
    kinds = rng.choice(len(SHAPES) * len(COLORS), size=n_groups, replace=False)
    groups = [
        ObjectGroup(
            shape=SHAPES[int(kind) // len(COLORS)],
            color=COLORS[int(kind) % len(COLORS)],
            count=int(rng.integers(1, MAX_COUNT + 1)),
            size=SIZES[int(rng.integers(len(SIZES)))],
            position=POSITIONS[int(position)],
        )
        for kind, position in zip(kinds, positions, strict=True)
    ]
    # Large shapes catch the eye first, then many shapes; the sort is stable.
    groups.sort(key=lambda group: (group.size != "large", -group.count))
    return Scene(image_id=image_id, groups=tuple(groups))


def _describe(
    group: ObjectGroup,
    *,
    color: bool,
    count: bool,
    position: bool,
    size: bool,
) -> Phrase:
    return Phrase(
        shape=group.shape,
        color=group.color if color else None,
        count=group.count if count else None,
        position=group.position if position else None,
        size=group.size if size else None,
    )


def _style_phrases(scene: Scene, style: str, rng: np.random.Generator) -> list[Phrase]:
    main, others = scene.groups[0], list(scene.groups[1:])
    if style == "full":
        with_size = flip(rng, 0.5)
        return [
            _describe(g, color=True, count=True, position=True, size=with_size)
            for g in scene.groups
        ]
    if style == "objects":
        with_count = flip(rng, 0.5)
        return [
            _describe(g, color=False, count=with_count, position=False, size=False)
            for g in scene.groups
        ]
    if style == "main_color":
        count, size = flip(rng, 0.4), flip(rng, 0.3)
        return [_describe(main, color=True, count=count, position=False, size=size)]
    if style == "main_position":
        return [_describe(main, color=True, count=flip(rng, 0.3), position=True, size=False)]
    if style == "pair" and others:
        other = others[int(rng.integers(len(others)))]
        return [
            _describe(g, color=True, count=False, position=False, size=False) for g in (main, other)
        ]
    # "main_shape", and "pair" in a one-group scene: the loosest caption.
    return [_describe(main, color=False, count=flip(rng, 0.5), position=False, size=False)]


def _other(value: str, vocabulary: tuple[str, ...], rng: np.random.Generator) -> str:
    choices = [v for v in vocabulary if v != value]
    return choices[int(rng.integers(len(choices)))]


def _add_noise(scene: Scene, phrases: list[Phrase], rng: np.random.Generator) -> list[Phrase]:
    """Get one detail wrong, as a careless annotator would."""
    i = int(rng.integers(len(phrases)))
    phrase = phrases[i]
    kinds = ["shape", "extra"] + (["color"] * 2 if phrase.color else [])
    kinds += ["count"] if phrase.count else []
    kind = kinds[int(rng.integers(len(kinds)))]
    if kind == "extra":
        absent = [s for s in SHAPES if s not in scene.labels]
        shape = absent[int(rng.integers(len(absent)))]
        color = COLORS[int(rng.integers(len(COLORS)))]
        return [*phrases, Phrase(shape=shape, color=color, count=None, position=None)]
    if kind == "color":
        phrase = replace(phrase, color=_other(phrase.color or "", COLORS, rng))
    elif kind == "count":
        counts = tuple(str(c) for c in range(1, MAX_COUNT + 1))
        phrase = replace(phrase, count=int(_other(str(phrase.count), counts, rng)))
    else:
        phrase = replace(phrase, shape=_other(phrase.shape, SHAPES, rng))
    return [*phrases[:i], phrase, *phrases[i + 1 :]]


def _captions_for(
    scene: Scene, first_id: int, n: int, rng: np.random.Generator
) -> list[CaptionSpec]:
    captions: list[CaptionSpec] = []
    texts: set[str] = set()
    for j in range(n):
        # A few redraws keep the captions of one image distinct, as in COCO.
        for _attempt in range(8):
            style = _STYLES[int(rng.choice(len(_STYLES), p=_STYLE_WEIGHTS))]
            phrases = _style_phrases(scene, style, rng)
            if flip(rng, _NOISE_SHARE):
                phrases = _add_noise(scene, phrases, rng)
            text = caption_text(phrases, rng)
            if text not in texts:
                break
        texts.add(text)
        captions.append(CaptionSpec(first_id + j, scene.image_id, tuple(phrases), text))
    return captions


def generate(*, n_images: int, seed: int = 0, captions_per_image: int = 5) -> SyntheticDataset:
    """Generate `n_images` scenes with `captions_per_image` captions each.

    Image ids are 1..n_images; caption ids run 1..n_images * captions_per_image, image by
    image. Images are drawn one after another from one generator, so a larger dataset with
    the same seed starts with the same images and captions.
    """
    if n_images < 1 or captions_per_image < 1:
        raise ValueError("n_images and captions_per_image must be positive")
    rng = np.random.default_rng(seed)
    scenes: list[Scene] = []
    captions: list[CaptionSpec] = []
    for image_id in range(1, n_images + 1):
        scene = _random_scene(image_id, rng)
        scenes.append(scene)
        first_id = (image_id - 1) * captions_per_image + 1
        captions.extend(_captions_for(scene, first_id, captions_per_image, rng))
    return SyntheticDataset(
        seed=seed,
        scenes=tuple(scenes),
        captions=tuple(captions),
    )
