"""Report tables as data: regular, weak scaling and strong scaling.

The numbers follow DLBS, minus its truncation and capping:
throughput = effective batch x 1000 / mean batch time (ms); weak scaling (same replica
batch): efficiency = t1 / tN; strong scaling (same effective batch): efficiency =
t1 / (N x tN), both in percent rounded to two decimals and never capped at 100.

Only experiments whose status is ok count; the latest result of each `exp.id` is used.
When several experiments (different `exp.id`s) land in one cell, their batch times are
averaged and the cell says how many there were.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

from dlbs.errors import ResultsError
from dlbs.results.sources import Record, latest_per_id

REPORT_TYPES = ("regular", "weak", "strong")

# Row keys of each report type, in column order. `device` and `gpus` let mixed inputs
# stay apart; renderers fold away key columns that hold one value only.
ROW_KEYS: dict[str, tuple[str, ...]] = {
    "regular": ("model", "dtype", "phase", "device", "gpus", "replica_batch",
                "effective_batch"),
    "weak": ("model", "dtype", "phase", "device", "replica_batch"),
    "strong": ("model", "dtype", "phase", "device", "effective_batch"),
}
# Key columns a renderer always shows, even when every row has the same value.
ALWAYS_SHOWN = {"model", "replica_batch", "effective_batch"}

KEY_TITLES = {
    "model": "model", "dtype": "dtype", "phase": "phase", "device": "device",
    "gpus": "gpus", "replica_batch": "replica batch", "effective_batch": "effective batch",
}


@dataclass
class Cell:
    """One measured point: a row of the report at one scale (GPU or replica count)."""

    key: dict[str, Any]
    scale: int
    time_ms: float
    effective_batch: float
    samples: int
    throughput: float = 0.0
    speedup: float | None = None
    efficiency: float | None = None
    # Batch-time standard deviation in percent of the mean (the largest of the cell's
    # experiments); None when the results carry no results.time_std.
    spread_pct: float | None = None

    def record(self, kind: str) -> dict[str, Any]:
        """The cell as a flat record (CSV row, JSON object), numbers rounded to 2 decimals."""
        record = dict(self.key)
        if kind != "regular":
            record["gpus"] = self.scale
        record["time_ms"] = _round(self.time_ms)
        record["throughput"] = _round(self.throughput)
        if kind != "regular":
            record["speedup"] = _round(self.speedup)
            record["efficiency"] = _round(self.efficiency)
        record["time_std_pct"] = _round(self.spread_pct)
        record["samples"] = self.samples
        return record


@dataclass
class Report:
    """A report of one type: its cells and what was left out."""

    kind: str
    cells: list[Cell] = field(default_factory=list)
    # results.status -> count of latest results that do not count (failure, timeout, ...).
    not_counted: Counter[str] = field(default_factory=Counter)
    # ok results lacking what a table needs (model, batch, a positive batch time).
    incomplete: int = 0
    superseded: int = 0
    counted: int = 0
    scale_label: str = "GPUs"

    @property
    def row_keys(self) -> tuple[str, ...]:
        """Key fields of this report type, in column order."""
        return ROW_KEYS[self.kind]

    @property
    def scales(self) -> list[int]:
        """The GPU (or replica) counts that appear, ascending."""
        return sorted({cell.scale for cell in self.cells})

    def rows(self) -> list[tuple[tuple[Any, ...], dict[int, Cell]]]:
        """Cells grouped by row key (in display order), each row mapping scale -> cell."""
        grouped: dict[tuple[Any, ...], dict[int, Cell]] = {}
        for cell in self.cells:
            row = tuple(cell.key[name] for name in self.row_keys)
            grouped.setdefault(row, {})[cell.scale] = cell
        return sorted(grouped.items(), key=lambda item: _row_order(item[0]))

    def records(self) -> list[dict[str, Any]]:
        """One flat record per cell, in display order."""
        return [
            cells[scale].record(self.kind)
            for _, cells in self.rows()
            for scale in sorted(cells)
        ]

    def footnotes(self) -> list[str]:
        """Lines that say what the tables leave out and how cells were combined."""
        notes = []
        if self.not_counted:
            parts = ", ".join(f"{count} {status}" for status, count in
                              sorted(self.not_counted.items()))
            notes.append(f"Not counted (status not ok): {parts}.")
        if self.incomplete:
            notes.append(
                f"Not counted: {self.incomplete} ok experiment(s) without a model, a batch "
                "size or a positive results.time."
            )
        if self.superseded:
            notes.append(
                f"{self.superseded} older result(s) of re-run experiments replaced by the "
                "latest of the same exp.id."
            )
        if any(cell.samples > 1 for cell in self.cells):
            notes.append("(n=K): the cell averages the batch times of K experiments.")
        spreads = [cell for cell in self.cells if cell.spread_pct is not None]
        if spreads:
            worst = max(spreads, key=lambda cell: cell.spread_pct or 0.0)
            notes.append(
                f"Batch-time spread (std / mean): at most {worst.spread_pct:.1f}% "
                f"({worst.key['model']}, {worst.scale} {self.scale_label}); differences "
                "smaller than the spread are not significant.")
        if not self.cells:
            notes.append("No ok experiments to report.")
        return notes


def build_report(records: Iterable[Record], kind: str) -> Report:
    """Compute the `kind` report ("regular", "weak" or "strong") from experiment records."""
    if kind not in REPORT_TYPES:
        raise ResultsError(
            f"unknown report type {kind!r}; expected one of {', '.join(REPORT_TYPES)}"
        )
    latest, superseded = latest_per_id(records)
    report = Report(kind=kind, superseded=superseded)
    groups: dict[tuple[Any, ...], list[tuple[float, float, float | None]]] = {}
    keys: dict[tuple[Any, ...], tuple[dict[str, Any], int]] = {}
    devices = set()
    for record in latest:
        experiment = record.experiment
        status = str(experiment.get("results.status", "failure"))
        if status != "ok":
            report.not_counted[status] += 1
            continue
        point = _point(experiment)
        if point is None:
            report.incomplete += 1
            continue
        key, scale, time_ms, effective_batch = point
        report.counted += 1
        devices.add(key["device"])
        group = (*(key[name] for name in ROW_KEYS[kind]), scale)
        std = experiment.get("results.time_std")
        spread = 100.0 * std / time_ms if _positive_number(std) or std == 0 else None
        groups.setdefault(group, []).append((time_ms, effective_batch, spread))
        keys[group] = ({name: key[name] for name in ROW_KEYS[kind]}, scale)
    for group, samples in groups.items():
        key, scale = keys[group]
        time_ms = fmean(time for time, _, _ in samples)
        effective_batch = fmean(batch for _, batch, _ in samples)
        spreads = [spread for _, _, spread in samples if spread is not None]
        report.cells.append(Cell(
            key=key, scale=scale, time_ms=time_ms, effective_batch=effective_batch,
            samples=len(samples), throughput=effective_batch * 1000.0 / time_ms,
            spread_pct=max(spreads) if spreads else None,
        ))
    if kind != "regular":
        _add_scaling(report)
    report.scale_label = _scale_label(devices)
    return report


def _point(experiment: dict[str, Any]) -> tuple[dict[str, Any], int, float, float] | None:
    """Row key, scale, batch time and effective batch of an ok experiment; None if unusable."""
    time_ms = experiment.get("results.time")
    model = experiment.get("exp.model")
    replica_batch = _positive_int(experiment.get("exp.replica_batch"))
    if not _positive_number(time_ms) or not model or replica_batch is None:
        return None
    device = str(experiment.get("exp.device_type") or _device(experiment))
    gpus = _positive_int(experiment.get("exp.num_gpus"))
    # On CPU (num_gpus 0) the scale is the replica count, i.e. the nodes (DLBS's definition).
    scale = gpus or _positive_int(experiment.get("exp.num_replicas")) or \
        _positive_int(experiment.get("exp.num_nodes")) or 1
    effective_batch = _positive_int(experiment.get("exp.effective_batch"))
    if effective_batch is None:
        effective_batch = replica_batch * scale
    key = {
        "model": str(model),
        "dtype": str(experiment.get("exp.dtype") or ""),
        "phase": str(experiment.get("exp.phase") or ""),
        "device": device,
        "gpus": scale,
        "replica_batch": replica_batch,
        "effective_batch": effective_batch,
    }
    return key, scale, float(time_ms), float(effective_batch)


def _add_scaling(report: Report) -> None:
    """Speedup and efficiency against the one-GPU (one-replica) cell of the same row."""
    for _, cells in report.rows():
        base = cells.get(1)
        if base is None:
            continue
        for scale, cell in cells.items():
            if report.kind == "weak":
                # Same replica batch: N times the work per step, ideally in the same time.
                cell.speedup = cell.throughput / base.throughput
                cell.efficiency = 100.0 * base.time_ms / cell.time_ms
            else:
                # Same effective batch: the work of a step is split N ways.
                cell.speedup = base.time_ms / cell.time_ms
                cell.efficiency = 100.0 * base.time_ms / (scale * cell.time_ms)


def _scale_label(devices: set[str]) -> str:
    if devices == {"cpu"}:
        return "replicas"
    if "cpu" in devices:
        return "GPUs (replicas on CPU)"
    return "GPUs"


def _device(experiment: dict[str, Any]) -> str:
    return "gpu" if _positive_int(experiment.get("exp.num_gpus")) else "cpu"


def _positive_number(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    return value if isinstance(value, int) and value > 0 else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


_DIGITS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple[Any, ...]:
    """Sort key that puts resnet18 before resnet50 before resnet101."""
    return tuple(int(part) if part.isdigit() else part.lower()
                 for part in _DIGITS.split(text))


def _row_order(row: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(natural_key(value) if isinstance(value, str) else (value,) for value in row)
