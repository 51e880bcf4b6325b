"""Summarise a run of examples/graph_backends.yaml: median latency and speed-up over eager.

    python bench/graph_backends/summarize.py LOG_DIR [--markdown]

Reads every log of the run (the `__key__=json` lines, as `dlbs parse` does), and prints one
row per configuration and batch: the median of every timed batch of every round (ms), each
round's median, the best batch, images per second at the median, and the speed-up of the
median over PyTorch eager (NCHW) at the same batch (at least 50 timed batches a round at
batch 1).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from dlbs.results.protocol import parse_log


def configuration(values: dict) -> str:
    """A readable name of one experiment's configuration."""
    framework = values["exp.framework"]
    if framework == "pytorch":
        name = "compiled" if values.get("pytorch.compile") else "eager"
        if values.get("pytorch.compile") and values.get("pytorch.compile_mode") != "default":
            name += f" ({values['pytorch.compile_mode']})"
        if values.get("pytorch.freezing"):
            name += " + freezing"
        if values.get("pytorch.channels_last"):
            name += ", channels-last"
        return f"PyTorch {name}"
    if framework == "mxnet":
        if not values.get("mxnet.hybridize"):
            return "MXNet imperative"
        if not values.get("mxnet.static_graph"):
            return "MXNet hybridized (dynamic graph)"
        if values.get("mxnet.graph_backend") == "onednn":
            return "MXNet static graph + oneDNN fusion"
        return "MXNet static graph"
    return f"ONNX Runtime, level {values['onnxruntime.graph_optimization_level']}"


def rows(log_dir: Path) -> list[dict]:
    """One row per configuration and batch, over every round of the run."""
    groups: dict[tuple[int, str], dict] = {}
    for log in sorted(log_dir.glob("*.log")):
        values = parse_log(log).values
        times = values.get("results.time_data")
        if values.get("results.status") != "ok" or not times:
            continue
        key = (values["exp.replica_batch"], configuration(values))
        group = groups.setdefault(key, {"times": [], "rounds": {}, "threads": values.get(
            f"{values['exp.framework']}.num_threads", values.get("onnxruntime.intra_op_threads"))})
        group["times"].extend(times)
        group["rounds"][values.get("round", 1)] = statistics.median(times)
    found = []
    for (batch, name), group in groups.items():
        median = statistics.median(group["times"])
        found.append({"batch": batch, "name": name, "median": median,
                      "best": min(group["times"]), "n": len(group["times"]),
                      "ips": batch * 1000.0 / median, "threads": group["threads"],
                      "rounds": [group["rounds"][r] for r in sorted(group["rounds"])]})
    for row in found:
        eager = [r for r in found if r["batch"] == row["batch"] and r["name"] == "PyTorch eager"]
        row["speedup"] = eager[0]["median"] / row["median"] if eager else None
    return sorted(found, key=lambda r: (r["batch"], r["median"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log_dir", type=Path)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    table = rows(args.log_dir)
    if args.markdown:
        print("| batch | configuration | median ms | per-round medians ms | best ms | timed "
              "batches | images/s (median) | speed-up over PyTorch eager |")
        print("|---|---|---:|---|---:|---:|---:|---:|")
    for row in table:
        speedup = f"{row['speedup']:.2f}x" if row["speedup"] else "-"
        rounds = " / ".join(f"{median:,.1f}" for median in row["rounds"])
        if args.markdown:
            print(f"| {row['batch']} | {row['name']} | {row['median']:,.1f} | {rounds} | "
                  f"{row['best']:,.1f} | {row['n']} | {row['ips']:,.1f} | {speedup} |")
        else:
            print(f"{row['batch']:>3}  {row['name']:<50} median {row['median']:9.1f} ms  "
                  f"rounds [{rounds}]  best {row['best']:9.1f} ms  n={row['n']:<3} "
                  f"{row['ips']:8.1f} img/s  {speedup:>6}  threads={row['threads']}")


if __name__ == "__main__":
    main()
