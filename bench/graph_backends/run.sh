#!/usr/bin/env bash
# Run examples/graph_backends.yaml once (every configuration, one `dlbs run`), then
# `dlbs report` and the summary with speed-ups over PyTorch eager, into OUT (default:
# bench/graph_backends/results/<date>). About 40 minutes on 2 cores; run it on a quiet
# machine: it prints the load average before and after, and a busy machine skews batch 1.
#   bash bench/graph_backends/run.sh [OUT] [dlbs run options, e.g. -P threads=2]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-bench/graph_backends/results/$(date -u +%Y-%m-%d)}
shift || true
mkdir -p "$out"
python=${PYTHON:-.venv/bin/python}
{ echo "before: $(uptime)"; nproc; lscpu | grep -E "Model name|^CPU\(s\)"; } | tee "$out/machine.txt"
"$python" -m dlbs.cli.main run --config examples/graph_backends.yaml \
    -P "exp.log_dir=$out/logs" --progress lines "$@" 2>&1 | tee "$out/run.txt"
echo "after: $(uptime)" | tee -a "$out/machine.txt"
"$python" -m dlbs.cli.main report "$out/logs" --columns time_median,time,throughput \
    | tee "$out/report.txt"
"$python" bench/graph_backends/summarize.py "$out/logs" | tee "$out/summary.txt"
"$python" bench/graph_backends/summarize.py "$out/logs" --markdown > "$out/summary.md"
# The exported models are 100 MB each and can be made again: keep only the logs.
rm -rf "$out/logs/onnx_cache"
