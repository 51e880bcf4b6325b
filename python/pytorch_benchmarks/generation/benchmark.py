"""`exp.scenario benchmark` of a decoder: one batch generated at a time, timed on the device.

The batch is `--batch_size` requests (lengths from `--token_lengths`, the same requests every
time), one per slot of an engine sized for them: all prompts are prefilled (in groups of at
most `engine.PREFILL_TOKENS` padded positions), then every slot is decoded until the
longest answer is complete. `--num_warmup_batches` generations (at least one: everything
compiles there), then `--num_batches` timed ones, each stamped on the device's timeline
without waiting for it (stamps.py): a stamp after each prefill group and after each decode
step, one wait at the end of the generation.

Results (docs/llm-serving.md):
- `results.time_data`: every timed decode step's time, ms (dlbs's statistics give
  `results.time`, its percentiles, and `results.throughput` = batch x 1000 / time: tokens
  per second of the decode, a token per slot and step);
- `results.ttft_*`: each request's time to first token (from its generation's start to the
  end of its prefill group) and `results.tpot_*`: each request's time per output token
  (from its first token to its last, over its tokens less one): mean, p50, p90, p99;
- `results.prefill_tokens_per_second` (prompt tokens, padding left out, over the prefill time),
  `results.decode_tokens_per_second` (the tokens the requests asked for, over the decode time),
  `results.tokens_per_second` (output tokens over the whole generation);
- `results.decode_bytes_per_step`: what a decode step must read, on average (the weights
  but the embedding table, one embedding row per slot, the cached K/V of the positions the
  unfinished requests attend to): with `results.gpu_model`, dlbs derives
  `results.decode_bandwidth_fraction` (docs/efficiency.md);
- `results.flops_per_sample`: forward FLOPs of one decode token (dlbs derives the MFU);
- `results.recompiles`: compilations in the timed generations (0 expected).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from benchmark_common.token_lengths import request_lengths

from .engine import Engine, Requests, prefill_groups
from .setup import build_engine, compilations, latency_statistics
from .stamps import Stamps


@dataclass
class Generation:
    """One timed generation of the batch: per request and per step, ms."""

    ttft: list[float]
    tpot: list[float]
    steps: list[float]
    prefill_ms: float
    total_ms: float


def run_generation_benchmark(opts: Any, device: torch.device,
                             say: Callable[[str], None]) -> dict[str, Any]:
    """The benchmark of a decoder (module doc); the results to print."""
    gen = opts.generation
    lengths = request_lengths(gen.token_lengths, opts.batch_size, gen.input_tokens,
                              gen.output_tokens, gen.token_range_ratio)
    engine = build_engine(opts, device, lengths, slots=opts.batch_size, say=say)
    requests = Requests(lengths, engine.config.vocab_size, device)
    engine.prepare_decode([opts.batch_size])
    stamps = Stamps(device)
    groups = prefill_groups([prompt for prompt, _ in lengths])
    steps = max(output for _, output in lengths) - 1
    for _ in range(max(1, opts.num_warmup_batches)):
        generate_batch(engine, requests, groups, stamps, steps)
    before = compilations()
    timed = [generate_batch(engine, requests, groups, stamps, steps)
             for _ in range(opts.num_batches)]
    recompiles = compilations() - before
    return benchmark_results(engine, lengths, timed, recompiles)


def generate_batch(engine: Engine, requests: Requests, groups: Sequence[Sequence[int]],
                   stamps: Stamps, steps: int) -> Generation:
    """Prefill every request into its slot (request i in slot i), then `steps` decode steps."""
    start = stamps.now()
    prefilled = []
    for group in groups:
        engine.prefill(group, requests.prompts(group), [requests.lengths[i][0] for i in group])
        prefilled.append(stamps.now())
    stepped = []
    for _ in range(steps):
        engine.decode(engine.slots)
        stepped.append(stamps.now())
    stamps.wait(stepped[-1] if stepped else prefilled[-1])
    first = {index: stamps.ms(start, end) for group, end in zip(groups, prefilled)
             for index in group}
    step_ms = [stamps.ms(before, after)
               for before, after in zip([prefilled[-1], *stepped[:-1]], stepped)]
    ttft, tpot = [], []
    for index, (_, output) in enumerate(requests.lengths):
        ttft.append(first[index])
        done = stamps.ms(start, stepped[output - 2])  # the step of its last token
        tpot.append((done - first[index]) / (output - 1))
    total = stamps.ms(start, stepped[-1] if stepped else prefilled[-1])
    return Generation(ttft, tpot, step_ms, stamps.ms(start, prefilled[-1]), total)


def benchmark_results(engine: Engine, lengths: Sequence[tuple[int, int]],
                      timed: Sequence[Generation], recompiles: int) -> dict[str, Any]:
    """The protocol's keys of the timed generations (module doc)."""
    prompts = sum(prompt for prompt, _ in lengths)
    outputs = sum(output for _, output in lengths)
    steps = max(output for _, output in lengths) - 1
    # Per decode step k: the rows read (every slot) and the positions the unfinished
    # requests attend to (request i's token at step k sits at position prompt + k).
    contexts = [sum(prompt + k + 1 for prompt, output in lengths if k < output - 1)
                for k in range(steps)]
    step_ms = [ms for generation in timed for ms in generation.steps]
    decode_ms = sum(step_ms)
    results: dict[str, Any] = {
        "results.time_data": step_ms,
        "results.prefill_tokens_per_second": 1000.0 * prompts * len(timed)
        / sum(generation.prefill_ms for generation in timed),
        "results.tokens_per_second": 1000.0 * outputs * len(timed)
        / sum(generation.total_ms for generation in timed),
        "results.num_requests": len(lengths) * len(timed),
        "results.input_tokens_mean": prompts / len(lengths),
        "results.output_tokens_mean": outputs / len(lengths),
        "results.recompiles": recompiles,
    }
    if steps:
        asked = sum(output - 1 for _, output in lengths) * len(timed)
        results["results.decode_tokens_per_second"] = 1000.0 * asked / decode_ms
        results["results.decode_bytes_per_step"] = float(np.mean(
            [engine.read_bytes(engine.slots, context) for context in contexts]))
        active = sum(output - 1 for _, output in lengths)
        results["results.flops_per_sample"] = engine.flops_per_token(sum(contexts) / active)
    results.update(latency_statistics("ttft", [ms for g in timed for ms in g.ttft]))
    results.update(latency_statistics("tpot", [ms for g in timed for ms in g.tpot]))
    if recompiles:
        results["results.stats_warnings"] = [
            f"results.recompiles: {recompiles} compilation(s) inside the timed generations; "
            "their times include them"]
    return results
