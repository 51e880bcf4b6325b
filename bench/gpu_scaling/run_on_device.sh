#!/usr/bin/env bash
# The weak-scaling study of examples/gpu_scaling.yaml on a GPU machine: `dlbs run` at 1, 2 and
# 4 GPUs with the resource monitor on, beside plain PyTorch DDP (bench/pytorch_gpu/
# ddp_reference.py) at the same GPU counts in the same call; then the weak-scaling table,
# chart and HTML report.
#
#   bash bench/gpu_scaling/run_on_device.sh OUT [FRAMEWORK] [BATCHES] [GPUS]
#
# FRAMEWORK: pytorch (default) or dummy (a dry run of the dlbs part on a CPU: no GPU, no
# references); BATCHES: timed batches (default 100); GPUS: the exp.gpus values, a JSON list
# (default ["0", "0,1", "0,1,2,3"]). PYTHON picks the interpreter (default python3).
# Writes into OUT:
#   run.log            everything the run printed (nvidia-smi, versions, progress)
#   weak.md, weak.csv, weak.json   the weak-scaling report (batch time, throughput, speedup,
#                      efficiency); weak_monitor.md: throughput beside the monitor's summaries
#   weak_scaling.svg, weak_scaling.png   `dlbs plot --preset weak`
#   monitor.svg        `dlbs plot --preset monitor` of the largest resnet50 experiment
#   report.html        `dlbs report --type weak --format html`
#   reference.log      plain DDP's throughput per GPU count
#   vs_reference.md    dlbs beside plain DDP (bench/gpu_scaling/vs_reference.py)
#   logs/              every log and the results database (render again anywhere with
#                      `dlbs plot OUT/logs/results.db --preset weak -o chart.svg`)
# A step that fails is reported and the others still run; the exit status says whether all
# steps succeeded.
set -uo pipefail
out=${1:?usage: run_on_device.sh OUT [FRAMEWORK] [BATCHES] [GPUS]}
framework=${2:-pytorch}
batches=${3:-100}
gpus=${4:-'["0", "0,1", "0,1,2,3"]'}
python=${PYTHON:-python3}
case "$framework" in
    pytorch|dummy) ;;
    *) echo "run_on_device.sh: FRAMEWORK is pytorch or dummy, not '$framework'" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$here" || exit 2
export PYTHONUNBUFFERED=1 PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
logs=$out/logs
dlbs() { "$python" -m dlbs.cli.main "$@"; }
step() {  # step NAME COMMAND...: run, and remember a failure instead of stopping
    local name=$1; shift
    echo "== $name"
    "$@" || { echo "== $name FAILED (exit $?)"; failed+=("$name"); }
}

run_args=(-c examples/gpu_scaling.yaml -V "exp.gpus=$gpus" -V 'scaling=["weak"]'
          -V 'exp.model=["resnet50", "resnet152"]' -P "exp.framework=$framework"
          -P "exp.num_batches=$batches" -P exp.num_warmup_batches=20
          -P monitor.frequency=0.25 -P "exp.log_dir=$logs" --progress lines)
if [ "$framework" = dummy ]; then
    # The dummy backend sleeps per batch; 20 ms stands in for a ResNet-50 step.
    run_args+=(-P dummy.sleep=0.02 -P exp.num_warmup_batches=2)
fi
report=("$logs/results.db" --type weak)

{
    echo "== environment"
    command -v nvidia-smi >/dev/null && nvidia-smi -L
    "$python" -c 'import sys; print("python", sys.version.split()[0])'
    [ "$framework" = pytorch ] && "$python" -c \
        'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
    "$python" -c 'import matplotlib, numpy; print("matplotlib", matplotlib.__version__,
                   "numpy", numpy.__version__)' || echo "(charts need matplotlib)"
    step "dlbs run" dlbs run "${run_args[@]}"
    step "weak.md" dlbs report "${report[@]}" --format markdown -o "$out/weak.md"
    step "weak.csv" dlbs report "${report[@]}" --format csv -o "$out/weak.csv"
    step "weak.json" dlbs report "${report[@]}" --format json \
        --columns time,throughput,speedup,efficiency,use.gpu_util_mean -o "$out/weak.json"
    step "weak_monitor.md" dlbs report "${report[@]}" --format markdown \
        --columns throughput,efficiency,use.gpu_util_mean,use.gpu_mem_max,use.gpu_power_mean,use.cpu_mean \
        -o "$out/weak_monitor.md"
    step "weak_scaling.svg" dlbs plot "$logs/results.db" --preset weak \
        --title "Weak scaling: 256 images per GPU, float16" -o "$out/weak_scaling.svg"
    step "weak_scaling.png" dlbs plot "$logs/results.db" --preset weak \
        --title "Weak scaling: 256 images per GPU, float16" -o "$out/weak_scaling.png"
    step "report.html" dlbs report "${report[@]}" --format html -o "$out/report.html"
    largest=$(dlbs parse "$logs/results.db" --keys exp.id,exp.model,exp.num_gpus 2>/dev/null |
        "$python" -c 'import json, sys
rows = [e for e in json.load(sys.stdin)["experiments"] if e.get("exp.model") == "resnet50"]
print(max(rows, key=lambda e: e.get("exp.num_gpus") or 0)["exp.id"] if rows else "")')
    [ -n "$largest" ] && step "monitor.svg" dlbs plot "$logs/results.db" --preset monitor \
        --exp "$largest" -o "$out/monitor.svg"
    cat "$out/weak.md" "$out/weak_monitor.md" 2>/dev/null
} 2>&1 | tee "$out/run.log"

# Plain DDP at the same GPU counts, in the same call (the multi-GPU yardstick).
counts=$("$python" -c 'import json, sys
print(" ".join(str(len(g.split(","))) for g in json.loads(sys.argv[1])))' "$gpus")
plain_ddp() {  # plain_ddp N: rank 0's __ref lines; the status is torchrun's
    local log
    log=$(mktemp)
    "$python" -m torch.distributed.run --standalone --nproc_per_node="$1" \
        bench/pytorch_gpu/ddp_reference.py --warmup 20 --steps "$batches" >"$log" 2>&1
    local status=$?
    grep -E "^__ref|Error" "$log"
    rm -f "$log"
    return $status
}
{
    if [ "$framework" = pytorch ]; then
        for n in $counts; do
            echo "__ref.gpus__=$n"
            step "plain DDP on $n GPUs" plain_ddp "$n"
        done
    else
        echo "no plain DDP reference for framework $framework"
    fi
} 2>&1 | tee "$out/reference.log"
if [ "$framework" = pytorch ]; then
    if "$python" bench/gpu_scaling/vs_reference.py "$out/weak.json" "$out/reference.log" \
            >"$out/vs_reference.md"; then
        cat "$out/vs_reference.md"
    else
        echo "== vs_reference.md FAILED (exit $?)" | tee -a "$out/run.log"
    fi
fi

# The steps ran inside pipes (subshells): read their failures back from what they printed.
mapfile -t failed < <(cat "$out/run.log" "$out/reference.log" 2>/dev/null | sed -n 's/^== \(.*\) FAILED (exit [0-9]*)$/\1/p')
if [ ${#failed[@]} -gt 0 ]; then
    printf 'run_on_device.sh: failed: %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "run_on_device.sh: all steps done; results in $out"
