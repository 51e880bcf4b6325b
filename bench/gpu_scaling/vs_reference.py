"""dlbs's weak scaling beside plain DDP's, as a markdown table.

    python bench/gpu_scaling/vs_reference.py WEAK_JSON REFERENCE_LOG [--model resnet50]

WEAK_JSON is `dlbs report --type weak --format json` of the sweep; REFERENCE_LOG holds, per
GPU count, a `__ref.gpus__=N` line followed by what bench/pytorch_gpu/ddp_reference.py
printed (`__ref.throughput__=...`). Prints one row per GPU count: both throughputs, their
ratio and both scaling efficiencies (throughput(N) / (N x throughput(1))). Standard library
only, so it runs wherever the sweep ran.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

_LINE = re.compile(r"^__ref\.(gpus|throughput)__=(\S+)\s*$")


def reference(path: str) -> dict[int, float]:
    """GPU count -> plain DDP images per second, from the reference log."""
    found: dict[int, float] = {}
    gpus = None
    with open(path, encoding="utf-8", errors="replace") as stream:
        for line in stream:
            match = _LINE.match(line.strip())
            if match is None:
                continue
            if match.group(1) == "gpus":
                gpus = int(match.group(2))
            elif gpus is not None:
                found[gpus] = float(match.group(2))
    return found


def dlbs_rows(path: str, model: str) -> dict[int, tuple[float, float | None]]:
    """GPU count -> (throughput, GPU utilisation mean or None) of `model` in the report."""
    with open(path, encoding="utf-8") as stream:
        document = json.load(stream)
    if document.get("format") != "dlbs-report" or document.get("type") != "weak":
        raise SystemExit(f"{path}: not a weak-scaling report of dlbs")
    rows = {}
    for row in document["rows"]:
        if row.get("model") == model:
            rows[int(row["gpus"])] = (float(row["throughput"]), row.get("use.gpu_util_mean"))
    return rows


def table(ours: dict[int, tuple[float, float | None]], theirs: dict[int, float]) -> str:
    """The markdown table."""
    lines = ["| GPUs | dlbs (img/s) | plain DDP (img/s) | dlbs / DDP | dlbs efficiency | "
             "DDP efficiency | GPU util (dlbs) |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    base_ours = ours.get(1, (None, None))[0]
    base_theirs = theirs.get(1)
    for gpus in sorted(set(ours) | set(theirs)):
        mine, util = ours.get(gpus, (None, None))
        plain = theirs.get(gpus)

        def cell(value: float | None, fmt: str = "{:.1f}") -> str:
            return "-" if value is None else fmt.format(value)

        ratio = mine / plain if mine and plain else None
        eff_ours = 100 * mine / (gpus * base_ours) if mine and base_ours else None
        eff_theirs = 100 * plain / (gpus * base_theirs) if plain and base_theirs else None
        lines.append(f"| {gpus} | {cell(mine)} | {cell(plain)} | {cell(ratio, '{:.3f}')} | "
                     f"{cell(eff_ours, '{:.1f} %')} | {cell(eff_theirs, '{:.1f} %')} | "
                     f"{cell(util, '{:.0f} %')} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("weak_json")
    parser.add_argument("reference_log")
    parser.add_argument("--model", default="resnet50")
    args = parser.parse_args()
    ours = dlbs_rows(args.weak_json, args.model)
    theirs = reference(args.reference_log)
    if not ours:
        print(f"no {args.model} rows in {args.weak_json}", file=sys.stderr)
        return 1
    sys.stdout.write(f"{args.model}, training, float16, channels-last, 256 images per GPU\n\n")
    sys.stdout.write(table(ours, theirs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
