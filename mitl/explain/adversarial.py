"""Adversarial caption queries: one attribute kind reversed, everything else left as it was.

Pure Python: no Django import. A query q becomes q* by substituting the salient attributes of
one kind; a retrieval system that ranks q* like q did is not reading that attribute.

- ``antonym``: adjectives with a WordNet antonym (any adjective sense; one antonym at random
  when there are several). Colour words are left to the colour kinds: WordNet's antonyms for
  them are mostly other senses ("green" -> "ripe") and a colour swap needs a distance check.
  Size words stay, since large/small and big/little are WordNet's own antonym pairs.
- ``color_all`` / ``color_in``: each colour word becomes a colour at least
  ``min_color_distance`` away (CIE76 ΔE in CIELAB), drawn from every named colour or from the
  colours the dataset's captions mention.
- ``size``: a large-size word becomes a small-size one, and back.

Only whole words are replaced and the rest of the text is kept byte for byte. A word that
occurs twice gets the same substitute both times. Colour homonyms ("an orange on a plate")
are substituted too: words are matched, not senses.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache

from mitl.annotators.bow import STOP_WORDS
from mitl.relevance.wordnet import wordnet
from mitl.relevance.words import DETERMINERS, tag_word

PERTURBATION_KINDS: tuple[str, ...] = ("antonym", "color_all", "color_in", "size")
# ΔE of about 50 separates colours that carry different names (red/orange 61, black/gray 54)
# and keeps shades of one name out (red/crimson 35, gray/silver 24).
DEFAULT_MIN_COLOR_DISTANCE = 50.0

# sRGB of common single-word colour names: CSS/X11 values, except brown (CSS "brown" is a dark
# red; "saddlebrown" is the colour the word names) and scarlet and burgundy (not in CSS).
NAMED_COLORS: dict[str, tuple[int, int, int]] = {
    "red": (255, 0, 0), "orange": (255, 165, 0), "yellow": (255, 255, 0),
    "green": (0, 128, 0), "blue": (0, 0, 255), "purple": (128, 0, 128),
    "pink": (255, 192, 203), "brown": (139, 69, 19), "black": (0, 0, 0),
    "white": (255, 255, 255), "gray": (128, 128, 128), "grey": (128, 128, 128),
    "silver": (192, 192, 192), "gold": (255, 215, 0), "beige": (245, 245, 220),
    "tan": (210, 180, 140), "navy": (0, 0, 128), "maroon": (128, 0, 0),
    "teal": (0, 128, 128), "turquoise": (64, 224, 208), "cyan": (0, 255, 255),
    "magenta": (255, 0, 255), "violet": (238, 130, 238), "indigo": (75, 0, 130),
    "lavender": (230, 230, 250), "khaki": (240, 230, 140), "coral": (255, 127, 80),
    "crimson": (220, 20, 60), "scarlet": (255, 36, 0), "burgundy": (128, 0, 32),
    "ivory": (255, 255, 240), "bronze": (205, 127, 50),
}  # fmt: skip
_SAME_COLOR = {"grey": "gray"}  # spellings of one colour: never a substitute for each other

# Size words only: "tall"/"short" (height, length) and "minor" (importance) would flip
# something else ("short hair" → "enormous hair").
LARGE_WORDS: tuple[str, ...] = ("large", "big", "enormous", "huge", "giant")
SMALL_WORDS: tuple[str, ...] = ("small", "little", "tiny")

_WORD = re.compile(r"[^\W_]+")  # letters and digits: "redwood" and "bored" are one word each
# sRGB (D65) -> CIE XYZ; its image of sRGB white is the reference white, so white is L*=100.
_SRGB_TO_XYZ = (
    (0.4124564, 0.3575761, 0.1804375),
    (0.2126729, 0.7151522, 0.0721750),
    (0.0193339, 0.1191920, 0.9503041),
)
_WHITE = tuple(sum(row) for row in _SRGB_TO_XYZ)
_DELTA = 6 / 29


class PerturbationError(ValueError):
    """Arguments a perturbation cannot run with; the message says how to fix them."""


@dataclass(frozen=True)
class Substitution:
    """One replaced word: its character span in the original text, old and new spelling."""

    start: int
    end: int
    old: str
    new: str


@dataclass(frozen=True)
class Perturbation:
    """An adversarial query: the original text, the perturbed one and what was replaced."""

    kind: str
    original: str
    text: str
    substitutions: tuple[Substitution, ...]


def _linear(channel: int) -> float:
    c = channel / 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _lab_f(t: float) -> float:
    return t ** (1 / 3) if t > _DELTA**3 else t / (3 * _DELTA**2) + 4 / 29


@cache
def color_lab(name: str) -> tuple[float, float, float]:
    """Return the CIELAB (D65) coordinates of a NAMED_COLORS colour."""
    rgb = NAMED_COLORS.get(name.lower())
    if rgb is None:
        raise PerturbationError(
            f"unknown colour {name!r}: use one of NAMED_COLORS ({', '.join(NAMED_COLORS)})"
        )
    linear = [_linear(c) for c in rgb]
    fx, fy, fz = (
        _lab_f(sum(m * c for m, c in zip(row, linear, strict=True)) / white)
        for row, white in zip(_SRGB_TO_XYZ, _WHITE, strict=True)
    )
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def color_distance(a: str, b: str) -> float:
    """Return the CIE76 colour difference ΔE between two NAMED_COLORS colours."""
    return sum((x - y) ** 2 for x, y in zip(color_lab(a), color_lab(b), strict=True)) ** 0.5


def colors_in_texts(texts: Iterable[str]) -> list[str]:
    """Return the NAMED_COLORS words that occur in the texts, in NAMED_COLORS order."""
    seen = {word.lower() for text in texts for word in _WORD.findall(text)}
    return [name for name in NAMED_COLORS if name in seen]


def _same_color(a: str, b: str) -> bool:
    return _SAME_COLOR.get(a, a) == _SAME_COLOR.get(b, b)


def _palette(names: Iterable[str]) -> list[str]:
    """Return the colours once each, dropping later spellings of one colour (grey after gray)."""
    palette: list[str] = []
    for name in (n.lower() for n in names):
        color_lab(name)  # fails with the list of known names
        if not any(_same_color(name, kept) for kept in palette):
            palette.append(name)
    return palette


def _color_choices(palette: list[str], min_distance: float) -> Callable[[str], list[str]]:
    def choices(word: str) -> list[str]:
        if word not in NAMED_COLORS:
            return []
        return [
            c
            for c in palette
            if not _same_color(c, word) and color_distance(word, c) >= min_distance
        ]

    return choices


def _size_choices(word: str) -> list[str]:
    if word in LARGE_WORDS:
        return list(SMALL_WORDS)
    if word in SMALL_WORDS:
        return list(LARGE_WORDS)
    return []


@cache
def antonyms(word: str) -> tuple[str, ...]:
    """Return WordNet's antonyms of the adjective `word` (its exact form), sorted."""
    found = {
        antonym.name().replace("_", " ")
        for synset in wordnet().synsets(word, "a")  # satellite adjectives included
        for lemma in synset.lemmas()
        if lemma.name().lower() == word  # not "larger" -> "small": the form must match
        for antonym in lemma.antonyms()
    }
    return tuple(sorted(found))


def _is_adjective(words: Sequence[str], i: int) -> bool:
    """Say whether words[i] is an adjective here: tagged one, or between a modifier and a noun."""
    word = words[i]
    # Function words ("on", "off", "out") have adjective senses; in captions they are not.
    if word in STOP_WORDS or word in NAMED_COLORS or not antonyms(word):
        return False
    prev = words[i - 1] if i > 0 else ""
    if tag_word(word, after_determiner=prev in DETERMINERS)[1] == "a":
        return True
    # Between a determiner (or adjective) and a noun only an adjective fits, whatever the
    # unigram tagger says ("a dry beach", where "dry" is mostly a verb).
    after_modifier = prev in DETERMINERS or _tagged(prev, "a")
    return after_modifier and i + 1 < len(words) and _tagged(words[i + 1], "n")


def _tagged(word: str, pos: str) -> bool:
    # tag_word calls words WordNet lacks nouns ("of"); here only known content words count.
    return (
        word not in STOP_WORDS and bool(wordnet().synsets(word, pos)) and tag_word(word)[1] == pos
    )


def _match_case(old: str, new: str) -> str:
    if len(old) > 1 and old.isupper():
        return new.upper()
    return new[:1].upper() + new[1:] if old[:1].isupper() else new


def _check(kind: str, colors: Sequence[str] | None, min_color_distance: float) -> None:
    if kind not in PERTURBATION_KINDS:
        raise PerturbationError(
            f"unknown perturbation kind {kind!r}: use one of {', '.join(PERTURBATION_KINDS)}"
        )
    if kind == "color_in" and colors is None:
        raise PerturbationError(
            "kind 'color_in' needs `colors`: pass colors_in_texts(<the dataset's captions>)"
        )
    if min_color_distance < 0:
        raise PerturbationError(f"min_color_distance must be >= 0 (got {min_color_distance})")


def perturb(
    text: str,
    kind: str,
    *,
    rng: random.Random,
    colors: Sequence[str] | None = None,
    min_color_distance: float = DEFAULT_MIN_COLOR_DISTANCE,
) -> Perturbation | None:
    """Substitute the `kind` attributes of `text`; return None when no word changed.

    `colors` is the candidate list of ``color_in`` (ignored by the other kinds).
    """
    _check(kind, colors, min_color_distance)
    choices: Callable[[str], Sequence[str]]
    if kind == "antonym":
        choices = antonyms
    elif kind == "size":
        choices = _size_choices
    else:
        palette = _palette(NAMED_COLORS if kind == "color_all" else colors or ())
        choices = _color_choices(palette, min_color_distance)

    matches = list(_WORD.finditer(text))
    words = [m.group().lower() for m in matches]
    chosen: dict[str, str | None] = {}  # one draw per distinct word, in reading order
    substitutions: list[Substitution] = []
    for i, match in enumerate(matches):
        word = words[i]
        if kind == "antonym" and not _is_adjective(words, i):
            continue
        if word not in chosen:
            options = choices(word)
            chosen[word] = rng.choice(options) if options else None
        new = chosen[word]
        if new is not None:
            old = match.group()
            substitutions.append(
                Substitution(match.start(), match.end(), old, _match_case(old, new))
            )
    if not substitutions:
        return None
    pieces, cursor = [], 0
    for sub in substitutions:
        pieces += [text[cursor : sub.start], sub.new]
        cursor = sub.end
    pieces.append(text[cursor:])
    return Perturbation(kind, text, "".join(pieces), tuple(substitutions))


def perturb_all(
    texts: Mapping[int, str],
    kind: str,
    *,
    seed: int = 0,
    colors: Sequence[str] | None = None,
    min_color_distance: float = DEFAULT_MIN_COLOR_DISTANCE,
) -> dict[int, Perturbation]:
    """Perturb every query; return the changed ones by query id, in id order.

    Each query draws from its own generator seeded with (seed, kind, query id), so a query's
    result does not depend on which other queries are perturbed or in what order.
    """
    _check(kind, colors, min_color_distance)
    perturbed: dict[int, Perturbation] = {}
    for query_id in sorted(texts):
        rng = random.Random(f"{seed}:{kind}:{query_id}")  # str seeds hash stably (sha512)
        result = perturb(
            texts[query_id], kind, rng=rng, colors=colors, min_color_distance=min_color_distance
        )
        if result is not None:
            perturbed[query_id] = result
    return perturbed
