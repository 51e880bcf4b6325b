"""Charts with matplotlib: any value against any key, and presets for the usual questions.

- `chart(records, Chart(x=..., y=..., series=...))`: the value `y` (a results key) of each
  experiment against the parameter `x`, one line (or group of bars) per value of `series`.
  It is a pivot report drawn: if another identity parameter varies, it refuses and says
  which (pick one with a filter), so a point never mixes experiments.
- presets: `weak` and `strong` (throughput and efficiency against the GPU count, with the
  ideal), `latency` (latency percentiles against QPS, for inference scenarios), `monitor`
  (the resource monitor's series of one experiment over time, the timed interval shaded),
  `efficiency` (throughput against average power, one point per experiment, with lines of
  equal samples per joule: docs/efficiency.md).

Axes carry units; error bars show the batch-time spread (one standard deviation, ddof=1)
where the value is a batch time or a throughput. Figures are made without pyplot (no global
state, no display needed).
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dlbs.errors import ResultsError
from dlbs.report.document import Report
from dlbs.report.keys import title
from dlbs.report.kinds.efficiency import ENERGY_COLUMNS, missing_reasons
from dlbs.report.metrics import EFFICIENCY, THROUGHPUT, TIME, metric
from dlbs.report.options import Options
from dlbs.report.render import key_text
from dlbs.report.select import Filter
from dlbs.report.tables import build_report
from dlbs.results.columns import Attempts, Record
from dlbs.results.usage import PREFIX as USE_PREFIX

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PRESETS = ("weak", "strong", "latency", "monitor", "efficiency")
POWER = "results.power_avg_w"
KINDS = ("line", "bar")
FORMATS = ("png", "svg")
LATENCY_KEYS = ("results.latency_p50", "results.latency_p90", "results.latency_p99")
SCENARIO = "exp.scenario"
# What sets a LoadGen run's load: the points of one line of the latency preset.
LOAD_KEYS = ("exp.target_qps",)
# Monitor series: (key, axis label); drawn when the experiment has them.
MONITOR_SERIES = (
    ("cpu", "CPU (% of a core)"), ("rss", "RSS (MiB)"), ("gpu_util", "GPU util (%)"),
    ("gpu_mem", "GPU memory (MiB)"), ("gpu_power", "GPU power (W)"),
)
_SPREAD_METRICS = (TIME, THROUGHPUT)
_SIZE = (7.0, 4.2)


@dataclass
class Chart:
    """What to draw: a preset, or `y` against `x` per `series`."""

    preset: str | None = None
    x: str | None = None
    y: str | None = None
    series: str | None = None
    kind: str = "line"
    filters: Sequence[Filter] = field(default_factory=tuple)
    latest: bool = False
    # monitor preset: the experiment (an exp.id or its unique prefix)
    experiment: str | None = None
    title: str | None = None


def chart(records: Attempts | Sequence[Record], request: Chart) -> Figure:
    """The figure `request` describes, from attempts (the monitor preset: whole records)."""
    if request.kind not in KINDS:
        raise ResultsError(f"unknown chart kind {request.kind!r}; expected line or bar")
    if request.preset is not None:
        if request.preset not in PRESETS:
            raise ResultsError(f"unknown preset {request.preset!r}; expected one of "
                               f"{', '.join(PRESETS)}")
        if request.preset == "monitor":
            if isinstance(records, Attempts):
                raise TypeError("the monitor preset reads whole records (Detail()), not "
                                "columns")
            return monitor_figure(records, request)
        if request.preset == "latency":
            return latency_figure(records, request)
        if request.preset == "efficiency":
            return efficiency_figure(build_report(records, Options(
                kind="efficiency", filters=request.filters, latest=request.latest)),
                request.title)
        # weak, strong: the report of that kind, drawn
        report = build_report(records, Options(kind=request.preset, filters=request.filters,
                                               latest=request.latest))
        return scaling_figure(report, request.title)
    if not request.x or not request.y:
        raise ResultsError("a chart needs --x KEY and --y results.X, or a --preset",
                           hint=f"presets: {', '.join(PRESETS)}")
    report = build_report(records, Options(
        kind="pivot", rows=[request.series] if request.series else [], cols=request.x,
        value=request.y, filters=request.filters, latest=request.latest))
    return pivot_figure(report, request)


def save(figure: Figure, fmt: str, svg_salt: str | None = None) -> bytes:
    """The figure as PNG or SVG bytes; with `svg_salt`, SVG for a page (text kept text).

    Every label is text: a `$` in a model's name or a run tag is drawn as written, never
    parsed as mathtext (`$x^{$` would end the drawing in a parse error).
    """
    import matplotlib
    from matplotlib.text import Text

    if fmt not in FORMATS:
        raise ResultsError(f"charts are written as .png or .svg, not .{fmt}")
    settings: dict[str, Any] = {"text.parse_math": False}
    if svg_salt is not None:
        settings.update({"svg.hashsalt": svg_salt, "svg.fonttype": "none"})
    for text in figure.findobj(Text):   # made before: the setting holds for those drawn now
        text.set_parse_math(False)
    buffer = io.BytesIO()
    with matplotlib.rc_context(settings):
        figure.savefig(buffer, format=fmt, dpi=150, bbox_inches="tight",
                       metadata={"Date": None} if fmt == "svg" else None)
    return buffer.getvalue()


_XML_PROLOGUE = re.compile(rb"^\s*<\?xml[^>]*>\s*(<!DOCTYPE[^>]*>\s*)?", re.DOTALL)


def inline_svg(figure: Figure, salt: str) -> str:
    """The figure as an <svg> element for a page: no XML prologue, ids salted by `salt`."""
    return _XML_PROLOGUE.sub(b"", save(figure, "svg", salt)).decode("utf-8")


def _figure(rows: int = 1, share_x: bool = True) -> tuple[Figure, list[Axes]]:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(_SIZE[0], _SIZE[1] * rows * (0.75 if rows > 1 else 1)),
                    layout="constrained")
    axes = figure.subplots(rows, 1, squeeze=False, sharex=share_x and rows > 1)
    return figure, [row[0] for row in axes]


def _integer_ticks(axes: Axes, values: Sequence[Any]) -> None:
    """Ticks at the values when they are integers (GPU counts): never at 1.5."""
    from matplotlib.ticker import MaxNLocator

    if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        if len(values) <= 12:
            axes.set_xticks(sorted(values))
        else:
            axes.xaxis.set_major_locator(MaxNLocator(integer=True))


def _label(report: Report, shown: tuple[Any, ...]) -> str:
    if not shown:
        return "all"
    if len(shown) == 1:
        return key_text(shown[0])
    return ", ".join(f"{title(key)} {key_text(value)}"
                     for key, value in zip(report.row_keys, shown))


def _error(report: Report, key: str, cell_value: float | None, spread: float | None) -> float:
    if key not in _SPREAD_METRICS or cell_value is None or spread is None:
        return 0.0
    return cell_value * spread / 100.0


def report_chart(report: Report) -> tuple[Figure, str]:
    """The chart of a report's kind (ReportKind.chart), and its caption."""
    draw, caption = REPORT_CHARTS[report.report_kind.chart]
    return draw(report), caption(report)


def scaling_figure(report: Report, heading: str | None = None) -> Figure:
    """Throughput and efficiency against the GPU count, one line per row, ideal dashed."""
    if not report.cells:
        raise ResultsError("nothing to plot: no ok experiments", hint=_notes(report))
    scales = [column for column in report.columns if isinstance(column, int)]
    if len(scales) < 2:
        # A sweep of batches (or models) on one GPU count: each line would be one point.
        ran = f"on {scales[0]} {report.scale_label}" if scales else "on no GPU count"
        raise ResultsError(
            f"nothing to scale: every experiment ran {ran}, so each line of the "
            f"{report.report_kind.name} scaling chart would be one point",
            hint="sweep the GPU count (-V 'exp.gpus=[\"0\", \"0,1\"]'), or draw the sweep as it "
                 "is: --x exp.replica_batch --y results.throughput --series exp.model")
    figure, (upper, lower) = _figure(2)
    for shown, cells in report.rows():
        points = sorted(cells)
        values = [cells[s].values.get(THROUGHPUT) for s in points]
        errors = [_error(report, THROUGHPUT, v, cells[s].spread_pct)
                  for s, v in zip(points, values)]
        line = upper.errorbar(points, _floats(values), yerr=errors, marker="o", capsize=3,
                              label=_label(report, shown))
        base = cells.get(1)
        if base is not None and base.values.get(THROUGHPUT):
            ideal = base.values[THROUGHPUT]
            upper.plot(scales, [ideal * s for s in scales], linestyle="--", linewidth=1,
                       color=line[0].get_color(), alpha=0.5)
        efficiency = [cells[s].values.get(EFFICIENCY) for s in points]
        lower.plot(points, _floats(efficiency), marker="o", color=line[0].get_color())
    upper.set_ylabel(metric(THROUGHPUT).title)
    upper.set_title(heading or report.report_kind.title)
    upper.legend(fontsize="small", title="dashed: ideal (linear)", title_fontsize="small")
    lower.axhline(100.0, color="grey", linestyle="--", linewidth=1)
    lower.set_ylabel("efficiency (%)")
    lower.set_xlabel(f"number of {report.scale_label}")
    lower.set_xticks(scales)
    for axes in (upper, lower):
        axes.grid(True, alpha=0.3)
    return figure


def pivot_figure(report: Report, request: Chart | None = None) -> Figure:
    """`y` against `x`, one series per row of the pivot report."""
    if not report.cells:
        raise ResultsError("nothing to plot: no ok experiment has the value",
                           hint=_notes(report))
    item = report.metrics[0]
    figure, (axes,) = _figure()
    columns = report.columns
    numeric = all(isinstance(c, int | float) and not isinstance(c, bool) for c in columns)
    rows = report.rows()
    width = 0.8 / max(1, len(rows))
    for index, (shown, cells) in enumerate(rows):
        points = [c for c in columns if c in cells]
        values = [cells[c].values.get(item.key) for c in points]
        errors = [_error(report, item.key, v, cells[c].spread_pct)
                  for c, v in zip(points, values)]
        label = _label(report, shown)
        bars = request is not None and request.kind == "bar"
        if bars or not numeric:
            positions = [columns.index(c) + (index - (len(rows) - 1) / 2) * width
                         for c in points]
            if bars:
                axes.bar(positions, _floats(values), width=width, yerr=errors, capsize=3,
                         label=label)
            else:
                axes.errorbar(positions, _floats(values), yerr=errors, marker="o", capsize=3,
                              label=label)
            axes.set_xticks(range(len(columns)), [key_text(c) for c in columns])
        else:
            axes.errorbar(points, _floats(values), yerr=errors, marker="o", capsize=3,
                          label=label)
            _integer_ticks(axes, columns)
    axes.set_xlabel(_axis_label(report.column_title))
    axes.set_ylabel(item.title)
    axes.set_title(request is not None and request.title or
                   f"{item.title} by {report.column_title}")
    if report.row_keys:
        axes.legend(fontsize="small", title=", ".join(title(k) for k in report.row_keys),
                    title_fontsize="small")
    axes.grid(True, alpha=0.3)
    return figure


def latency_figure(records: Attempts | Sequence[Record], request: Chart) -> Figure:
    """Latency percentiles against the achieved QPS, one panel per scenario.

    A panel's points are the experiments of one scenario at different loads (exp.target_qps);
    if another identity parameter varies within a scenario (a batch size, a model), a line
    would join different experiments: refused, as `--x/--y` refuse, with the keys to filter.
    """
    report = build_report(records, Options(kind="latency", filters=request.filters,
                                           latest=request.latest,
                                           columns=["qps", *LATENCY_KEYS]))
    points = [cell for cell in report.cells
              if isinstance(cell.values.get("results.qps"), float)]
    if not points:
        raise ResultsError("nothing to plot: no ok experiment has results.qps and latencies",
                           hint="the latency preset reads LoadGen scenario results")
    scenario = report.row_keys.index(SCENARIO) if SCENARIO in report.row_keys else None
    panels: dict[Any, list[Any]] = {}
    for cell in points:
        panels.setdefault(None if scenario is None else cell.shown[scenario], []).append(cell)
    mixed = [index for index, key in enumerate(report.row_keys)
             if key not in LOAD_KEYS and index != scenario and any(
                 len({cell.shown[index] for cell in cells}) > 1 for cells in panels.values())]
    if mixed:
        described = ", ".join(f"{report.row_keys[index]} ({len({c.shown[index] for c in points})}"
                              " values)" for index in mixed)
        first = report.row_keys[mixed[0]]
        raise ResultsError(
            f"the latency preset draws one line per percentile for each scenario, but within "
            f"a scenario {described} also vary",
            hint=f"keep one value with --filter, e.g. --filter {first}="
                 f"{key_text(points[0].shown[mixed[0]])}")
    figure, axes_list = _figure(len(panels), share_x=False)
    for axes, (name, cells) in zip(axes_list, sorted(panels.items(),
                                                     key=lambda item: key_text(item[0]))):
        cells.sort(key=lambda cell: cell.values["results.qps"])
        for key in LATENCY_KEYS:
            pairs = [(c.values["results.qps"], c.values.get(key)) for c in cells]
            pairs = [(x, y) for x, y in pairs if isinstance(y, float)]
            if pairs:
                axes.plot([x for x, _ in pairs], [y for _, y in pairs], marker="o",
                          label=key.removeprefix("results.latency_"))
        axes.set_xlabel(metric("results.qps").title)
        axes.set_ylabel("latency (ms)")
        axes.set_title(f"{'scenario ' + key_text(name) if name is not None else ''}",
                       fontsize="medium")
        axes.legend(fontsize="small", title="percentile", title_fontsize="small")
        axes.grid(True, alpha=0.3)
    figure.suptitle(request.title or "Latency percentiles against load")
    return figure


def bars_figure(report: Report) -> Figure:
    """A report's first value, one horizontal bar per row."""
    item = report.metrics[0]
    rows = report.rows()
    labels = [", ".join(key_text(v) for v in shown) for shown, _ in rows]
    values = [next(iter(cells.values())).values.get(item.key) for _, cells in rows]
    spreads = [next(iter(cells.values())).spread_pct for _, cells in rows]
    numbers = [v if isinstance(v, float) else 0.0 for v in values]
    errors = [_error(report, item.key, v, s) for v, s in zip(numbers, spreads)]
    figure, (axes,) = _figure()
    figure.set_size_inches(7.0, 0.9 + 0.3 * len(rows))
    positions = list(range(len(rows)))[::-1]
    axes.barh(positions, numbers, xerr=errors, capsize=3, color="tab:blue")
    axes.set_yticks(positions, labels, fontsize="small")
    axes.set_ylabel(", ".join(title(key) for key in report.row_keys))
    axes.set_xlabel(item.title)
    axes.grid(True, axis="x", alpha=0.3)
    return figure


def latency_bars_figure(report: Report) -> Figure:
    """Each row's latency percentiles as bars, one panel per scenario, each its own scale.

    An offline run's latency is the whole run's (seconds), a single stream's one query's
    (milliseconds): on one axis the offline bars would leave the others invisible.
    """
    shown = [item for item in report.metrics if item.key in LATENCY_KEYS]
    if not shown:
        return bars_figure(report)
    rows = report.rows()
    if not rows:
        raise ResultsError("nothing to plot: no ok experiments", hint=_notes(report))
    where = report.row_keys.index(SCENARIO) if SCENARIO in report.row_keys else None
    panels: dict[Any, list[tuple[str, dict[str, float]]]] = {}
    for values, cells in rows:
        found = next(iter(cells.values())).values
        label = ", ".join(key_text(v) for i, v in enumerate(values) if i != where)
        panels.setdefault(None if where is None else values[where], []).append(
            (label or "all", {item.key: found.get(item.key) for item in shown}))
    figure, all_axes = _figure(len(panels), share_x=False)
    height = sum(0.6 + 0.28 * len(items) * len(shown) / 2 for items in panels.values())
    figure.set_size_inches(7.0, 0.8 + height)
    width = 0.8 / len(shown)
    for axes, (scenario, items) in zip(all_axes, panels.items()):
        base = list(range(len(items)))[::-1]
        for number, item in enumerate(shown):
            numbers = [value if isinstance(value, float) else 0.0
                       for value in (found[item.key] for _, found in items)]
            axes.barh([b + (len(shown) - 1 - number - (len(shown) - 1) / 2) * width
                       for b in base], numbers, height=width, label=item.title)
        axes.set_yticks(base, [label for label, _ in items], fontsize="small")
        axes.set_xlabel("latency (ms)")
        if scenario is not None:
            axes.set_title(f"scenario {key_text(scenario)}", fontsize="medium")
        axes.grid(True, axis="x", alpha=0.3)
    all_axes[0].legend(fontsize="small")
    return figure


def efficiency_figure(report: Report, heading: str | None = None) -> Figure:
    """Throughput against average power, one point per row; dotted: equal samples per joule.

    A point up and to the left does more per joule: the lines through the origin are the
    samples per joule of the best and the worst row.
    """
    points = []
    for shown, cells in report.rows():
        values = next(iter(cells.values())).values
        power, speed = values.get(POWER), values.get(THROUGHPUT)
        if isinstance(power, float) and isinstance(speed, float) and power > 0:
            points.append((_label(report, shown), power, speed))
    if not points:
        cells = report.table_cells
        reasons = [] if cells is None else missing_reasons(cells, ENERGY_COLUMNS)
        said = "; ".join(f"{reason} ({len(members)} experiment(s))"
                         for reason, members in reasons)
        raise ResultsError("nothing to plot: no ok experiment has an average power"
                           + (f": {said}" if said else ""),
                           hint="dlbs reads the energy counters at the backend's timed marks "
                                "(monitor.energy, on by default: NVML on GPUs, RAPL on CPUs); "
                                "see docs/efficiency.md")
    figure, (axes,) = _figure()
    for label, power, speed in points:
        axes.plot([power], [speed], marker="o", linestyle="none", label=label)
        axes.annotate(f"{speed / power:.3g}/J", (power, speed), textcoords="offset points",
                      xytext=(5, 5), fontsize="small")
    top = max(power for _, power, _ in points) * 1.15
    for ratio in sorted({max(s / p for _, p, s in points), min(s / p for _, p, s in points)}):
        axes.plot([0.0, top], [0.0, ratio * top], linestyle=":", color="grey", linewidth=1)
    axes.set_xlim(0.0, top)
    axes.set_ylim(0.0, max(speed for _, _, speed in points) * 1.15)
    axes.set_xlabel(metric(POWER).title)
    axes.set_ylabel(metric(THROUGHPUT).title)
    axes.set_title(heading or "Throughput against power")
    if report.row_keys:
        axes.legend(fontsize="small", title=", ".join(title(k) for k in report.row_keys),
                    title_fontsize="small")
    axes.grid(True, alpha=0.3)
    return figure


# A report kind's chart (ReportKind.chart): how it is drawn, and its caption.
REPORT_CHARTS = {
    "scaling": (scaling_figure, lambda report: (
        "Throughput (dashed: ideal linear scaling from one GPU) and efficiency against the "
        "GPU count; error bars: one batch-time standard deviation.")),
    "pivot": (pivot_figure, lambda report: (
        f"{report.metrics[0].title} by {report.column_title}.")),
    "bars": (bars_figure, lambda report: f"{report.metrics[0].title} of each row."),
    "latency": (latency_bars_figure, lambda report: (
        "Latency percentiles of each row, one panel per scenario, each on its own scale (an "
        "offline run's latency is the whole run's).")),
    "efficiency": (efficiency_figure, lambda report: (
        "Throughput against the average power of the timed interval, one point per row, "
        "labelled with its samples per joule; dotted: the best and the worst samples per "
        "joule.")),
}


def monitor_figure(records: Sequence[Record], request: Chart) -> Figure:
    """The monitor's series of one experiment (its newest attempt) over time."""
    wanted = request.experiment
    if not wanted:
        raise ResultsError("the monitor preset draws one experiment: name it with --exp ID")
    found = {str(r.experiment.get("exp.id")): r for r in records
             if str(r.experiment.get("exp.id", "")).startswith(wanted)}
    if len(found) != 1:
        what = "no experiment" if not found else f"{len(found)} experiments"
        raise ResultsError(f"--exp {wanted}: {what} with that id (prefix)",
                           hint="`dlbs parse DB --keys exp.id,exp.model` lists the ids")
    matches = [r for r in records if str(r.experiment.get("exp.id")) in found]
    record = max(matches, key=lambda r: r.recency)
    experiment = record.experiment
    clock = experiment.get(f"{USE_PREFIX}time")
    present = [(name, label) for name, label in MONITOR_SERIES
               if isinstance(experiment.get(f"{USE_PREFIX}{name}"), list)]
    if not isinstance(clock, list) or not present:
        raise ResultsError(f"experiment {next(iter(found))} has no monitor series",
                           hint="run it with monitor.frequency > 0 (docs/monitor.md)")
    figure, axes_list = _figure(len(present))
    start = experiment.get(f"{USE_PREFIX}timed_start")
    end = experiment.get(f"{USE_PREFIX}timed_end")
    for axes, (name, label) in zip(axes_list, present):
        values = _floats(experiment[f"{USE_PREFIX}{name}"])
        axes.plot(_floats(clock), values, linewidth=1.2)
        axes.set_ylabel(label, fontsize="small")
        if isinstance(start, float) and isinstance(end, float):
            axes.axvspan(start, end, alpha=0.15, color="tab:green")
        axes.grid(True, alpha=0.3)
    axes_list[-1].set_xlabel("time since the benchmark started (s)")
    axes_list[0].set_title(request.title or (
        f"{experiment.get('exp.model')} ({next(iter(found))}): resource use; shaded: "
        "timed batches"))
    return figure


def _floats(values: Sequence[Any]) -> list[float]:
    return [float(v) if isinstance(v, int | float) and not isinstance(v, bool)
            and math.isfinite(v) else math.nan for v in values]


def _axis_label(column_title: str) -> str:
    units = {"replica batch": "replica batch (instances)",
             "effective batch": "effective batch (instances)", "gpus": "GPUs"}
    return units.get(column_title, column_title)


def _notes(report: Report) -> str | None:
    notes = [note for note in report.footnotes() if not note.startswith("No ok")]
    return " ".join(notes) or None
