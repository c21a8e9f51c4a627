"""The explain report's charts as inline SVG: histograms of the concept metrics of failures.

matplotlib figures saved as SVG text through `mitl.bias_charts.figure_svg`, so the page needs
nothing to fetch and the same report gives the same bytes. Pure Python: no Django import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

from mitl.bias_charts import figure_svg

SCOPE = "explain-report"
HISTOGRAM_METRICS: tuple[str, ...] = ("ca", "ncs", "ce")
METRIC_TITLES = {
    "ca": "CA, concept agreement (higher is better)",
    "ncs": "NCS, non-common similarity (higher is better)",
    "ce": "CE, concept enumeration (lower is better)",
    "sd": "SD, size disagreement (lower is better)",
    "sd_rate": "SD rate (lower is better)",
    "aa": "AA, attribute agreement (higher is better)",
}
SERIES = (("agnostic", "query-agnostic", "#4575b4"), ("informed", "query-informed", "#fdae61"))


def has_values(summary: Mapping[str, Any] | None, metric: str) -> bool:
    """Return whether any failure falls into the summary's histogram of `metric`."""
    histogram = ((summary or {}).get("histograms") or {}).get(metric)
    return bool(histogram) and sum(histogram["counts"]) > 0


def histograms_svg(
    summaries: Mapping[str, Mapping[str, Any] | None],
    metrics: Sequence[str] = HISTOGRAM_METRICS,
) -> str:
    """Draw one panel per metric: failures per bin, query-agnostic and query-informed bars.

    `summaries` maps 'agnostic' / 'informed' to a `summarise_metrics` result (or None).
    """
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    figure = Figure(figsize=(3.3 * len(metrics) + 0.4, 2.9))
    axes_list = figure.subplots(1, len(metrics), squeeze=False)[0]
    shown = [(key, label, color) for key, label, color in SERIES if summaries.get(key)]
    width_share = 0.9 / max(len(shown), 1)
    for axes, metric in zip(axes_list, metrics, strict=True):
        for offset, (key, label, color) in enumerate(shown):
            histogram = summaries[key]["histograms"][metric]  # type: ignore[index]
            edges, counts = histogram["edges"], histogram["counts"]
            widths = [(b - a) * width_share for a, b in pairwise(edges)]
            lefts = [a + offset * w for a, w in zip(edges, widths, strict=False)]
            axes.bar(lefts, counts, width=widths, align="edge", color=color, label=label)
        axes.set_title(METRIC_TITLES[metric], fontsize=8)
        axes.set_xlabel(metric.upper(), fontsize=8)
        axes.set_ylabel("failures", fontsize=8)
        axes.tick_params(labelsize=7)
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        axes.grid(axis="y", alpha=0.3)
    if len(shown) > 1:
        axes_list[0].legend(frameon=False, fontsize=7)
    figure.tight_layout()
    return figure_svg(figure, scope=SCOPE)
