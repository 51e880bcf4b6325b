"""A plain training loop over dlbs's transformer models: the reference dlbs is measured against.

Textbook PyTorch in the style of torchtitan's train.py, and nothing of dlbs's backend: the
model file (python/pytorch_benchmarks/models/{llama,gpt2,bert}.py) builds the model on the
meta device; each block is torch.compile'd (fullgraph); over several GPUs each block and
then the root are sharded with FSDP2 (`fully_shard`, bfloat16 compute and float32
reduce-scatter, the last block kept gathered after forward), on one GPU the step runs under
bfloat16 autocast (torchtitan's rule when nothing is sharded); fused AdamW (betas 0.9/0.95,
weight decay 0.1); causal LMs take the logits from the model and a compiled cross-entropy
(torchtitan's compiled loss), BERT its own pretraining heads. Synthetic token ids; the
timed steps are bounded by one synchronize before and one after.

    python bench/transformers/reference.py --model llama3_1b --seq_len 8192 --batch 2
    torchrun --standalone --nproc_per_node=4 bench/transformers/reference.py \
        --model llama3_8b --seq_len 8192 --batch 1

Prints one JSON line (rank 0) and writes it to --out: tokens/s (all GPUs and per GPU),
step time, MFU against --peak_tflops (0: not computed), peak memory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from pytorch_benchmarks.models import bert, gpt2, llama  # noqa: E402  (the model files)

FAMILIES = {"llama3": (llama, llama.Transformer), "gpt2": (gpt2, gpt2.GPT2),
            "bert": (bert, bert.Bert)}


class Objective(nn.Module):
    """The model and its loss as one module.

    FSDP2's root: its forward gathers the weights no block holds (embeddings, final norm,
    heads) for both.
    """

    def __init__(self, model: nn.Module, loss) -> None:
        super().__init__()
        self.model = model
        self.loss = loss

    def forward(self, tokens: torch.Tensor, targets) -> torch.Tensor:
        return self.loss(self.model, tokens, targets)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a flavour of a model file")
    parser.add_argument("--seq_len", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True, help="sequences per GPU")
    parser.add_argument("--steps", type=int, default=20, help="timed steps")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--peak_tflops", type=float, default=0.0,
                        help="one device's dense peak at the dtype's math, for MFU")
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--out", default="", help="write the JSON result here too")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if args.device == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
        torch.set_float32_matmul_precision("high")
    else:
        device = torch.device("cpu")
    if world > 1:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    module, model_class = FAMILIES[args.model.split("_")[0]]
    config = module.FLAVORS[args.model]
    dtype = getattr(torch, args.dtype)

    with torch.device("meta"):
        model = model_class(config)
    if args.compile:
        for index, block in enumerate(model.layers):
            model.layers.register_module(str(index), torch.compile(block, fullgraph=True))

    generator = torch.Generator().manual_seed(rank)
    tokens = torch.randint(0, config.vocab_size, (args.batch, args.seq_len + 1),
                           generator=generator)
    inputs = tokens[:, :-1].contiguous().to(device)
    if module is bert:
        predicted = bert.masked_predictions(args.seq_len)
        positions = torch.rand((args.batch, args.seq_len), generator=generator).argsort(1)
        positions = positions[:, :predicted].sort(1).values
        targets = (positions.to(device), tokens.gather(1, positions).to(device),
                   torch.randint(0, 2, (args.batch,), generator=generator).to(device))
        head = torch.compile(model.head_loss) if args.compile else model.head_loss

        def loss(net: nn.Module, x: torch.Tensor, target) -> torch.Tensor:
            return head(net.hidden_states(x), target)
    else:
        targets = tokens[:, 1:].contiguous().to(device)

        def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return F.cross_entropy(logits.flatten(0, 1).float(), target.flatten())

        loss_fn = torch.compile(cross_entropy) if args.compile else cross_entropy

        def loss(net: nn.Module, x: torch.Tensor, target) -> torch.Tensor:
            return loss_fn(net(x), target)

    objective = Objective(model, loss)
    if world > 1:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        policy = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
        for index, block in enumerate(model.layers):
            fully_shard(block, mp_policy=policy,
                        reshard_after_forward=index < len(model.layers) - 1)
        fully_shard(objective, mp_policy=policy)
    torch.manual_seed(0)
    objective.to_empty(device=device)
    model.init_weights()
    objective.train()
    optimizer = torch.optim.AdamW(objective.parameters(), lr=args.lr, betas=(0.9, 0.95),
                                  weight_decay=0.1, fused=True)

    autocast = torch.autocast(device.type, dtype=dtype) if world == 1 and \
        dtype != torch.float32 else contextlib.nullcontext()

    def train_step() -> None:
        with autocast:
            value = objective(inputs, targets)
        value.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def synchronize() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if world > 1:
            dist.barrier()

    for _ in range(args.warmup):
        train_step()
    synchronize()
    began = time.perf_counter()
    for _ in range(args.steps):
        train_step()
    synchronize()
    seconds = time.perf_counter() - began

    tokens_per_second = args.batch * args.seq_len * args.steps * world / seconds
    flops_per_token = module.training_flops_per_token(config, args.seq_len)
    memory = torch.cuda.max_memory_reserved(device) / 2**30 if device.type == "cuda" else None
    result = {
        "tool": "reference", "model": args.model, "seq_len": args.seq_len, "batch": args.batch,
        "gpus": world, "dtype": args.dtype, "compile": args.compile, "steps": args.steps,
        "step_ms": seconds * 1000 / args.steps, "tokens_per_second": tokens_per_second,
        "tokens_per_second_per_gpu": tokens_per_second / world,
        "flops_per_token": flops_per_token,
        "mfu": flops_per_token * tokens_per_second / (args.peak_tflops * 1e12 * world)
        if args.peak_tflops else None,
        "peak_memory_gib": memory,
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
    }
    if rank == 0:
        print(json.dumps(result), flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps(result) + "\n")
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
