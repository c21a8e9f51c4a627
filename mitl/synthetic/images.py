"""Draw a synthetic scene with Pillow: each group of shapes in its third of the image.

Pure Python: no Django import. The same scene gives the same pixels on every run, and
`shape_boxes` gives the boxes of the shapes drawn (the scene's object instances).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

from mitl.synthetic.scenes import POSITIONS, Scene

_RGB: dict[str, tuple[int, int, int]] = {
    "red": (214, 39, 40),
    "green": (44, 160, 44),
    "blue": (31, 90, 200),
    "yellow": (232, 196, 20),
    "purple": (148, 73, 189),
    "orange": (255, 127, 14),
}
_BACKGROUND = (246, 245, 240)
_SUPERSAMPLE = 3
_RADIUS = {"small": 0.06, "large": 0.095}  # fraction of the image side


@dataclass(frozen=True)
class ShapeBox:
    """One shape of a scene: its class, colour and size word, and where it is drawn.

    Coordinates are pixels of a `size` x `size` canvas; `bbox` is COCO's [x, y, w, h] of
    the drawn outline.
    """

    shape: str
    color: str
    size: str  # "small" | "large"
    cx: float
    cy: float
    radius: float
    bbox: tuple[float, float, float, float]


def shape_boxes(scene: Scene, size: float) -> list[ShapeBox]:
    """Return every shape of the scene placed on a `size`-pixel canvas, group by group.

    The jitter depends on the scene only, so the layout scales with `size`: `render`
    draws the boxes of its supersampled canvas, and the boxes of the final size are the
    same shapes scaled down.
    """
    # A str seed is hashed with SHA-512, so the jitter is stable across runs and platforms.
    rng = random.Random(f"{scene.image_id}:{scene.groups!r}")
    third = size / len(POSITIONS)
    boxes = []
    for group in scene.groups:
        r = _RADIUS[group.size] * size
        left = POSITIONS.index(group.position) * third
        slot = size / group.count
        for k in range(group.count):
            cx = left + third / 2 + rng.uniform(-1, 1) * max(0.0, third / 2 - r * 1.2)
            cy = slot * (k + 0.5) + rng.uniform(-1, 1) * max(0.0, slot / 2 - r * 1.2)
            x0, y0, x1, y1 = _extent(group.shape, cx, cy, r)
            bbox = (x0, y0, x1 - x0, y1 - y0)
            boxes.append(ShapeBox(group.shape, group.color, group.size, cx, cy, r, bbox))
    return boxes


def _star(cx: float, cy: float, r: float) -> list[tuple[float, float]]:
    points = []
    for k in range(10):
        radius = r if k % 2 == 0 else r * 0.45
        angle = np.pi * k / 5 - np.pi / 2
        points.append((cx + radius * float(np.cos(angle)), cy + radius * float(np.sin(angle))))
    return points


def _triangle(cx: float, cy: float, r: float) -> list[tuple[float, float]]:
    return [(cx, cy - r), (cx + r * 0.95, cy + r * 0.75), (cx - r * 0.95, cy + r * 0.75)]


_SQUARE_HALF = 0.85  # a square's half side, as a fraction of the radius
_CROSS_HALF_WIDTH = 0.34
_STAR_RADIUS = 1.1


def _extent(shape: str, cx: float, cy: float, r: float) -> tuple[float, float, float, float]:
    """Return the (x0, y0, x1, y1) bounds of the outline `_draw_shape` draws."""
    if shape == "square":
        s = r * _SQUARE_HALF
        return (cx - s, cy - s, cx + s, cy + s)
    if shape in ("triangle", "star"):
        points = _triangle(cx, cy, r) if shape == "triangle" else _star(cx, cy, r * _STAR_RADIUS)
        xs, ys = [x for x, _ in points], [y for _, y in points]
        return (min(xs), min(ys), max(xs), max(ys))
    return (cx - r, cy - r, cx + r, cy + r)  # circle, ring (outline drawn inside), cross


def _draw_shape(
    draw: ImageDraw.ImageDraw, shape: str, cx: float, cy: float, r: float, rgb: tuple[int, int, int]
) -> None:
    box = (cx - r, cy - r, cx + r, cy + r)
    if shape == "circle":
        draw.ellipse(box, fill=rgb)
    elif shape == "ring":
        draw.ellipse(box, outline=rgb, width=max(1, round(r * 0.38)))
    elif shape == "square":
        s = r * _SQUARE_HALF
        draw.rectangle((cx - s, cy - s, cx + s, cy + s), fill=rgb)
    elif shape == "triangle":
        draw.polygon(_triangle(cx, cy, r), fill=rgb)
    elif shape == "star":
        draw.polygon(_star(cx, cy, r * _STAR_RADIUS), fill=rgb)
    else:  # cross
        w = r * _CROSS_HALF_WIDTH
        draw.rectangle((cx - r, cy - w, cx + r, cy + w), fill=rgb)
        draw.rectangle((cx - w, cy - r, cx + w, cy + r), fill=rgb)


def render(scene: Scene, *, size: int = 128) -> Image.Image:
    """Draw the scene as an RGB image: each group in its third of the width."""
    big = size * _SUPERSAMPLE
    image = Image.new("RGB", (big, big), _BACKGROUND)
    draw = ImageDraw.Draw(image)
    for box in shape_boxes(scene, big):
        _draw_shape(draw, box.shape, box.cx, box.cy, box.radius, _RGB[box.color])
    return image.resize((size, size), Image.Resampling.LANCZOS)
