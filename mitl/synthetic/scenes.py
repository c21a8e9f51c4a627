"""The synthetic dataset's vocabulary and data: object groups, scenes and caption phrases.

A scene is one image: one to three groups of identical coloured shapes, the most salient
(main) group first. A caption is a tuple of phrases; each phrase mentions one object group by
its shape and, optionally, its colour, count, size and position. Pure Python: no Django import.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

SHAPES: tuple[str, ...] = ("circle", "square", "triangle", "star", "cross", "ring")
COLORS: tuple[str, ...] = ("red", "green", "blue", "yellow", "purple", "orange")
POSITIONS: tuple[str, ...] = ("left", "center", "right")
SIZES: tuple[str, ...] = ("small", "large")
MAX_COUNT = 3
MAX_GROUPS = 3


@dataclass(frozen=True)
class ObjectGroup:
    """`count` identical shapes of one class and colour in one region of the image."""

    shape: str
    color: str
    count: int
    size: str  # "small" | "large"
    position: str  # one of POSITIONS

    def __post_init__(self) -> None:
        check_vocabulary(self.shape, SHAPES, "shape")
        check_vocabulary(self.color, COLORS, "color")
        check_vocabulary(self.size, SIZES, "size")
        check_vocabulary(self.position, POSITIONS, "position")
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


def check_vocabulary(value: str, vocabulary: tuple[str, ...], what: str) -> None:
    """Raise ValueError unless `value` is one of `vocabulary`; `what` names it."""
    if value not in vocabulary:
        raise ValueError(f"unknown {what} {value!r}; expected one of {', '.join(vocabulary)}")
