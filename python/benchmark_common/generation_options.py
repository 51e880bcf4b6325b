"""The flags of LLM generation (docs/llm-serving.md), shared by the backends that generate.

They describe the requests (how long each prompt is, how many tokens each answer
generates: `token_lengths`), the latency bounds of the server and max_qps scenarios (time to
first token and time per output token, at `--latency_percentile`), and the KV cache. The
scenario itself is the evaluation flags' `--scenario` (options.py).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from .flags import FlagError, take_flags
from .token_lengths import DISTRIBUTIONS, MIN_OUTPUT_TOKENS

_FLAGS = ("token_lengths", "input_tokens", "output_tokens", "token_range_ratio",
          "ttft_bound_ms", "tpot_bound_ms", "kv_cache_tokens", "decode_sizes",
          "compile_backend")
#: torch.compile's backends the engine accepts (the others are for debugging and tests).
COMPILE_BACKENDS = ("inductor", "aot_eager", "eager")


class GenerationFlagError(FlagError):
    """A bad generation flag: the message names it and what is accepted."""


@dataclass(frozen=True)
class GenerationOptions:
    """The generation flags, checked (see `add_generation_flags` for their meanings)."""

    token_lengths: str = "fixed"
    input_tokens: int = 128
    output_tokens: int = 256
    token_range_ratio: float = 0.5
    ttft_bound_ms: float = 2000.0
    tpot_bound_ms: float = 100.0
    kv_cache_tokens: int = 0
    #: The decode sizes the serving scenarios prepare (empty: 1, 4, 16, ... and the slots).
    decode_sizes: tuple[int, ...] = ()
    compile_backend: str = "inductor"


def add_generation_flags(parser: argparse.ArgumentParser) -> None:
    """Add the generation flags to a backend's parser."""
    group = parser.add_argument_group("LLM generation (docs/llm-serving.md)")
    group.add_argument("--token_lengths", default="fixed", choices=DISTRIBUTIONS,
                       help="how prompt and answer lengths are drawn: fixed (--input_tokens, "
                            "--output_tokens), uniform around them (--token_range_ratio), or "
                            "MLPerf's OpenOrca dataset's lengths")
    group.add_argument("--input_tokens", type=int, default=128,
                       help="prompt tokens of a request (fixed), or their centre (uniform)")
    group.add_argument("--output_tokens", type=int, default=256,
                       help="tokens a request generates (fixed), or their centre (uniform)")
    group.add_argument("--token_range_ratio", type=float, default=0.5,
                       help="uniform: lengths are drawn in n (1 - r) .. n (1 + r)")
    group.add_argument("--ttft_bound_ms", type=float, default=2000.0,
                       help="server and max_qps: the bound of the time to first token at "
                            "--latency_percentile, ms")
    group.add_argument("--tpot_bound_ms", type=float, default=100.0,
                       help="server and max_qps: the bound of the time per output token at "
                            "--latency_percentile, ms")
    group.add_argument("--kv_cache_tokens", type=int, default=0,
                       help="positions of the KV cache per request slot; 0: the longest "
                            "prompt plus its output, rounded up to 16")
    group.add_argument("--decode_sizes", type=_sizes, default=(),
                       help="server, offline, max_qps: the decode sizes compiled and captured, "
                            "comma-separated (the slots are always one); empty: 1, 4, 16, ... "
                            "up to the slots")
    group.add_argument("--compile_backend", default="inductor", choices=COMPILE_BACKENDS,
                       help="--compile: torch.compile's backend for the generation engine "
                            "(inductor; the others trace without generating kernels)")


def _sizes(text: str) -> tuple[int, ...]:
    """'1,64' -> (1, 64): positive sizes, ascending, each once."""
    try:
        sizes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected sizes like 1,16,64, got {text!r}") from None
    if any(size < 1 for size in sizes):
        raise argparse.ArgumentTypeError(f"decode sizes must be >= 1, got {text!r}")
    return tuple(sizes)


def generation_options(namespace: argparse.Namespace) -> GenerationOptions:
    """Take the generation flags out of a parsed namespace (deleting them) and check them."""
    options = GenerationOptions(**take_flags(namespace, _FLAGS))
    check(options)
    return options


def check(options: GenerationOptions) -> None:
    """Refuse values that describe no request; raises GenerationFlagError."""
    if options.input_tokens < 1:
        raise GenerationFlagError(f"--input_tokens must be >= 1, got {options.input_tokens}")
    if options.output_tokens < MIN_OUTPUT_TOKENS:
        raise GenerationFlagError(
            f"--output_tokens must be >= {MIN_OUTPUT_TOKENS} (the time per output token is "
            f"measured between the first and the last), got {options.output_tokens}")
    if not (math.isfinite(options.token_range_ratio) and 0 <= options.token_range_ratio < 1):
        raise GenerationFlagError(f"--token_range_ratio must be in [0, 1), got "
                                  f"{options.token_range_ratio}")
    for name in ("ttft_bound_ms", "tpot_bound_ms"):
        value = getattr(options, name)
        if not math.isfinite(value) or value <= 0:
            raise GenerationFlagError(f"--{name} must be a finite number > 0, got {value}")
    if options.kv_cache_tokens < 0:
        raise GenerationFlagError(f"--kv_cache_tokens must be >= 0 (0: sized to the "
                                  f"requests), got {options.kv_cache_tokens}")
