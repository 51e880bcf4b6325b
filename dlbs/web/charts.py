"""Charts of the web pages as inline SVG (matplotlib; text kept as text, nothing fetched)."""

from __future__ import annotations

from typing import Any

from dlbs.history.check import Verdict
from dlbs.history.series import History, Series
from dlbs.report.metrics import metric as metric_of
from dlbs.report.select import as_text

# Markers and colours that tell hosts apart (cycled beyond).
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_COLOURS = ("tab:blue", "tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:olive",
            "tab:cyan", "tab:gray")
_VERDICT_COLOURS = {"regression": "#cf222e", "failed": "#cf222e", "improvement": "#1a7f37"}


def inline_svg(figure: Any) -> str:
    """A matplotlib figure as an <svg> element (no XML prologue)."""
    from dlbs.report.plot import inline_svg as svg_element

    return svg_element(figure, "dlbs-serve")


def history_chart(series: Series, history: History, verdict: Verdict, z: float,
                  drawn: int) -> str:
    """One configuration's newest `drawn` runs (labelled by tag), a marker per host.

    The lookback window's band (mean +- z * std) spans its runs; the judged run is ringed,
    in red when it regressed and green when it improved.
    """
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8.0, 3.6), layout="constrained")
    axes = figure.subplots()
    values = series.values[-drawn:].tolist()
    hosts = series.hosts[-drawn:]
    count = len(series.values)
    first = count - len(values)
    positions = list(range(first, count))
    axes.plot(positions, values, color="tab:gray", linewidth=1, zorder=1)
    distinct = list(dict.fromkeys(as_text(host) for host in hosts))
    for number, host in enumerate(distinct):
        mine = [i for i, other in enumerate(hosts) if as_text(other) == host]
        axes.scatter([positions[i] for i in mine], [values[i] for i in mine],
                     marker=_MARKERS[number % len(_MARKERS)],
                     color=_COLOURS[number % len(_COLOURS)], s=28, zorder=3,
                     label=f"host {host or '(none)'}")
    if verdict.mean is not None and verdict.std is not None:
        start = count - 1 - verdict.window
        spread = z * verdict.std
        axes.fill_between([start - 0.4, count - 1.6], verdict.mean - spread,
                          verdict.mean + spread, color="tab:blue", alpha=0.12, linewidth=0,
                          label=f"window mean ± {z:g}·std", zorder=0)
        axes.hlines(verdict.mean, start - 0.4, count - 0.6, linestyles="--",
                    colors="tab:gray", linewidth=1, label="window mean", zorder=2)
    if series.problem is None:
        colour = _VERDICT_COLOURS.get(verdict.status, "black")
        axes.scatter([count - 1], [values[-1]], s=160, facecolors="none", edgecolors=colour,
                     linewidths=2, zorder=4, label=f"judged: {verdict.status}")
        if verdict.status in ("regression", "improvement"):
            axes.annotate(verdict.status, (count - 1, values[-1]), textcoords="offset points",
                          xytext=(-12, 0), ha="right", va="center", color=colour,
                          fontsize="small")
    labels = [str(tag) if tag is not None else "(no tag)" for tag in series.tags[-drawn:]]
    step = max(1, len(labels) // 12)
    axes.set_xticks(positions[::step], labels[::step], rotation=30, ha="right",
                    fontsize="small")
    axes.set_xlim(first - 0.8, count - 0.2)
    axes.set_ylabel(metric_of(history.metric).title)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0),
                borderaxespad=0.0)
    return inline_svg(figure)
