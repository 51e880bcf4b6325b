"""Synthetic generation requests: each prompt's length and the tokens its answer generates.

`request_lengths(distribution, count, ...)` gives `count` (prompt tokens, output tokens)
pairs, the same on every machine for the same arguments (a seeded `random.Random`):

- `fixed`: every prompt `input_tokens` long, every answer `output_tokens`.
- `uniform`: integers drawn uniformly between `n (1 - r)` and `n (1 + r)` (rounded) for
  n = `input_tokens` and `output_tokens`, r = `range_ratio` (the convention of vLLM's random
  dataset, `--random-range-ratio`); at least 1 prompt token and 2 output tokens.
- `openorca`: the lengths of MLPerf Inference's Llama 2 70B dataset (OpenOrca's GPT-4
  partition, 24,576 samples, prompts and reference answers each under 1,024 tokens of
  Llama 2's tokenizer; `language/llama2-70b/processorca.py` of mlcommons/inference), drawn
  from the quantiles of its `tok_input_length` and `tok_output_length` columns (the tables
  below, linear between quantiles; the prompt and the answer are drawn independently). The
  columns' statistics, of every sample: prompts mean 222.3, median 152, p90 519, max 1,021;
  answers mean 218.9, median 190, p90 449, min 3, max 1,016. Llama 2 70B's own greedy
  answers are longer (MLCommons' reference: 294.45 tokens per sample); here every request
  generates exactly its drawn count (no end-of-sequence token stops it).

Standard library only: every backend can use it.
"""

from __future__ import annotations

import bisect
import random
from typing import List, Tuple  # noqa: UP035 - Python 3.8 too

DISTRIBUTIONS = ("fixed", "uniform", "openorca")
#: The fewest output tokens of a request: LoadGen's time per output token divides the time
#: after the first token by the output tokens less one.
MIN_OUTPUT_TOKENS = 2

#: The quantiles (0 to 1) of the OpenOrca tables below.
ORCA_QUANTILES = (0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99,
                  1.0)
#: Prompt tokens at those quantiles (the dataset's `tok_input_length`).
ORCA_INPUT = (48, 56, 73, 85, 102, 117, 132, 152, 186, 232, 312, 519, 614, 791, 1021)
#: Answer tokens at those quantiles (the dataset's `tok_output_length`).
ORCA_OUTPUT = (3, 4, 15, 31, 67, 102, 146, 190, 231, 276, 336, 449, 563, 779, 1016)

#: (prompt tokens, output tokens) of each request.
Lengths = List[Tuple[int, int]]  # noqa: UP006


class LengthsError(ValueError):
    """Arguments that describe no request."""


def request_lengths(distribution: str, count: int, input_tokens: int, output_tokens: int,
                    range_ratio: float = 0.0, seed: int = 0) -> Lengths:
    """`count` requests' (prompt tokens, output tokens), drawn as the module doc says."""
    if distribution not in DISTRIBUTIONS:
        raise LengthsError(f"unknown token length distribution {distribution!r}; expected one "
                           f"of {', '.join(DISTRIBUTIONS)}")
    if count < 1:
        raise LengthsError(f"need at least 1 request, got {count}")
    if distribution == "fixed":
        return [(input_tokens, output_tokens)] * count
    rng = random.Random(seed)
    if distribution == "uniform":
        if not 0.0 <= range_ratio < 1.0:
            raise LengthsError(f"the range ratio must be in [0, 1), got {range_ratio}")
        low_in, high_in = _bounds(input_tokens, range_ratio, 1)
        low_out, high_out = _bounds(output_tokens, range_ratio, MIN_OUTPUT_TOKENS)
        return [(rng.randint(low_in, high_in), rng.randint(low_out, high_out))
                for _ in range(count)]
    return [(_quantile(ORCA_INPUT, rng.random()),
             max(MIN_OUTPUT_TOKENS, _quantile(ORCA_OUTPUT, rng.random())))
            for _ in range(count)]


def longest(distribution: str, input_tokens: int, output_tokens: int,
            range_ratio: float = 0.0) -> tuple[int, int]:
    """The longest prompt and the longest answer the distribution can draw."""
    if distribution == "fixed":
        return input_tokens, output_tokens
    if distribution == "uniform":
        return (_bounds(input_tokens, range_ratio, 1)[1],
                _bounds(output_tokens, range_ratio, MIN_OUTPUT_TOKENS)[1])
    return ORCA_INPUT[-1], ORCA_OUTPUT[-1]


def _bounds(center: int, ratio: float, least: int) -> tuple[int, int]:
    return max(least, int(round(center * (1.0 - ratio)))), \
        max(least, int(round(center * (1.0 + ratio))))


def _quantile(table: tuple, u: float) -> int:
    """The table's length at quantile `u`, linear between its quantiles, rounded."""
    at = min(max(bisect.bisect_right(ORCA_QUANTILES, u), 1), len(ORCA_QUANTILES) - 1)
    low, high = ORCA_QUANTILES[at - 1], ORCA_QUANTILES[at]
    fraction = (u - low) / (high - low)
    return int(round(table[at - 1] + fraction * (table[at] - table[at - 1])))
