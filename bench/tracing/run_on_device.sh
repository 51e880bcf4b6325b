#!/usr/bin/env bash
# Tracing on one GPU (docs/tracing.md), in one call: ResNet-50 training traced at `kernel`
# level with `dlbs run`; `dlbs trace --view kernels` (the cuDNN/cuBLAS kernels under each
# convolution) and `--view summary` of that trace; and what tracing costs, level by level:
# traced against untraced step times (bench/tracing/overhead.py, which runs `dlbs run` once per
# level), beside a plain PyTorch loop (plain_loop.py) from the same call.
#
#   bash bench/device/build_wheels.sh           # here (internet): bench/device/wheels
#   bash bench/tracing/run_on_device.sh [OUT]   # on the GPU machine, repository root
#
# The GPU machine has Python 3.12 and PyTorch, no internet: bench/device/setup_env.sh makes
# dlbs (this tree) and its dependencies (ijson's cp312 wheel among them, from the wheels)
# importable. OUT is the first argument, else $OUT, else ./out. It gets:
#   environment.txt     python, torch, CUDA, the GPU
#   overhead.md/.json   per level: untraced, timed (traced run), traced step times, overhead
#   kernels.txt         `dlbs trace --view kernels --top 40` of the kernel-level trace
#   kernels.csv         the whole kernels view
#   conv_kernels.txt    the kernels launched under convolution layers (cuDNN's, by name)
#   summary.txt         `dlbs trace --view summary`; layers.txt, layer_tree.txt, duration.txt
#   logs/               every run's log, results database and trace (.trace.json.gz: open it
#                       in https://ui.perfetto.dev)
#   run.log             everything printed
#
# Settings (environment), GPU defaults first:
#   DEVICE=gpu  MODEL=resnet50  BATCH=256  DTYPE=float16  LEVEL=kernel
#   LEVELS=step,layer,operator,kernel,full  NUM_BATCHES=30  WARMUP=10  TRACE_BATCHES=5
#   PARAMS="pytorch.channels_last=true"  (more -P parameters for every run, space-separated)
#   WHEELS=bench/device/wheels  PYTHON=python3  SKIP_INSTALL=0 (1: use $PYTHON as it is)
# The dlbs part on a CPU, small and quick (how it is tested where there is no GPU):
#   DEVICE=cpu LEVEL=operator LEVELS=step,layer,operator MODEL=resnet18 BATCH=2 \
#     DTYPE=float32 NUM_BATCHES=2 WARMUP=1 TRACE_BATCHES=2 PARAMS= SKIP_INSTALL=1 \
#     PYTHON=.venv/bin/python bash bench/tracing/run_on_device.sh /tmp/trace-out
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
out="$(mkdir -p "${1:-${OUT:-out}}" && cd "${1:-${OUT:-out}}" && pwd)"
device="${DEVICE:-gpu}"
model="${MODEL:-resnet50}"
batch="${BATCH:-256}"
dtype="${DTYPE:-float16}"
level="${LEVEL:-kernel}"
levels="${LEVELS:-step,layer,operator,kernel,full}"
num_batches="${NUM_BATCHES:-30}"
warmup="${WARMUP:-10}"
trace_batches="${TRACE_BATCHES:-5}"
params="${PARAMS-pytorch.channels_last=true}"
wheels="${WHEELS:-$repo/bench/device/wheels}"
python="${PYTHON:-python3}"

exec > >(tee "$out/run.log") 2>&1
cd "$repo"
export DLBS_ROOT="$repo" PYTHONUNBUFFERED=1

source "$repo/bench/device/setup_env.sh"

{
    date -u +"%Y-%m-%dT%H:%M:%SZ"
    "$python" - <<'PY'
import platform, torch, ijson
print("python", platform.python_version(), "torch", torch.__version__, "cuda",
      torch.version.cuda, "ijson", ijson.__version__, "backend", ijson.backend)
if torch.cuda.is_available():
    print("gpu", torch.cuda.get_device_name(0))
PY
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.max.sm \
        --format=csv,noheader || true
} | tee "$out/environment.txt"

extra=()
for param in $params; do
    extra+=(-P "$param")
done
plain=()
[[ "$device" == gpu ]] && plain=(--plain)
[[ "$device" == cpu ]] && plain=(--plain --threads "${THREADS:-0}")

# 1. Every level, each its own `dlbs run` (untraced first), and the plain loop.
echo "== overhead: levels $levels"
"$python" "$repo/bench/tracing/overhead.py" --frameworks pytorch --device "$device" \
    --model "$model" --batch "$batch" --dtype "$dtype" --levels "$levels" \
    --num_batches "$num_batches" --warmup "$warmup" --trace_batches "$trace_batches" \
    "${plain[@]}" "${extra[@]}" --out "$out"
mv "$out/results.md" "$out/overhead.md"
mv "$out/results.json" "$out/overhead.json"
cat "$out/overhead.md"

# 2. The views of the $level trace, read through its results database.
db="$out/logs/pytorch/$level/results.db"
dlbs=("$python" -m dlbs.cli.main trace "$db")
echo "== $level trace: $(ls "$out/logs/pytorch/$level"/*.trace.json.gz)"
"${dlbs[@]}" --view kernels --top 40 | tee "$out/kernels.txt"
"${dlbs[@]}" --view kernels --format csv -o "$out/kernels.csv"
"${dlbs[@]}" --view summary | tee "$out/summary.txt"
"${dlbs[@]}" --view layers --top 30 | tee "$out/layers.txt"
"${dlbs[@]}" --view layer_tree -o "$out/layer_tree.txt"
head -40 "$out/layer_tree.txt"
"${dlbs[@]}" --view duration | tee "$out/duration.txt"
"$python" - "$out/kernels.csv" <<'PY' | tee "$out/conv_kernels.txt"
import csv, sys
rows = [row for row in csv.DictReader(open(sys.argv[1])) if "conv" in row["layer"]]
rows.sort(key=lambda row: -float(row["total_ms"]))
print(f"{len(rows)} (layer, kernel) pairs under convolution layers; the 25 longest:")
for row in rows[:25]:
    print(f"{row['layer']:<22} {row['phase']:<9} {float(row['total_ms']):9.3f} ms "
          f"{row['launches']:>4}x  {row['kernel'][:110]}")
names = {row["kernel"] for row in rows}
print("cuDNN/cuBLAS-like kernel names under convolutions:",
      sum(1 for n in names if any(k in n.lower() for k in
                                 ("cudnn", "xmma", "sm80", "sm90", "gemm", "conv", "cutlass"))),
      "of", len(names))
PY
echo "== done: $out"
