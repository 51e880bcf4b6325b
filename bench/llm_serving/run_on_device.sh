#!/usr/bin/env bash
# LLM serving's speed targets (docs/llm-serving.md), dlbs beside the plain reference, in one
# call on one GPU (H200: Python 3.12, PyTorch 2.11, no internet), from the repository root:
#
#   bash bench/device/build_wheels.sh                    # here (internet): the wheels
#   bash bench/llm_serving/run_on_device.sh OUT          # on the GPU machine, <= 9 minutes
#
# bench/device/setup_env.sh makes dlbs (this tree) and what `dlbs run` needs importable from
# the carried wheels; bench/llm_serving/gpu_targets.py runs the steps (its doc lists them)
# and writes, after each, OUT/results.md (the targets with their verdicts, every run),
# OUT/results.json, OUT/reference.json (the plain reference's numbers) and OUT/logs.tgz (the
# experiments' logs and LoadGen's, no traces); OUT also gets environment.txt and run.log.
# Settings (environment): WORK (/tmp/llm-work), DEADLINE=520 (seconds from the script's
# start: no step starts or runs past it), WHEELS=bench/device/wheels, PYTHON=python3, SKIP_INSTALL=0 (1: use $PYTHON
# as it is), EXTRA (more gpu_targets.py flags) and SMOKE=1: every step on the CPU, with the
# debug flavour, small and quick (how this script is rehearsed where there is no GPU):
#
#   SMOKE=1 SKIP_INSTALL=1 PYTHON=.venv/bin/python bash bench/llm_serving/run_on_device.sh /tmp/o
set -euo pipefail
started_at="$(date +%s)"

repo="$(cd "$(dirname "$0")/../.." && pwd)"
out="$(mkdir -p "${1:-${OUT:-out}}" && cd "${1:-${OUT:-out}}" && pwd)"
wheels="${WHEELS:-$repo/bench/device/wheels}"
python="${PYTHON:-python3}"

exec > >(tee "$out/run.log") 2>&1
cd "$repo"
export DLBS_ROOT="$repo" PYTHONUNBUFFERED=1

source "$repo/bench/device/setup_env.sh"

smoke=()
if [[ "${SMOKE:-0}" == 1 ]]; then
    smoke=(--smoke)
    export CUDA_VISIBLE_DEVICES="" OMP_NUM_THREADS=1
fi

source "$repo/bench/device/environment.sh"

# shellcheck disable=SC2086 # EXTRA is a list of flags
"$python" "$repo/bench/llm_serving/gpu_targets.py" --out "$out" --work "${WORK:-/tmp/llm-work}" \
    --deadline_s "${DEADLINE:-520}" --started_at "$started_at" "${smoke[@]}" ${EXTRA:-}
