"""The truth of every image-caption pair of a synthetic dataset.

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

Pure Python: no Django import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mitl.judgements import MIDDLE_LEVELS, POSITIVE_LEVELS, SHORTCOMINGS, WRONG_CONCEPTS, Level
from mitl.synthetic.scenes import (
    COLORS,
    MAX_COUNT,
    MAX_GROUPS,
    POSITIONS,
    SHAPES,
    SIZES,
    CaptionSpec,
    ObjectGroup,
    Phrase,
    Scene,
    SyntheticDataset,
    check_vocabulary,
)

# The wrong concept named by each attribute a near match gets wrong.
_CONCEPT_OF: dict[str, str] = {
    "shape": "species",
    "color": "color",
    "count": "quantity",
    "position": "location",
    "size": "other",
}
_ATTRIBUTES: tuple[str, ...] = ("shape", "color", "count", "size", "position")


@dataclass(frozen=True)
class Truth:
    """The true answer for one image-caption pair, with the rationale of a middle level."""

    level: Level
    shortcomings: tuple[str, ...] = ()
    wrong_concepts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in self.shortcomings:
            check_vocabulary(name, SHORTCOMINGS, "shortcoming")
        for name in self.wrong_concepts:
            check_vocabulary(name, WRONG_CONCEPTS, "wrong concept")
        if self.shortcomings and self.level not in MIDDLE_LEVELS:
            raise ValueError(f"shortcomings are only for middle levels, not {self.level}")
        if self.wrong_concepts and "wrong_description" not in self.shortcomings:
            raise ValueError("wrong concepts need the 'wrong_description' shortcoming")

    @property
    def is_positive(self) -> bool:
        """Tell whether the pair is a positive under the ECCV Caption rule."""
        return self.level in POSITIVE_LEVELS


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


def phrase_findings(scene: Scene, caption: CaptionSpec) -> list[tuple[str, int | None, str | None]]:
    """Return, per phrase, what `judge` found: ("match" | "near" | "none", the group's index,
    the near match's wrong attribute); the instructions' examples explain their answer so."""
    return [_best_group(phrase, scene) for phrase in caption.phrases]


def _in_order(names: set[str], vocabulary: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(name for name in vocabulary if name in names)


def judge(scene: Scene, caption: CaptionSpec) -> Truth:
    """Return the true answer for a pair, by the rule in the module docstring."""
    kinds: list[str] = []
    covered: set[int] = set()
    concepts: set[str] = set()
    for kind, index, attribute in phrase_findings(scene, caption):
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
