"""The calibration report's chart as inline SVG: Pearson correlation of each proxy with the
human ratings, over all pairs and over non-ground-truth pairs. Pure Python (matplotlib)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mitl.bias_charts import figure_svg

SCOPE = "relevance-calibration"
GROUPS = (("all", "all pairs", "#4575b4"), ("non_gt", "non-ground-truth pairs", "#d73027"))


def calibration_svg(table: Sequence[Mapping[str, Any]], *, title: str) -> str:
    """Draw one pair of horizontal bars per proxy (Pearson over all / non-GT pairs)."""
    from matplotlib.figure import Figure

    names = [str(row["proxy"]) for row in table]
    figure = Figure(figsize=(7.5, 0.42 * max(len(names), 1) + 1.3))
    axes = figure.add_subplot()
    height = 0.38
    for offset, (group, label, color) in enumerate(GROUPS):
        values = [row[group]["pearson"] or 0.0 for row in table]
        positions = [i + (offset - 0.5) * height for i in range(len(names))]
        axes.barh(positions, values, height=height, color=color, label=label)
    axes.set_yticks(range(len(names)), names)
    axes.invert_yaxis()
    axes.set_xlim(0, 1)
    axes.set_xlabel("Pearson correlation with the human ratings")
    axes.set_title(title)
    axes.legend(loc="lower right", fontsize="small")
    figure.tight_layout()
    return figure_svg(figure, scope=SCOPE)
