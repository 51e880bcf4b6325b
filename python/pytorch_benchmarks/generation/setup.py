"""What the decoder scenarios share: which models generate, the engine they build, statistics."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from ..errors import UserError
from ..models.llama import FLAVORS, LlamaConfig
from .engine import Engine, PromptTooLong, build_model, cache_length, describe

#: The latency percentiles the scenarios report (besides the mean), as LoadGen's do.
PERCENTILES = (50, 90, 99)
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def is_decoder(model_id: str) -> bool:
    """Whether `model_id` is a Llama decoder (it generates; models/llama.py's FLAVORS)."""
    return model_id in FLAVORS


def decoder_config(model_id: str) -> LlamaConfig:
    """The published numbers of a decoder."""
    return FLAVORS[model_id]


def model_title(model_id: str) -> str:
    """The registered title of the model, else its id."""
    from ..models import UnknownModelError, get_model_spec

    try:
        return get_model_spec(model_id).title
    except UnknownModelError:
        return model_id


def cache_positions(lengths: Sequence[tuple[int, int]], kv_cache_tokens: int,
                    config: LlamaConfig) -> int:
    """The cache's length for these requests: `kv_cache_tokens`, or sized to the longest.

    A request that does not fit (the cache, the model's context) is a UserError that says
    which and by how much.
    """
    prompt, output = max(lengths, key=lambda pair: pair[0] + pair[1])
    need = prompt + output
    if kv_cache_tokens and need > kv_cache_tokens:
        raise UserError(f"a prompt of {prompt} tokens and {output} output tokens need {need} "
                        f"positions; the KV cache holds {kv_cache_tokens} "
                        "(exp.kv_cache_tokens)")
    length = cache_length(kv_cache_tokens or need)
    if need > config.max_seq_len:
        raise UserError(f"a prompt of {prompt} tokens and {output} output tokens need {need} "
                        f"positions; the model's context is {config.max_seq_len}")
    return min(length, config.max_seq_len)


def build_engine(opts: Any, device: torch.device, lengths: Sequence[tuple[int, int]], *,
                 slots: int, say: Callable[[str], None]) -> Engine:
    """The decoder with random weights in `--dtype` on `device`, and its engine."""
    config = decoder_config(opts.model)
    length = cache_positions(lengths, opts.generation.kv_cache_tokens, config)
    model = build_model(config, device, _DTYPES[opts.dtype])
    # The decode step is always captured on a GPU: a replay is the engine's step (the
    # image models' --cuda_graphs does not apply).
    graphs = device.type == "cuda"
    try:
        engine = Engine(model, slots=slots, length=length, compile_steps=opts.compile,
                        graphs=graphs, compile_backend=opts.generation.compile_backend)
    except PromptTooLong as error:
        raise UserError(str(error)) from None
    say(f"generation engine: model={opts.model} device={device} " + " ".join(
        f"{key}={value}" for key, value in describe(engine).items()))
    return engine


def compilations() -> int:
    """Graphs dynamo has compiled in this process (a counter; read before and after)."""
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


def latency_statistics(name: str, values: Sequence[float]) -> dict[str, float]:
    """`results.<name>_mean` and `_p50`, `_p90`, `_p99` of `values` (ms)."""
    data = np.asarray(values, dtype=np.float64)
    found = {f"results.{name}_mean": float(data.mean())}
    for percentile, value in zip(PERCENTILES, np.percentile(data, PERCENTILES)):
        found[f"results.{name}_p{percentile}"] = float(value)
    return found
