#!/usr/bin/env bash
# Transformer training on the GPU machine, through dlbs and beside the plain reference
# (bench/transformers/run_on_device.py says what is measured), from the repository root:
#
#   bash bench/device/build_wheels.sh                    # here (internet): the wheels
#   bash bench/transformers/run_on_device.sh OUT         # on the GPU machine, one call
#
# One H200: Llama 3.2 1B (sequence 8192, batch 2) and BERT-Large (sequence 512, batch 32),
# each by dlbs and by reference.py; with 4 GPUs visible, first Llama 3.1 8B (sequence 8192,
# batch 1 a GPU, FSDP2 + compile) and the 1B over 4 GPUs (weak scaling). The whole call
# keeps within DEADLINE seconds (510: one call of at most 9 minutes, installing included).
# bench/device/setup_env.sh makes dlbs (this tree) and what `dlbs run` needs importable (the
# machine has Python 3.12 and PyTorch, no internet). OUT (the first argument, else $OUT,
# else ./out) gets environment.txt, run.log, results.json, results.csv, results.md and
# logs.tgz. Settings (environment): DEADLINE=510, STEPS=20, WARMUP=5, WORK (OUT/../tf-work),
# WHEELS=bench/device/wheels, PYTHON=python3, SKIP_INSTALL=0 (1: use $PYTHON as it is),
# SMOKE=0 (1: the CPU rehearsal with the debug flavours, eager), GPUS (default: those
# visible; with SMOKE, 4 rehearses the four-GPU cases) and EXTRA (more run_on_device.py
# flags). The rehearsal here:
#   SMOKE=1 SKIP_INSTALL=1 PYTHON=.venv/bin/python bash bench/transformers/run_on_device.sh /tmp/o
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
out="$(mkdir -p "${1:-${OUT:-out}}" && cd "${1:-${OUT:-out}}" && pwd)"
wheels="${WHEELS:-$repo/bench/device/wheels}"
python="${PYTHON:-python3}"
began=$SECONDS

exec > >(tee "$out/run.log") 2>&1
cd "$repo"
export DLBS_ROOT="$repo" PYTHONUNBUFFERED=1

source "$repo/bench/device/setup_env.sh"

{
    date -u +"%Y-%m-%dT%H:%M:%SZ"
    "$python" - <<'PY'
import os, platform, torch
print("python", platform.python_version(), "torch", torch.__version__,
      "cuda", torch.version.cuda, "cpus", os.cpu_count())
for index in range(torch.cuda.device_count()):
    print("gpu", index, torch.cuda.get_device_name(index))
PY
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit \
        --format=csv,noheader || true
} | tee "$out/environment.txt"

flags=(--out "$out" --deadline_s "$(( ${DEADLINE:-510} - (SECONDS - began) ))"
       --steps "${STEPS:-20}" --warmup "${WARMUP:-5}")
[[ -n "${WORK:-}" ]] && flags+=(--work "$WORK")
[[ -n "${GPUS:-}" ]] && flags+=(--gpus "$GPUS")
[[ "${SMOKE:-0}" == 1 ]] && flags+=(--smoke --steps "${STEPS:-3}" --warmup "${WARMUP:-1}")
# shellcheck disable=SC2086 # EXTRA is a list of flags
"$python" "$repo/bench/transformers/run_on_device.py" "${flags[@]}" ${EXTRA:-}
