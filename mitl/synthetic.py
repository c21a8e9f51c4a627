"""A deterministic synthetic image-caption dataset whose truth is known for every pair.

Each image is a scene of one to three groups of identical coloured shapes, drawn with Pillow.
Five captions per image describe the scene at varying detail, the way COCO annotators do:
some name every group with count, colour and position, others only the main group or only
the shapes. Loose captions ("A picture of red circles.") truly fit many other images, so a
retrieval benchmark built from the original one-image-per-caption links has many false
negatives for the platform to find. About 5% of captions are deliberately noisy: they get
one detail wrong for their own image, like real annotation errors.

Truth rule (`judge`, vectorised in `truth_matrix`):

* A caption is a tuple of phrases; each phrase mentions one object group by its shape and,
  optionally, its colour, count, size and position.
* A phrase MATCHES a group when the shape is equal and every mentioned detail is equal.
  It NEARLY MATCHES a group when exactly one mentioned attribute (the shape included)
  differs and at least one agrees. The differing attribute is the wrong concept:
  shape -> "species", colour -> "color", count -> "quantity", position -> "location",
  size -> "other".
* Each phrase takes its best group: a match, else a near match, else none (unmatched).
  The main group (``groups[0]``) is covered when some phrase matches or nearly matches it.
* Every phrase matches: YES if the main group is covered, else WEAK_YES with
  "misses_main_concept".
* No phrase is unmatched, some nearly match, and matches >= near matches: WEAK_YES with
  "wrong_description" and the wrong concepts.
* Otherwise, when some phrase matches or nearly matches: WEAK_NO, with "wrong_description"
  (and its concepts) for near matches and "not_in_image" for unmatched phrases.
* Nothing matches or nearly matches: NO.

WEAK_YES and WEAK_NO also carry "misses_main_concept" when the main group is not covered.
A pair is positive, as in ECCV Caption, when the level is YES or WEAK_YES; equivalently,
when no phrase is unmatched and matches are at least as many as near matches.

Pure Python: no Django import. Everything is deterministic from
(n_images, seed, captions_per_image), down to the PNG bytes.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from mitl.judgements import MIDDLE_LEVELS, POSITIVE_LEVELS, SHORTCOMINGS, WRONG_CONCEPTS, Level

SHAPES: tuple[str, ...] = ("circle", "square", "triangle", "star", "cross", "ring")
COLORS: tuple[str, ...] = ("red", "green", "blue", "yellow", "purple", "orange")
POSITIONS: tuple[str, ...] = ("left", "center", "right")
SIZES: tuple[str, ...] = ("small", "large")
MAX_COUNT = 3
MAX_GROUPS = 3

_RGB: dict[str, tuple[int, int, int]] = {
    "red": (214, 39, 40),
    "green": (44, 160, 44),
    "blue": (31, 90, 200),
    "yellow": (232, 196, 20),
    "purple": (148, 73, 189),
    "orange": (255, 127, 14),
}
_BACKGROUND = (246, 245, 240)
_PLURALS: dict[str, str] = {shape: shape + "s" for shape in SHAPES} | {"cross": "crosses"}
_COUNT_WORDS: dict[int, tuple[str, ...]] = {1: ("a", "one"), 2: ("two",), 3: ("three",)}
_SIZE_WORDS: dict[str, tuple[str, ...]] = {"small": ("small", "little"), "large": ("large", "big")}
_POSITION_WORDS: dict[str, tuple[str, ...]] = {
    "left": ("on the left",),
    "center": ("in the center", "in the middle"),
    "right": ("on the right",),
}
_FRAMES: tuple[str, ...] = (
    "{x}.",
    "A photo of {x}.",
    "A picture of {x}.",
    "An image showing {x}.",
    "There {be} {x}.",
    "{x} on a plain background.",
    "A simple drawing of {x}.",
)
_JOINERS: tuple[str, ...] = (" and ", " next to ", " with ")
# The wrong concept named by each attribute a near match gets wrong.
_CONCEPT_OF: dict[str, str] = {
    "shape": "species",
    "color": "color",
    "count": "quantity",
    "position": "location",
    "size": "other",
}
_ATTRIBUTES: tuple[str, ...] = ("shape", "color", "count", "size", "position")
# Caption styles, from loose to exhaustive, and how often annotators write each.
_STYLES: tuple[str, ...] = ("full", "objects", "main_color", "main_position", "pair", "main_shape")
_STYLE_WEIGHTS: tuple[float, ...] = (0.22, 0.16, 0.26, 0.14, 0.16, 0.06)
_GROUP_COUNT_WEIGHTS: tuple[float, ...] = (0.3, 0.45, 0.25)
_NOISE_SHARE = 0.05


@dataclass(frozen=True)
class ObjectGroup:
    """`count` identical shapes of one class and colour in one region of the image."""

    shape: str
    color: str
    count: int
    size: str  # "small" | "large"
    position: str  # one of POSITIONS

    def __post_init__(self) -> None:
        _check(self.shape, SHAPES, "shape")
        _check(self.color, COLORS, "color")
        _check(self.size, SIZES, "size")
        _check(self.position, POSITIONS, "position")
        if not 1 <= self.count <= MAX_COUNT:
            raise ValueError(f"count must be within 1..{MAX_COUNT}, got {self.count}")


@dataclass(frozen=True)
class Scene:
    """One image: its object groups, the most salient (main) one first."""

    image_id: int
    groups: tuple[ObjectGroup, ...]

    def __post_init__(self) -> None:
        if not 1 <= len(self.groups) <= MAX_GROUPS:
            raise ValueError(f"a scene has 1..{MAX_GROUPS} groups, got {len(self.groups)}")
        if len({group.position for group in self.groups}) != len(self.groups):
            raise ValueError("groups of a scene must be in distinct positions")

    @property
    def labels(self) -> list[str]:
        """Return the sorted shape classes present (the multi-hot instance labels)."""
        return sorted({group.shape for group in self.groups})


@dataclass(frozen=True)
class Phrase:
    """A caption's mention of one object group; None means the detail is not mentioned."""

    shape: str
    color: str | None
    count: int | None
    position: str | None
    size: str | None = None


@dataclass(frozen=True)
class CaptionSpec:
    """A caption, the phrases it is made of, and the image it was originally written for."""

    caption_id: int
    image_id: int
    phrases: tuple[Phrase, ...]
    text: str


@dataclass(frozen=True)
class Truth:
    """The true answer for one image-caption pair, with the rationale of a middle level."""

    level: Level
    shortcomings: tuple[str, ...] = ()
    wrong_concepts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in self.shortcomings:
            _check(name, SHORTCOMINGS, "shortcoming")
        for name in self.wrong_concepts:
            _check(name, WRONG_CONCEPTS, "wrong concept")
        if self.shortcomings and self.level not in MIDDLE_LEVELS:
            raise ValueError(f"shortcomings are only for middle levels, not {self.level}")
        if self.wrong_concepts and "wrong_description" not in self.shortcomings:
            raise ValueError("wrong concepts need the 'wrong_description' shortcoming")

    @property
    def is_positive(self) -> bool:
        """Tell whether the pair is a positive under the ECCV Caption rule."""
        return self.level in POSITIVE_LEVELS


@dataclass(frozen=True)
class SyntheticDataset:
    """Scenes and captions in id order, regenerable from `seed`."""

    seed: int
    scenes: tuple[Scene, ...]
    captions: tuple[CaptionSpec, ...]

    @property
    def captions_per_image(self) -> int:
        """Return how many captions each image was given."""
        return len(self.captions) // max(1, len(self.scenes))

    @cached_property
    def _scene_index(self) -> dict[int, int]:
        return {scene.image_id: i for i, scene in enumerate(self.scenes)}

    @cached_property
    def _caption_index(self) -> dict[int, int]:
        return {caption.caption_id: i for i, caption in enumerate(self.captions)}

    def scene(self, image_id: int) -> Scene:
        """Return the scene of `image_id`; raise KeyError when there is none."""
        return self.scenes[self._scene_index[image_id]]

    def caption(self, caption_id: int) -> CaptionSpec:
        """Return the caption `caption_id`; raise KeyError when there is none."""
        return self.captions[self._caption_index[caption_id]]

    def file_name(self, image_id: int) -> str:
        """Return the image file name used in captions.tsv and under images/."""
        return f"synthetic_{image_id:06d}.png"


def _check(value: str, vocabulary: tuple[str, ...], what: str) -> None:
    if value not in vocabulary:
        raise ValueError(f"unknown {what} {value!r}; expected one of {', '.join(vocabulary)}")


# --- generation -------------------------------------------------------------------------


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


def _flip(rng: np.random.Generator, p: float) -> bool:
    return bool(rng.random() < p)


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
        with_size = _flip(rng, 0.5)
        return [
            _describe(g, color=True, count=True, position=True, size=with_size)
            for g in scene.groups
        ]
    if style == "objects":
        with_count = _flip(rng, 0.5)
        return [
            _describe(g, color=False, count=with_count, position=False, size=False)
            for g in scene.groups
        ]
    if style == "main_color":
        count, size = _flip(rng, 0.4), _flip(rng, 0.3)
        return [_describe(main, color=True, count=count, position=False, size=size)]
    if style == "main_position":
        return [_describe(main, color=True, count=_flip(rng, 0.3), position=True, size=False)]
    if style == "pair" and others:
        other = others[int(rng.integers(len(others)))]
        return [
            _describe(g, color=True, count=False, position=False, size=False) for g in (main, other)
        ]
    # "main_shape", and "pair" in a one-group scene: the loosest caption.
    return [_describe(main, color=False, count=_flip(rng, 0.5), position=False, size=False)]


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


def _pick(words: Sequence[str], rng: np.random.Generator) -> str:
    return words[int(rng.integers(len(words)))]


def _phrase_text(phrase: Phrase, rng: np.random.Generator) -> str:
    words: list[str] = []
    if phrase.count is not None:
        words.append(_pick(_COUNT_WORDS[phrase.count], rng))
    elif _flip(rng, 0.25):
        words.append("some")
    if phrase.size is not None:
        words.append(_pick(_SIZE_WORDS[phrase.size], rng))
    if phrase.color is not None:
        words.append(phrase.color)
    words.append(phrase.shape if phrase.count == 1 else _PLURALS[phrase.shape])
    if words[0] == "a" and words[1][0] in "aeiou":
        words[0] = "an"
    if phrase.position is not None:
        words.append(_pick(_POSITION_WORDS[phrase.position], rng))
    return " ".join(words)


def _caption_text(phrases: Sequence[Phrase], rng: np.random.Generator) -> str:
    parts = [_phrase_text(phrase, rng) for phrase in phrases]
    if len(parts) == 1:
        body = parts[0]
    elif len(parts) == 2:
        body = parts[0] + _pick(_JOINERS, rng) + parts[1]
    else:
        body = ", ".join(parts[:-1]) + " and " + parts[-1]
    be = "is" if phrases[0].count == 1 else "are"
    text = _pick(_FRAMES, rng).format(x=body, be=be)
    return text[0].upper() + text[1:]


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
            if _flip(rng, _NOISE_SHARE):
                phrases = _add_noise(scene, phrases, rng)
            text = _caption_text(phrases, rng)
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


# --- truth ------------------------------------------------------------------------------


def _mismatches(phrase: Phrase, group: ObjectGroup) -> tuple[list[str], int]:
    """Return the mentioned attributes that differ, and how many mentioned ones agree."""
    wrong: list[str] = []
    agree = 0
    for attribute in _ATTRIBUTES:
        said = getattr(phrase, attribute)
        if said is None:
            continue
        if said == getattr(group, attribute):
            agree += 1
        else:
            wrong.append(attribute)
    return wrong, agree


def _best_group(phrase: Phrase, scene: Scene) -> tuple[str, int | None, str | None]:
    """Return ("match" | "near" | "none", the group's index, the near match's wrong attribute).

    Ties go to the earlier, more salient group.
    """
    near: tuple[int, str] | None = None
    for i, group in enumerate(scene.groups):
        wrong, agree = _mismatches(phrase, group)
        if not wrong:
            return "match", i, None
        if near is None and len(wrong) == 1 and agree >= 1:
            near = (i, wrong[0])
    if near is not None:
        return "near", near[0], near[1]
    return "none", None, None


def _in_order(names: set[str], vocabulary: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(name for name in vocabulary if name in names)


def judge(scene: Scene, caption: CaptionSpec) -> Truth:
    """Return the true answer for a pair, by the rule in the module docstring."""
    kinds: list[str] = []
    covered: set[int] = set()
    concepts: set[str] = set()
    for phrase in caption.phrases:
        kind, index, attribute = _best_group(phrase, scene)
        kinds.append(kind)
        if index is not None:
            covered.add(index)
        if attribute is not None:
            concepts.add(_CONCEPT_OF[attribute])
    n_match, n_near, n_none = (kinds.count(k) for k in ("match", "near", "none"))
    if n_match + n_near == 0:
        return Truth(Level.NO)
    shortcomings: set[str] = set() if 0 in covered else {"misses_main_concept"}
    if n_near == 0 and n_none == 0:
        if not shortcomings:
            return Truth(Level.YES)
        return Truth(Level.WEAK_YES, _in_order(shortcomings, SHORTCOMINGS))
    if n_near:
        shortcomings.add("wrong_description")
    if n_none:
        shortcomings.add("not_in_image")
    level = Level.WEAK_YES if n_none == 0 and n_match >= n_near else Level.WEAK_NO
    return Truth(level, _in_order(shortcomings, SHORTCOMINGS), _in_order(concepts, WRONG_CONCEPTS))


_VOCABULARIES: dict[str, tuple[object, ...]] = {
    "shape": SHAPES,
    "color": COLORS,
    "count": tuple(range(1, MAX_COUNT + 1)),
    "size": SIZES,
    "position": POSITIONS,
}
# Codes of the best group a phrase finds in an image; padding phrases get _PAD.
_NONE, _NEAR, _MATCH, _PAD = 0, 1, 2, -1


def _codes(items: Sequence[Phrase] | Sequence[ObjectGroup]) -> np.ndarray:
    """Encode items as (attribute, item) vocabulary indices; -1 means "not mentioned"."""
    codes = np.full((len(_ATTRIBUTES), len(items)), -1, dtype=np.int8)
    for i, item in enumerate(items):
        for a, attribute in enumerate(_ATTRIBUTES):
            value = getattr(item, attribute)
            if value is not None:
                codes[a, i] = _VOCABULARIES[attribute].index(value)
    return codes


def _status_table(phrases: Sequence[Phrase], groups: Sequence[ObjectGroup]) -> np.ndarray:
    """Return (phrase, group) codes: _MATCH, _NEAR or _NONE, as `_best_group` decides them."""
    said = _codes(phrases)[:, :, None]
    seen = _codes(groups)[:, None, :]
    mentioned = said >= 0
    wrong = (mentioned & (said != seen)).sum(axis=0)
    agree = (mentioned & (said == seen)).sum(axis=0)
    near = (wrong == 1) & (agree >= 1)
    return np.where(wrong == 0, _MATCH, np.where(near, _NEAR, _NONE)).astype(np.int8)


def truth_matrix(dataset: SyntheticDataset) -> np.ndarray:
    """Return the (n_images, n_captions) bool matrix of positives, in dataset order.

    Distinct phrases and distinct groups are few (hundreds), so judge each phrase against
    each group once, then combine by table look-ups.
    """
    phrases = list(dict.fromkeys(p for caption in dataset.captions for p in caption.phrases))
    groups = list(dict.fromkeys(g for scene in dataset.scenes for g in scene.groups))
    phrase_index = {phrase: i for i, phrase in enumerate(phrases)}
    group_index = {group: i for i, group in enumerate(groups)}
    # An extra all-_NONE column stands for the missing groups of smaller scenes.
    table = np.concatenate(
        [_status_table(phrases, groups), np.full((len(phrases), 1), _NONE, np.int8)], axis=1
    )
    scene_groups = np.full((len(dataset.scenes), MAX_GROUPS), len(groups), dtype=np.intp)
    for i, scene in enumerate(dataset.scenes):
        scene_groups[i, : len(scene.groups)] = [group_index[g] for g in scene.groups]
    # Best status of each phrase in each image: (phrase, image), plus an all-_PAD last row.
    best = table[:, scene_groups].max(axis=-1)
    best = np.concatenate([best, np.full((1, len(dataset.scenes)), _PAD, np.int8)])
    width = max((len(caption.phrases) for caption in dataset.captions), default=1)
    caption_phrases = np.full((len(dataset.captions), width), len(phrases), dtype=np.intp)
    for c, caption in enumerate(dataset.captions):
        caption_phrases[c, : len(caption.phrases)] = [phrase_index[p] for p in caption.phrases]
    status = best[caption_phrases]  # (caption, phrase, image)
    n_match = (status == _MATCH).sum(axis=1)
    n_near = (status == _NEAR).sum(axis=1)
    n_none = (status == _NONE).sum(axis=1)
    positive = (n_none == 0) & (n_match >= np.maximum(n_near, 1))
    return np.ascontiguousarray(positive.T)


# --- rendering and writing --------------------------------------------------------------

_SUPERSAMPLE = 3
_RADIUS = {"small": 0.06, "large": 0.095}  # fraction of the image side


def _star(cx: float, cy: float, r: float) -> list[tuple[float, float]]:
    points = []
    for k in range(10):
        radius = r if k % 2 == 0 else r * 0.45
        angle = np.pi * k / 5 - np.pi / 2
        points.append((cx + radius * float(np.cos(angle)), cy + radius * float(np.sin(angle))))
    return points


def _draw_shape(
    draw: ImageDraw.ImageDraw, shape: str, cx: float, cy: float, r: float, rgb: tuple[int, int, int]
) -> None:
    box = (cx - r, cy - r, cx + r, cy + r)
    if shape == "circle":
        draw.ellipse(box, fill=rgb)
    elif shape == "ring":
        draw.ellipse(box, outline=rgb, width=max(1, round(r * 0.38)))
    elif shape == "square":
        s = r * 0.85
        draw.rectangle((cx - s, cy - s, cx + s, cy + s), fill=rgb)
    elif shape == "triangle":
        draw.polygon(
            [(cx, cy - r), (cx + r * 0.95, cy + r * 0.75), (cx - r * 0.95, cy + r * 0.75)], fill=rgb
        )
    elif shape == "star":
        draw.polygon(_star(cx, cy, r * 1.1), fill=rgb)
    else:  # cross
        w = r * 0.34
        draw.rectangle((cx - r, cy - w, cx + r, cy + w), fill=rgb)
        draw.rectangle((cx - w, cy - r, cx + w, cy + r), fill=rgb)


def render(scene: Scene, *, size: int = 128) -> Image.Image:
    """Draw the scene as an RGB image: each group in its third of the width."""
    big = size * _SUPERSAMPLE
    image = Image.new("RGB", (big, big), _BACKGROUND)
    draw = ImageDraw.Draw(image)
    # A str seed is hashed with SHA-512, so the jitter is stable across runs and platforms.
    rng = random.Random(f"{scene.image_id}:{scene.groups!r}")
    third = big / len(POSITIONS)
    for group in scene.groups:
        r = _RADIUS[group.size] * big
        left = POSITIONS.index(group.position) * third
        slot = big / group.count
        for k in range(group.count):
            cx = left + third / 2 + rng.uniform(-1, 1) * max(0.0, third / 2 - r * 1.2)
            cy = slot * (k + 0.5) + rng.uniform(-1, 1) * max(0.0, slot / 2 - r * 1.2)
            _draw_shape(draw, group.shape, cx, cy, r, _RGB[group.color])
    return image.resize((size, size), Image.Resampling.LANCZOS)


def write(
    dataset: SyntheticDataset,
    out_dir: Path,
    *,
    image_size: int = 128,
    with_images: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Write captions.tsv, labels.json, synthetic.json and images/; return the TSV's path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tsv = out_dir / "captions.tsv"
    lines = ["caption_id\timage_id\tfile_name\tcaption"]
    lines += [
        f"{c.caption_id}\t{c.image_id}\t{dataset.file_name(c.image_id)}\t{c.text}"
        for c in dataset.captions
    ]
    tsv.write_text("\n".join(lines) + "\n", encoding="utf-8")
    labels = {str(scene.image_id): scene.labels for scene in dataset.scenes}
    (out_dir / "labels.json").write_text(json.dumps(labels, indent=1) + "\n", encoding="utf-8")
    meta = {
        "generator": "mitl.synthetic",
        "seed": dataset.seed,
        "n_images": len(dataset.scenes),
        "captions_per_image": dataset.captions_per_image,
    }
    (out_dir / "synthetic.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    if with_images:
        images = out_dir / "images"
        images.mkdir(exist_ok=True)
        total = len(dataset.scenes)
        for done, scene in enumerate(dataset.scenes, start=1):
            render(scene, size=image_size).save(images / dataset.file_name(scene.image_id))
            if progress is not None:
                progress(done, total)
    return tsv
