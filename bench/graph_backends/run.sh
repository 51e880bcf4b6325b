#!/usr/bin/env bash
# Run examples/graph_backends.yaml in one `dlbs run`, then `dlbs report` and the report with
# speed-ups over PyTorch eager, into OUT (default: bench/graph_backends/results/<date>).
#
# The batch-1 configurations run in ROUNDS rounds (default 3), one after the other inside
# each round, so that a change in the machine's load hits every configuration alike; batch
# 32 runs in the first round only. Each round is its own row, compared with PyTorch eager of
# the same round, so a disturbed round can be seen. About 35 minutes on 2 cores; it prints
# the load average before and after.
#   bash bench/graph_backends/run.sh [OUT] [dlbs run options, e.g. -P threads=2]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-bench/graph_backends/results/$(date -u +%Y-%m-%d)}
shift || true
rounds=${ROUNDS:-3}
mkdir -p "$out"
python=${PYTHON:-.venv/bin/python}
{ echo "before: $(uptime)"; nproc; lscpu | grep -E "Model name|^CPU\(s\)"; } | tee "$out/machine.txt"
rounds_axis=$("$python" -c "import json, sys; print(json.dumps(list(range(1, int(sys.argv[1]) + 1))))" "$rounds")
"$python" -m dlbs.cli.main run --config examples/graph_backends.yaml \
    -P "exp.log_dir=$out/logs" -V "round=$rounds_axis" \
    -P 'sys.plan_builder.var_order=["round"]' \
    -E '{"condition": {"round": "[2-9]|[1-9][0-9]+", "exp.replica_batch": 32},
         "parameters": {"exp.status": "disabled"}}' \
    --progress lines "$@" 2>&1 | tee "$out/run.txt"
echo "after: $(uptime)" | tee -a "$out/machine.txt"
"$python" -m dlbs.cli.main report "$out/logs" --columns time_median,time,throughput \
    | tee "$out/report.txt"
over_eager=(--baseline exp.framework=pytorch --baseline pytorch.compile=false
            --baseline pytorch.channels_last=false --baseline pytorch.freezing=false
            --baseline pytorch.compile_mode=default
            --columns time_median,time_min,throughput,speedup)
"$python" -m dlbs.cli.main report "$out/logs" "${over_eager[@]}" | tee "$out/report-speedup.txt"
for batch in 1 32; do
    "$python" -m dlbs.cli.main report "$out/logs" "${over_eager[@]}" --format markdown \
        --filter "exp.replica_batch=$batch" > "$out/report-speedup-batch$batch.md"
done
# The exported models are 100 MB each and can be made again: keep only the logs.
rm -rf "$out/logs/onnx_cache"
