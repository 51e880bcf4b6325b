#!/usr/bin/env bash
# What the default energy read costs on one GPU, in one call: bench/efficiency/energy_cost.py
# (the monitor alone, then ResNet-50 training through `dlbs run` with `monitor.energy` off,
# on, on, off: the same experiment, back to back).
#
#   bash bench/device/build_wheels.sh                      # here (internet): the wheels
#   bash bench/efficiency/energy_cost_on_device.sh [OUT]   # on the GPU machine, repo root
#
# The GPU machine has Python 3.12 and PyTorch, no internet: bench/device/setup_env.sh makes
# dlbs (this tree) and its dependencies (nvidia-ml-py's pynvml among them) importable. OUT
# is the first argument, else $OUT, else ./out/energy-cost. It gets results.md and
# results.json (the table and the cost), run.log (what the runs printed), environment.txt,
# logs/ (the runs' logs and results database).
#
# Settings (environment), GPU defaults first:
#   GPUS=0  MODEL=resnet50  BATCH=256  DTYPE=float16  WARMUP=20  BATCHES=200  PAIRS=2
#   IDLE_S=10  WHEELS=bench/device/wheels  PYTHON=python3  SKIP_INSTALL=0
# The CPU rehearsal (how it is tested where there is no GPU; the tests' NVML stands in for
# the monitor alone):
#   GPUS= MONITOR_GPUS=0 MODEL=resnet18 BATCH=2 DTYPE=float32 WARMUP=1 BATCHES=5 PAIRS=1 \
#     IDLE_S=5 SKIP_INSTALL=1 PYTHON=.venv/bin/python \
#     PYTHONPATH=tests/monitor/data/fake_nvml bash bench/efficiency/energy_cost_on_device.sh /tmp/ec
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
out="$(mkdir -p "${1:-${OUT:-out/energy-cost}}" && cd "${1:-${OUT:-out/energy-cost}}" && pwd)"
wheels="${WHEELS:-$repo/bench/device/wheels}"
python="${PYTHON:-python3}"

exec > >(tee -a "$out/run.log") 2>&1
cd "$repo"
export PYTHONUNBUFFERED=1
source "$repo/bench/device/setup_env.sh"

{
    date -u +"%Y-%m-%dT%H:%M:%SZ"
    "$python" -c 'import platform, torch; print("python", platform.python_version(), "torch",
torch.__version__, "cuda", torch.version.cuda,
"gpu", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")'
    "$python" -c 'import pynvml; print("pynvml", pynvml.__file__)' || true
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,power.limit \
        --format=csv,noheader || true
} | tee "$out/environment.txt"

monitor_gpus=()
[[ -n "${MONITOR_GPUS+set}" ]] && monitor_gpus=(--monitor_gpus "$MONITOR_GPUS")
"$python" "$repo/bench/efficiency/energy_cost.py" --out "$out" --gpus "${GPUS-0}" \
    --model "${MODEL:-resnet50}" --batch "${BATCH:-256}" --dtype "${DTYPE:-float16}" \
    --warmup "${WARMUP:-20}" --batches "${BATCHES:-200}" --pairs "${PAIRS:-2}" \
    --idle_s "${IDLE_S:-10}" "${monitor_gpus[@]}"
