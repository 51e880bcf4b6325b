"""The plain reference of LLM decoding: a textbook compiled decode loop, beside dlbs's engine.

Torch and the model file only (python/pytorch_benchmarks/models/llama.py: the decoders'
modules and published sizes), no dlbs. What a reader of gpt-fast would write first: the KV
cache as buffers of each attention module, allocated once for the batch and the longest
sequence; a forward pass over the model's own modules (the separate wq, wk, wv, w1, w3),
attention through SDPA over the cache with a causal mask row per position; the decode step
compiled whole with torch.compile's `reduce-overhead` mode (inductor's CUDA graphs), no
tuning flags; prefill run eagerly; greedy argmax on the device. Times from the host around a
synchronised loop.

    python bench/llm_serving/reference.py --model llama3_8b --batches 1,64 \
        --prompt 128 --output 256 --prefill 1024 --out reference.json

prints and writes (JSON): per batch, the decode tokens per second (batch x the steps over
their time), the time per output token, the time to first token of the prompt; and the time
to first token of a `--prefill`-token prompt at batch 1. `--device cpu --model llama3_debug
--dtype float32` runs it small (how it is rehearsed without a GPU).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from pytorch_benchmarks.models.llama import FLAVORS, Transformer, apply_rope  # noqa: E402

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def build(model_id: str, device: torch.device, dtype: torch.dtype) -> Transformer:
    """The decoder with random weights in `dtype` on `device` (made on the meta device)."""
    torch.set_default_dtype(dtype)
    with torch.device("meta"):
        model = Transformer(FLAVORS[model_id])
    torch.set_default_dtype(torch.float32)
    model = model.to_empty(device=device)
    torch.manual_seed(0)
    model.init_weights()
    return model.eval().requires_grad_(False)


def allocate_cache(model: Transformer, batch: int, length: int) -> None:
    """K and V buffers [batch, kv_heads, length, head_dim] on each attention module."""
    config = model.config
    weight = model.tok_embeddings.weight
    for block in model.layers:
        shape = (batch, config.n_kv_heads, length, config.head_dim)
        block.attention.register_buffer(
            "k_cache", torch.zeros(shape, dtype=weight.dtype, device=weight.device),
            persistent=False)
        block.attention.register_buffer(
            "v_cache", torch.zeros(shape, dtype=weight.dtype, device=weight.device),
            persistent=False)
    causal = torch.ones(length, length, dtype=torch.bool, device=weight.device).tril()
    model.register_buffer("causal_mask", causal, persistent=False)


def forward(model: Transformer, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Logits of `tokens` [B, S] at `positions` [S], writing their K/V into the cache."""
    batch, seq_len = tokens.shape
    cos, sin = model.rope_cos[positions][None], model.rope_sin[positions][None]
    mask = model.causal_mask[positions][None, None]
    x = model.tok_embeddings(tokens)
    for block in model.layers:
        attention = block.attention
        h = block.attention_norm(x)
        q = attention.wq(h).view(batch, seq_len, attention.n_heads, attention.head_dim)
        k = attention.wk(h).view(batch, seq_len, attention.n_kv_heads, attention.head_dim)
        v = attention.wv(h).view(batch, seq_len, attention.n_kv_heads, attention.head_dim)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        attention.k_cache[:, :, positions] = k.transpose(1, 2)
        attention.v_cache[:, :, positions] = v.transpose(1, 2)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), attention.k_cache,
                                           attention.v_cache, attn_mask=mask,
                                           enable_gqa=attention.n_heads != attention.n_kv_heads)
        x = x + attention.wo(y.transpose(1, 2).reshape(batch, seq_len, -1))
        x = x + block.feed_forward(block.ffn_norm(x))
    return model.output(model.norm(x))


def decode_one(model: Transformer, token: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
    """The next token [B, 1] after `token` [B, 1] at `position` [1]."""
    return forward(model, token, position)[:, -1].argmax(dim=-1, keepdim=True)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def generate(model: Transformer, step, prompt: torch.Tensor, steps: int
             ) -> tuple[float, float]:
    """(time to first token, decode time of `steps` steps), seconds, host-timed."""
    device = prompt.device
    synchronize(device)
    began = time.perf_counter()
    positions = torch.arange(prompt.shape[1], device=device)
    token = forward(model, prompt, positions)[:, -1].argmax(dim=-1, keepdim=True)
    synchronize(device)
    first = time.perf_counter()
    position = torch.tensor([prompt.shape[1]], device=device)
    for _ in range(steps):
        token = step(model, token.clone(), position)
        position += 1
    synchronize(device)
    return first - began, time.perf_counter() - first


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="llama3_8b", choices=sorted(FLAVORS))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16", choices=sorted(DTYPES))
    parser.add_argument("--batches", default="1,64")
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--output", type=int, default=256)
    parser.add_argument("--prefill", type=int, default=1024, help="0: not measured")
    parser.add_argument("--repeats", type=int, default=3, help="timed generations per batch")
    parser.add_argument("--compile", type=int, default=1)
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    model = build(args.model, device, DTYPES[args.dtype])
    step = torch.compile(decode_one, mode="reduce-overhead", fullgraph=True) \
        if args.compile else decode_one
    results: dict = {"model": args.model, "device": str(device), "dtype": args.dtype,
                     "torch": torch.__version__, "prompt": args.prompt, "output": args.output,
                     "batches": {}}
    if device.type == "cuda":
        results["gpu"] = torch.cuda.get_device_name(device)
    generator = torch.Generator(device="cpu").manual_seed(0)
    vocab = model.config.vocab_size
    for batch in [int(b) for b in args.batches.split(",") if b]:
        allocate_cache(model, batch, args.prompt + args.output)
        prompt = torch.randint(0, vocab, (batch, args.prompt), generator=generator).to(device)
        began = time.perf_counter()
        generate(model, step, prompt, args.output - 1)  # compiles
        warmup_s = time.perf_counter() - began
        runs = [generate(model, step, prompt, args.output - 1) for _ in range(args.repeats)]
        decode_s = statistics.median(decode for _, decode in runs)
        steps = args.output - 1
        results["batches"][str(batch)] = {
            "decode_tokens_per_second": batch * steps / decode_s,
            "tpot_ms": 1000.0 * decode_s / steps,
            "ttft_ms": 1000.0 * statistics.median(first for first, _ in runs),
            "first_generation_s": warmup_s}
        print(f"batch {batch}: {results['batches'][str(batch)]}", flush=True)
    if args.prefill:
        allocate_cache(model, 1, args.prefill + 1)
        prompt = torch.randint(0, vocab, (1, args.prefill), generator=generator).to(device)
        times = [generate(model, step, prompt, 0)[0] for _ in range(args.repeats + 1)][1:]
        results["prefill"] = {"tokens": args.prefill, "ttft_ms": 1000.0 * statistics.median(times),
                              "prefill_tokens_per_second": args.prefill / statistics.median(times)}
        print(f"prefill {args.prefill}: {results['prefill']}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
