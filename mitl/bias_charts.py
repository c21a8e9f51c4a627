"""The bias report's charts as inline SVG: answer shares as stacked bars, bias by subset size.

Charts are matplotlib figures saved as SVG text, so the page that holds them needs no images,
scripts, fonts or style sheets to fetch. matplotlib is imported only while a chart is drawn,
on the Agg canvas, with a fixed SVG id salt so the same report gives the same bytes. Pure
Python: no Django import.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

LEVEL_COLORS = {"yes": "#1a9850", "weak_yes": "#a6d96a", "weak_no": "#fdae61", "no": "#d73027"}
LEGEND_INCHES = 0.35  # the answer legend's row above the bars
DIRECTION_TITLES = {
    "t2i": "Text-to-image (caption queries)",
    "i2t": "Image-to-text (image queries)",
}


def stacked_bars_svg(
    rows: Sequence[tuple[str, Mapping[str, Any]]], levels: Sequence[Mapping[str, str]], label: str
) -> str:
    """Draw one horizontal bar per row, split into the answer shares (%)."""
    from matplotlib.figure import Figure

    height = 0.45 * max(len(rows), 1) + 1.4
    figure = Figure(figsize=(7.5, height))
    axes = figure.add_subplot()
    names = [name for name, _ in rows]
    left = [0.0] * len(rows)
    for level in levels:
        widths = [100 * (shares["shares"][level["value"]] or 0.0) for _, shares in rows]
        axes.barh(
            names,
            widths,
            left=left,
            color=LEVEL_COLORS.get(level["value"], "#999999"),
            label=level["label"],
        )
        left = [a + b for a, b in zip(left, widths, strict=True)]
    axes.invert_yaxis()  # first row on top, as in the table
    axes.set_xlim(0, 100)
    axes.set_xlabel("share of judgements (%)")
    axes.set_ylabel(label)
    # Centred on the figure, not on the axes: long row names push the axes to the right,
    # and a legend centred on them ran off the edge ("100% NO" read "100%").
    handles, labels = axes.get_legend_handles_labels()
    figure.legend(handles, labels, ncol=len(levels), loc="upper center", frameon=False)
    figure.tight_layout(rect=(0, 0, 1, 1 - LEGEND_INCHES / height))
    return _svg(figure)


def bias_by_size_svg(by_direction: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """Draw B, self-bias and non-self-bias against the subset size, one panel per direction."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(4.2 * len(by_direction) + 0.6, 3.4))
    axes_list = figure.subplots(1, len(by_direction), squeeze=False)[0]
    series = (
        ("bias", "model bias B", "#0b57d0", "o"),
        ("self_bias", "self-bias", "#b3261e", "s"),
        ("non_self_bias", "non-self-bias", "#146c2e", "^"),
    )
    for axes, (direction, rows) in zip(axes_list, by_direction.items(), strict=True):
        sizes = [row["size"] for row in rows]
        for key, name, color, marker in series:
            values = [float("nan") if row[key] is None else row[key] for row in rows]
            axes.plot(sizes, values, marker=marker, color=color, label=name)
        axes.set_title(DIRECTION_TITLES.get(direction, direction), fontsize=10)
        axes.set_xlabel("annotators in the subset")
        axes.set_ylabel("mean |Δ R@1| (points)")
        axes.set_xticks(sizes)
        axes.set_ylim(bottom=0)
        axes.grid(alpha=0.3)
    axes_list[0].legend(frameon=False, fontsize=9)
    figure.tight_layout()
    return _svg(figure)


def _svg(figure: Any) -> str:
    return figure_svg(figure, scope="bias-report")


def figure_svg(figure: Any, *, scope: str) -> str:
    """Return the figure as an inline `<svg>` element (no XML prolog, no date, fixed ids).

    `scope` is the class of the element that holds the chart on its page.
    """
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": f"mitl-{scope}", "svg.fonttype": "none"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    # matplotlib's default-stroke rule uses a bare `*` selector, which inline would reach
    # every element of the embedding page: keep it to the page's own charts.
    text = text.replace("*{stroke-linejoin", f".{scope} svg *{{stroke-linejoin")
    return text[text.index("<svg") :]
