#!/usr/bin/env bash
# The GPU scaling study of examples/gpu_scaling.yaml with `dlbs run` on a GPU machine, beside
# plain PyTorch reference loops (one GPU; plain DDP on all GPUs) in the same call.
#
#   bash bench/gpu_scaling/run_on_device.sh OUT_DIR GPUS BATCHES
#
# GPUS: "0" "0,1" ... the exp.gpus values to sweep (a JSON list); BATCHES: timed batches.
# Writes OUT_DIR/{run.log,weak.md,strong.md,reference.log,logs.tar.gz}.
set -uo pipefail
out=${1:?out dir}; gpus=${2:-'["0", "0,1"]'}; batches=${3:-40}
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
export PYTHONUNBUFFERED=1 PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
dlbs() { python3 -m dlbs.cli.main "$@"; }
{
    nvidia-smi -L
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
    common=(-c examples/gpu_scaling.yaml -V "exp.gpus=$gpus" -P "exp.num_batches=$batches"
            -P exp.num_warmup_batches=15 --progress lines)
    dlbs run "${common[@]}" -V 'scaling=["weak"]' -V 'exp.model=["resnet50", "resnet152"]'
    dlbs run "${common[@]}" -V 'scaling=["strong"]' -V 'exp.model=["resnet50"]' \
        -P global_batch=512
    dlbs report logs/gpu_scaling/weak --type weak --format markdown > "$out/weak.md"
    dlbs report logs/gpu_scaling/strong --type strong --format markdown > "$out/strong.md"
    cat "$out/weak.md" "$out/strong.md"
} 2>&1 | tee "$out/run.log"
n=$(python3 -c "import json,sys; print(len(json.loads(sys.argv[1])[-1].split(',')))" "$gpus")
{
    python3 bench/pytorch_gpu/reference_loop.py --phase train --batch_size 256 --dtype float16 \
        --channels_last --warmup 15 --steps "$batches"
    python3 -m torch.distributed.run --standalone --nproc_per_node="$n" \
        bench/pytorch_gpu/ddp_reference.py --warmup 15 --steps "$batches"
} 2>&1 | grep -E "__ref|img/s|Error|error" | tee "$out/reference.log"
tar czf "$out/logs.tar.gz" logs
