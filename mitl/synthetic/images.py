"""Draw a synthetic scene with Pillow: each group of shapes in its third of the image.

Pure Python: no Django import. The same scene gives the same pixels on every run.
"""

from __future__ import annotations

import random

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
