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
    figure = Figure(figsize=(7.5, 0.42 * max(len(names), 1) + 1.7))
    axes = figure.add_subplot()
    height = 0.38
    for offset, (group, label, color) in enumerate(GROUPS):
        values = [row[group]["pearson"] or 0.0 for row in table]
        positions = [i + (offset - 0.5) * height for i in range(len(names))]
        axes.barh(positions, values, height=height, color=color, label=label)
    axes.set_yticks(range(len(names)), names)
    axes.invert_yaxis()
    lowest = min((row[g]["pearson"] or 0.0 for row in table for g, _, _ in GROUPS), default=0.0)
    axes.set_xlim(min(0.0, lowest - 0.05), 1)  # a proxy may disagree with people
    axes.axvline(0, color="#333333", linewidth=0.8)
    axes.set_xlabel("Pearson correlation with the human ratings")
    axes.set_title(title)
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize="small")
    figure.tight_layout()
    return figure_svg(figure, scope=SCOPE)
