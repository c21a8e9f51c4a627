"""How a synthetic caption's phrases are worded: counts, sizes, plurals, frames, joiners.

Every choice of words is drawn from the generator passed in, in a fixed order, so the same
phrases and generator state give the same text. Pure Python: no Django import.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mitl.synthetic.scenes import SHAPES, Phrase

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


def flip(rng: np.random.Generator, p: float) -> bool:
    """Return True with probability `p` (one draw from `rng`)."""
    return bool(rng.random() < p)


def pick(words: Sequence[str], rng: np.random.Generator) -> str:
    """Return one of `words`, drawn uniformly from `rng`."""
    return words[int(rng.integers(len(words)))]


def _phrase_text(phrase: Phrase, rng: np.random.Generator) -> str:
    words: list[str] = []
    if phrase.count is not None:
        words.append(pick(_COUNT_WORDS[phrase.count], rng))
    elif flip(rng, 0.25):
        words.append("some")
    if phrase.size is not None:
        words.append(pick(_SIZE_WORDS[phrase.size], rng))
    if phrase.color is not None:
        words.append(phrase.color)
    words.append(phrase.shape if phrase.count == 1 else _PLURALS[phrase.shape])
    if words[0] == "a" and words[1][0] in "aeiou":
        words[0] = "an"
    if phrase.position is not None:
        words.append(pick(_POSITION_WORDS[phrase.position], rng))
    return " ".join(words)


def caption_text(phrases: Sequence[Phrase], rng: np.random.Generator) -> str:
    """Word the phrases as one sentence: each phrase, the joiners, then a frame."""
    parts = [_phrase_text(phrase, rng) for phrase in phrases]
    if len(parts) == 1:
        body = parts[0]
    elif len(parts) == 2:
        body = parts[0] + pick(_JOINERS, rng) + parts[1]
    else:
        body = ", ".join(parts[:-1]) + " and " + parts[-1]
    be = "is" if phrases[0].count == 1 else "are"
    text = pick(_FRAMES, rng).format(x=body, be=be)
    return text[0].upper() + text[1:]
