"""Charts of the web pages as inline SVG (matplotlib; text kept as text, nothing fetched)."""

from __future__ import annotations

from typing import Any

from dlbs.history.series import Series
from dlbs.report.metrics import metric as metric_of


def inline_svg(figure: Any) -> str:
    """A matplotlib figure as an <svg> element (no XML prologue)."""
    from dlbs.report.plot import inline_svg as svg_element

    return svg_element(figure, "dlbs-serve")


def history_chart(series: Series, metric: str, window_mean: float | None) -> str:
    """One configuration's values over its runs (labelled by tag), its window's mean dashed."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8.0, 3.4), layout="constrained")
    axes = figure.subplots()
    positions = list(range(len(series.values)))
    axes.plot(positions, series.values.tolist(), marker="o", linewidth=1.2)
    if window_mean is not None:
        axes.axhline(window_mean, linestyle="--", color="tab:gray", linewidth=1)
    labels = [str(tag) if tag is not None else "(no tag)" for tag in series.tags]
    step = max(1, len(labels) // 12)
    axes.set_xticks(positions[::step], labels[::step], rotation=30, ha="right",
                    fontsize="small")
    axes.set_ylabel(metric_of(metric).title)
    axes.grid(True, alpha=0.3)
    return inline_svg(figure)
