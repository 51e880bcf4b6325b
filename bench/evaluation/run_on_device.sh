#!/usr/bin/env bash
# The GPU half of the evaluation's "speed and honesty" targets (docs/evaluation.md), in one
# call on one GPU: ResNet-50, float16, channels-last, compiled, synthetic data, with
#   1. offline QPS against the backend's `benchmark` inference throughput at the same batch
#      (target: at least 95%);
#   2. single-stream p50 with CUDA graphs against the `benchmark` batch-1 median with CUDA
#      graphs (target: at most 0.7 ms);
#   3. max_qps under a 15 ms p99 bound (MLPerf's server bound for ResNet-50) against the
#      offline QPS (target: at least 85%);
# each beside a plain PyTorch loop's figure from the same call (plain_loop.py), all through
# bench/evaluation/loadgen_overhead.py, which runs `dlbs run` and the plain loop.
#
#   bash bench/device/build_wheels.sh           # here (internet): bench/device/wheels
#   bash bench/evaluation/run_on_device.sh [OUT]   # on the GPU machine, repository root
#
# The GPU machine has Python 3.12 and PyTorch, no internet: bench/device/setup_env.sh makes
# dlbs (this tree) and what `dlbs run` needs (from the wheels) importable.
# Results: OUT/results.md (the table), OUT/results.json, OUT/plain.json, OUT/logs/ (every
# experiment's log and LoadGen's logs), OUT/environment.txt, OUT/run.log. OUT is the first
# argument, else $OUT, else ./out.
#
# Settings (environment), GPU defaults first:
#   DEVICE=gpu  MODEL=resnet50  BATCH=256  DTYPE=float16  MIN_DURATION=10  MIN_QUERIES=100
#   MAX_QPS_DURATION=5  BOUND_MS=15  NUM_BATCHES=200  WARMUP=20  REPEAT=1 (each pair's runs)
#   PART=all (or: no, without max_qps)
#   WHEELS=bench/device/wheels  PYTHON=python3  SKIP_INSTALL=0 (1: use $PYTHON as it is)
# The dlbs part on a CPU, small and quick (how it is tested where there is no GPU):
#   DEVICE=cpu MODEL=resnet18 BATCH=4 DTYPE=float32 MIN_DURATION=2 MIN_QUERIES=10 \
#     MAX_QPS_DURATION=1 BOUND_MS=2000 NUM_BATCHES=10 WARMUP=2 SKIP_INSTALL=1 \
#     PYTHON=.venv/bin/python bash bench/evaluation/run_on_device.sh /tmp/eval-out
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
out="$(mkdir -p "${1:-${OUT:-out}}" && cd "${1:-${OUT:-out}}" && pwd)"
device="${DEVICE:-gpu}"
model="${MODEL:-resnet50}"
batch="${BATCH:-256}"
dtype="${DTYPE:-float16}"
min_duration="${MIN_DURATION:-10}"
min_queries="${MIN_QUERIES:-100}"
max_qps_duration="${MAX_QPS_DURATION:-5}"
bound_ms="${BOUND_MS:-15}"
num_batches="${NUM_BATCHES:-200}"
warmup="${WARMUP:-20}"
part="${PART:-all}"
repeat="${REPEAT:-1}"
wheels="${WHEELS:-$repo/bench/device/wheels}"
python="${PYTHON:-python3}"

exec > >(tee "$out/run.log") 2>&1
cd "$repo"
export DLBS_ROOT="$repo" PYTHONUNBUFFERED=1

source "$repo/bench/device/setup_env.sh"

{
    date -u +"%Y-%m-%dT%H:%M:%SZ"
    "$python" - <<'PY'
import platform, torch, mlperf_loadgen  # noqa: F401
print("python", platform.python_version(), "torch", torch.__version__,
      "cuda", torch.version.cuda, "loadgen 6.0.17 (pinned)")
if torch.cuda.is_available():
    print("gpu", torch.cuda.get_device_name(0))
PY
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.max.sm \
        --format=csv,noheader || true
} | tee "$out/environment.txt"

flags=(--out "$out" --device "$device" --model "$model" --batch_size "$batch"
       --dtype "$dtype" --min_duration_s "$min_duration" --min_query_count "$min_queries"
       --max_qps_duration_s "$max_qps_duration"
       --latency_bound_ms "$bound_ms" --num_batches "$num_batches" --warmup "$warmup"
       --repeat "$repeat")
if [[ "$device" == gpu ]]; then
    flags+=(--channels_last --compile --cuda_graphs)
else
    flags+=(--threads "${THREADS:-0}")
fi
[[ "$part" == all ]] && flags+=(--max_qps)
"$python" "$repo/bench/evaluation/loadgen_overhead.py" "${flags[@]}"
