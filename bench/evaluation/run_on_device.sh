#!/usr/bin/env bash
# The GPU measurements of docs/evaluation.md ("Getting the GPU's real numbers"), on the GPU
# machine, from the repository root:
#
#   bash bench/device/build_wheels.sh                       # here (internet): the wheels
#   PART=one bash bench/evaluation/run_on_device.sh OUT     # one GPU: plain loop, batch 256,
#                                                           # examples/evaluation.yaml
#   PART=two SERVER_RATE=R bash bench/evaluation/run_on_device.sh OUT   # one GPU: max_qps
#                                                           # without CUDA graphs, streams
#   PART=four bash bench/evaluation/run_on_device.sh OUT    # 1 GPU, then 4 GPUs of one host
#   PART=streams bash bench/evaluation/run_on_device.sh OUT # one GPU: offline and max_qps at
#                                                           # batch 64, 1 and 2 streams
#
# bench/device/setup_env.sh makes dlbs (this tree) and what `dlbs run` needs importable (the
# machine has Python 3.12 and PyTorch, no internet); bench/evaluation/gpu_targets.py runs the
# steps (its doc lists them). OUT (the first argument, else $OUT, else ./out) gets
# environment.txt, run.log, plain.json, results.md, results.json and logs.tgz (every
# experiment's log and LoadGen's logs). Settings (environment): PART, SERVER_RATE, WORK
# (/tmp/eval-work), MIN_DURATION=10, DEADLINE=3600 (seconds: no step starts or runs past
# it), WHEELS=bench/device/wheels, PYTHON=python3, SKIP_INSTALL=0 (1: use $PYTHON as it is)
# and EXTRA (more gpu_targets.py flags). The steps on a CPU, small and quick (how this
# script is rehearsed where there is no GPU):
#   PART=one SKIP_INSTALL=1 PYTHON=.venv/bin/python MIN_DURATION=1 EXTRA="--device cpu
#     --model resnet18 --dtype float32 --batches 2,4 --big_batch 4 --num_batches 3
#     --warmup 1 --target_qps 5 --min_query_count 5 --latency_bound_ms 3000
#     --plain_latency_batches 10" bash bench/evaluation/run_on_device.sh /tmp/o
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
out="$(mkdir -p "${1:-${OUT:-out}}" && cd "${1:-${OUT:-out}}" && pwd)"
wheels="${WHEELS:-$repo/bench/device/wheels}"
python="${PYTHON:-python3}"

exec > >(tee "$out/run.log") 2>&1
cd "$repo"
export DLBS_ROOT="$repo" PYTHONUNBUFFERED=1

source "$repo/bench/device/setup_env.sh"

source "$repo/bench/device/environment.sh"

# shellcheck disable=SC2086 # EXTRA is a list of flags
"$python" "$repo/bench/evaluation/gpu_targets.py" --out "$out" --part "${PART:-one}" \
    --work "${WORK:-/tmp/eval-work}" --min_duration_s "${MIN_DURATION:-10}" \
    --server_rate "${SERVER_RATE:-0}" --deadline_s "${DEADLINE:-3600}" ${EXTRA:-}
