"""The tables of run_efficiency.py's results: energy two ways, MFU by hand, the monitor's cost.

Usage::

    python bench/efficiency/analyze.py RESULTS_FOLDER   # holds results.db, reference.json

For every attempt in `results.db`: what dlbs stored (throughput, energy from NVML's
counter between the backend's marks, energy per image, average power, FLOPs per image, MFU,
peak memory), and beside it the same energy as the time integral of the sampled power over
the same interval (dlbs.results.energy.power_energy on the stored `results.use.gpu_power`),
MFU recomputed by hand (FLOPs per image x images per second / peak), and for each
experiment run with the monitor on and off, the throughput ratio. Writes `results.json` and
`results.md` into the folder and prints the Markdown.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from dlbs.results import energy, usage
from dlbs.results.store import open_store


def label(params: dict[str, Any]) -> str:
    compiled = "compiled" if params.get("pytorch.compile") else "eager"
    monitor = "monitor on" if params.get("monitor.frequency") else "monitor off"
    return f"{params.get('exp.phase')}, {compiled}, {monitor}"


def row_of(attempt: Any) -> dict[str, Any]:
    results, summary = attempt.results, attempt.summary
    row: dict[str, Any] = {"row": label(attempt.params), "attempt": attempt.attempt,
                           "status": attempt.status}
    for key in ("throughput", "energy_j", "energy_interval_s", "power_avg_w",
                "energy_per_sample_j", "samples_per_joule", "energy_source",
                "flops_per_sample", "achieved_tflops", "peak_tflops", "mfu",
                "gpu_mem_peak_mb", "use.gpu_mem_max", "use.gpu_power_mean", "gpu_model"):
        value = summary.get(f"results.{key}", results.get(f"results.{key}"))
        if value is not None:
            row[key] = value
    interval = usage.marked_interval(results, attempt.started_at)
    times, power = results.get("results.use.time"), results.get("results.use.gpu_power")
    if interval and isinstance(times, list) and isinstance(power, list):
        integral = energy.power_energy(times, power, *interval, energy.sampling_period(times))
        row["power_integral_j"] = integral
        row["samples"] = len(times)
        if integral and row.get("energy_j"):
            row["counter_vs_integral"] = row["energy_j"] / integral - 1.0
    if all(isinstance(row.get(k), int | float) for k in ("flops_per_sample", "throughput",
                                                          "peak_tflops")):
        row["mfu_by_hand"] = (row["flops_per_sample"] * row["throughput"]
                              / (row["peak_tflops"] * 1e12))
    return row


def monitor_cost(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Throughput with the monitor on over off, minus 1, for each experiment run both ways."""
    found = {}
    for on in rows:
        if not on["row"].endswith("monitor on"):
            continue
        twin = on["row"].replace("monitor on", "monitor off")
        off = next((r for r in rows if r["row"] == twin and r.get("throughput")), None)
        if off and on.get("throughput"):
            found[on["row"].rsplit(",", 1)[0]] = on["throughput"] / off["throughput"] - 1.0
    return found


def markdown(rows: list[dict[str, Any]], cost: dict[str, float], reference: dict) -> str:
    lines = ["| row | img/s | J/img | img/J | avg W | energy J (counter) | J (power "
             "integral) | counter/integral - 1 | GFLOP/img | TFLOPS | MFU | MFU by hand | "
             "peak MiB (allocator) | GPU memory MiB (monitor) |",
             "|" + "---|" * 14]

    def cell(row: dict, key: str, scale: float = 1.0, digits: int = 4) -> str:
        value = row.get(key)
        return f"{value * scale:.{digits}g}" if isinstance(value, int | float) else "-"

    for row in rows:
        lines.append(
            f"| {row['row']} | {cell(row, 'throughput')} | {cell(row, 'energy_per_sample_j')} "
            f"| {cell(row, 'samples_per_joule')} | {cell(row, 'power_avg_w')} "
            f"| {cell(row, 'energy_j')} | {cell(row, 'power_integral_j')} "
            f"| {cell(row, 'counter_vs_integral', 100, 3)} % "
            f"| {cell(row, 'flops_per_sample', 1e-9)} | {cell(row, 'achieved_tflops')} "
            f"| {cell(row, 'mfu', 100, 3)} % | {cell(row, 'mfu_by_hand', 100, 3)} % "
            f"| {cell(row, 'gpu_mem_peak_mb', 1, 6)} | {cell(row, 'use.gpu_mem_max', 1, 6)} |")
    lines.append("")
    for name, change in cost.items():
        lines.append(f"- monitor on vs off, {name}: throughput {change * 100:+.2f} %")
    if reference:
        lines.append(f"- plain PyTorch loop (reference_loop.py), training, eager, "
                     f"channels-last: {reference.get('ref.throughput', '-')} img/s")
    return "\n".join(lines) + "\n"


def main(folder: str) -> int:
    base = Path(folder)
    with open_store(str(base / "results.db"), create=False, read_only=True) as store:
        attempts = store.attempts()
    rows = [row_of(attempt) for attempt in attempts]
    cost = monitor_cost(rows)
    reference_file = base / "reference.json"
    reference = json.loads(reference_file.read_text()) if reference_file.exists() else {}
    (base / "results.json").write_text(json.dumps(
        {"rows": rows, "monitor_cost": cost, "reference": reference}, indent=1) + "\n")
    text = markdown(rows, cost, reference)
    (base / "results.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
