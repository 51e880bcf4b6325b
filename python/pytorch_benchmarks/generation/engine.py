"""The generation engine: prefill, then greedy decode from a static KV cache (gpt-fast's way).

The engine serves a `models.llama.Transformer` without changing what the model computes. It
holds, allocated once for its `slots` (requests decoded at once) and its `length` (the
longest prompt plus its output, rounded up to `ALIGN`):

- the weights, fused: per block the query, key and value projections as one matrix
  (`wqkv`) and the SwiGLU gate and up projections as one (`w13`), so that each is one
  matrix product; the model's own `wq`, `wk`, `wv`, `w1`, `w3` become views of the fused
  matrices (no second copy of the weights);
- the KV cache: per block a K and a V tensor [slots, n_kv_heads, length, head_dim], in the
  model's dtype;
- `tokens` [slots]: each slot's next input token (the token it generated last), and
  `positions` [slots]: the position that token takes.

`prefill(slots, prompts, lengths)` runs prompts (right-padded to a multiple of `ALIGN`) with
causal attention over themselves, writes their K and V into those slots' cache rows, and
puts each prompt's first generated token (the argmax of the logits of its last position,
the only position projected to the vocabulary) into `tokens`. `decode(size)` runs one step
for slots [0, size): each slot's token attends to its cache rows up to its position, its K
and V are written at that position, and the argmax of its logits replaces its token while
its position advances by one. Everything stays on the device: the host never reads a token
to continue. A padded prompt position holds K/V that no query sees: decode attends to
positions up to its own, and writes each position before it reaches it.

Compilation (`compile_steps`): each step is three compiled functions, a prologue (token
embedding, rotary angles, the visibility mask), one transformer block and a head (the final
norm, the output projection, argmax). The block function is compiled once and called for
every block with that block's weights and cache, so that torch.compile traces and tunes one
block, not 32 copies of it. Decode compiles static shapes, one set per decode size; with
inductor's coordinate-descent tuning a batch-1 matrix product becomes a reduction kernel
tuned for bandwidth (inductor's own decomposition). Prefill compiles once with a symbolic
batch and length, everything else static (the lengths are multiples of `ALIGN`, never 1:
one graph covers every shape but a batch of 1, which has its own). On a GPU each decode
size is captured in a CUDA graph (`graphs`), so a step is one replay: the host launches
nothing else per token.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..models.llama import LlamaConfig, Transformer, apply_rope, rope_tables

#: Prompt lengths, and the cache's length, are padded up to a multiple of this.
ALIGN = 16
#: Warm-up runs of a decode size before its CUDA graph is captured (compilation included).
CAPTURE_WARMUP = 3
#: The most prompt positions (padding included) one prefill call computes; more prompts are
#: prefilled in several calls (a longer prompt alone in one).
PREFILL_TOKENS = 16384


class PromptTooLong(ValueError):
    """A prompt and its output do not fit the cache or the model's context."""


class LayerWeights(NamedTuple):
    """One transformer block's weights, in the engine's fused layout."""

    attention_norm: torch.Tensor
    wqkv: torch.Tensor
    wo: torch.Tensor
    ffn_norm: torch.Tensor
    w13: torch.Tensor
    w2: torch.Tensor


def round_up(value: int, multiple: int = ALIGN) -> int:
    """`value` rounded up to a multiple of `multiple`."""
    return -(-value // multiple) * multiple


def cache_length(longest: int) -> int:
    """The cache length for sequences of at most `longest` positions (prompt plus output)."""
    return round_up(max(longest, 1))


@torch.no_grad()
def fuse_weights(model: Transformer) -> list[LayerWeights]:
    """Each block's weights in the fused layout; the model's own become views of them."""
    fused = []
    for block in model.layers:
        attention, feed_forward = block.attention, block.feed_forward
        wqkv = torch.cat([attention.wq.weight, attention.wk.weight, attention.wv.weight])
        q, k, v = wqkv.split([attention.wq.out_features, attention.wk.out_features,
                              attention.wv.out_features])
        attention.wq.weight = nn.Parameter(q, requires_grad=False)
        attention.wk.weight = nn.Parameter(k, requires_grad=False)
        attention.wv.weight = nn.Parameter(v, requires_grad=False)
        w13 = torch.cat([feed_forward.w1.weight, feed_forward.w3.weight])
        w1, w3 = w13.chunk(2)
        feed_forward.w1.weight = nn.Parameter(w1, requires_grad=False)
        feed_forward.w3.weight = nn.Parameter(w3, requires_grad=False)
        fused.append(LayerWeights(block.attention_norm.weight.detach(), wqkv,
                                  attention.wo.weight.detach(), block.ffn_norm.weight.detach(),
                                  w13, feed_forward.w2.weight.detach()))
    return fused


# -- the steps' functions (compiled as they are; pure but for the cache and slot state) -------

def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """The model's RMSNorm (float32 inside), as a function of its weight."""
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * weight


def _qkv(x: torch.Tensor, weights: LayerWeights, cos: torch.Tensor, sin: torch.Tensor,
         heads: int, kv_heads: int, eps: float
         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Queries [B, T, heads, Dh], keys and values [B, T, kv_heads, Dh], rotated."""
    batch, seq_len, _ = x.shape
    qkv = F.linear(rms_norm(x, weights.attention_norm, eps), weights.wqkv)
    head_dim = qkv.shape[-1] // (heads + 2 * kv_heads)
    q, k, v = qkv.split([heads * head_dim, kv_heads * head_dim, kv_heads * head_dim], dim=-1)
    q = apply_rope(q.view(batch, seq_len, heads, head_dim), cos, sin)
    k = apply_rope(k.view(batch, seq_len, kv_heads, head_dim), cos, sin)
    return q, k, v.view(batch, seq_len, kv_heads, head_dim)


def _feed_forward(x: torch.Tensor, weights: LayerWeights, eps: float) -> torch.Tensor:
    gate, up = F.linear(rms_norm(x, weights.ffn_norm, eps), weights.w13).chunk(2, dim=-1)
    return x + F.linear(F.silu(gate) * up, weights.w2)


def decode_prologue(tokens: torch.Tensor, positions: torch.Tensor, embedding: torch.Tensor,
                    rope_cos: torch.Tensor, rope_sin: torch.Tensor, size: int
                    ) -> tuple[torch.Tensor, ...]:
    """Slots [0, size): their tokens' embeddings, rotary angles and visible cache positions."""
    position = positions[:size]
    x = F.embedding(tokens[:size], embedding)[:, None]
    visible = torch.arange(rope_cos.shape[0], device=position.device) <= position[:, None]
    return x, rope_cos[position][:, None], rope_sin[position][:, None], \
        visible[:, None, None, :], position


def decode_block(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                 visible: torch.Tensor, position: torch.Tensor, weights: LayerWeights,
                 k_cache: torch.Tensor, v_cache: torch.Tensor, heads: int, kv_heads: int,
                 eps: float) -> torch.Tensor:
    """One block for one token per slot: write its K/V at its position, attend to the cache.

    Grouped-query attention without copies: the `heads // kv_heads` queries of a K/V head
    are one matrix product with that head's cached keys.
    """
    size = x.shape[0]
    q, k, v = _qkv(x, weights, cos, sin, heads, kv_heads, eps)
    rows = torch.arange(size, device=x.device)
    k_cache[rows, :, position] = k[:, 0]
    v_cache[rows, :, position] = v[:, 0]
    head_dim = q.shape[-1]
    grouped = q.view(size, kv_heads, heads // kv_heads, head_dim)
    scores = torch.matmul(grouped, k_cache[:size].transpose(-1, -2)).float()
    scores = (scores * (1.0 / math.sqrt(head_dim))).masked_fill(~visible, float("-inf"))
    attended = torch.matmul(torch.softmax(scores, dim=-1).type_as(q), v_cache[:size])
    x = x + F.linear(attended.reshape(size, 1, heads * head_dim), weights.wo)
    return _feed_forward(x, weights, eps)


def decode_head(x: torch.Tensor, norm: torch.Tensor, output: torch.Tensor,
                tokens: torch.Tensor, positions: torch.Tensor, last_position: int,
                eps: float) -> None:
    """Greedy: each slot's next token replaces its token; its position advances (capped)."""
    size = x.shape[0]
    best = F.linear(rms_norm(x[:, 0], norm, eps), output).argmax(dim=-1)
    tokens[:size].copy_(best)
    positions[:size].copy_((positions[:size] + 1).clamp(max=last_position))


def prefill_prologue(prompts: torch.Tensor, embedding: torch.Tensor, rope_cos: torch.Tensor,
                     rope_sin: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The prompts' embeddings [n, L, dim] and the rotary angles of positions 0..L-1.

    Gathered, not sliced: a slice as long as the table would be a view of it, and a graph
    of its own.
    """
    positions = torch.arange(prompts.shape[1], device=prompts.device)
    return F.embedding(prompts, embedding), rope_cos[positions][None], rope_sin[positions][None]


def prefill_block(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                  slot_ids: torch.Tensor, weights: LayerWeights, k_cache: torch.Tensor,
                  v_cache: torch.Tensor, heads: int, kv_heads: int, eps: float,
                  gqa: bool) -> torch.Tensor:
    """One block over whole prompts (causal attention among their own positions)."""
    batch, length, _ = x.shape
    q, k, v = _qkv(x, weights, cos, sin, heads, kv_heads, eps)
    # Indexed positions, not a slice of the cache: a prompt as long as the cache would make
    # the slice the whole tensor, and a graph of its own.
    rows, positions = slot_ids[:, None], torch.arange(length, device=x.device)[None, :]
    k_cache[rows, :, positions] = k
    v_cache[rows, :, positions] = v
    k, v = k.transpose(1, 2), v.transpose(1, 2)
    attended = F.scaled_dot_product_attention(q.transpose(1, 2), k, v, is_causal=True,
                                              enable_gqa=gqa)
    x = x + F.linear(attended.transpose(1, 2).reshape(batch, length, -1), weights.wo)
    return _feed_forward(x, weights, eps)


def prefill_head(x: torch.Tensor, lengths: torch.Tensor, slot_ids: torch.Tensor,
                 norm: torch.Tensor, output: torch.Tensor, tokens: torch.Tensor,
                 positions: torch.Tensor, eps: float) -> None:
    """Each prompt's first generated token, from its last position's logits only."""
    rows = torch.arange(x.shape[0], device=x.device)
    last = x[rows, lengths - 1]
    tokens[slot_ids] = F.linear(rms_norm(last, norm, eps), output).argmax(dim=-1)
    positions[slot_ids] = lengths


def _bound_steps(heads: int, kv_heads: int, eps: float, last_position: int) -> tuple:
    """The six step functions with the model's shapes bound as constants (closures).

    Not arguments: dynamic compilation would make them symbolic, and a symbolic head count
    is a slower kernel (and SDPA's enable_gqa must be a plain bool).
    """
    gqa = heads != kv_heads

    def block_decode(x, cos, sin, visible, position, weights, k_cache, v_cache):
        return decode_block(x, cos, sin, visible, position, weights, k_cache, v_cache,
                            heads, kv_heads, eps)

    def head_decode(x, norm, output, tokens, positions):
        decode_head(x, norm, output, tokens, positions, last_position, eps)

    def block_prefill(x, cos, sin, slot_ids, weights, k_cache, v_cache):
        return prefill_block(x, cos, sin, slot_ids, weights, k_cache, v_cache, heads,
                             kv_heads, eps, gqa)

    def head_prefill(x, lengths, slot_ids, norm, output, tokens, positions):
        prefill_head(x, lengths, slot_ids, norm, output, tokens, positions, eps)

    return (decode_prologue, block_decode, head_decode, prefill_prologue, block_prefill,
            head_prefill)


# -- the engine ------------------------------------------------------------------------------

def compile_settings(device: torch.device) -> None:
    """Inductor's settings for the engine (gpt-fast's): coordinate descent on GPUs.

    Coordinate-descent tuning makes inductor decompose a batch-1 matrix product into a
    reduction it tunes for bandwidth. Every decode size and both prefill graphs are guards
    of the same functions: dynamo may keep them all.
    """
    import torch._inductor.config as inductor_config

    if device.type == "cuda":
        inductor_config.coordinate_descent_tuning = True
    # A prefill's batch and length are its only symbolic sizes; a batch that happened to equal
    # a head count when compiled must not be tied to it (a recompile at the next batch).
    torch.fx.experimental._config.use_duck_shape = False
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(64, getattr(torch._dynamo.config, name)))


class Engine:
    """A decoder's weights, its KV cache over `slots`, and its two steps (module doc)."""

    def __init__(self, model: Transformer, *, slots: int, length: int,
                 compile_steps: bool = False, graphs: bool = False,
                 compile_backend: str = "inductor") -> None:
        config: LlamaConfig = model.config
        if length > config.max_seq_len:
            raise PromptTooLong(f"the cache needs {length} positions; the model's context is "
                                f"{config.max_seq_len}")
        embedding = model.tok_embeddings.weight
        self.device = embedding.device
        self.dtype = embedding.dtype
        self.config = config
        self.slots = slots
        self.length = length
        self.heads, self.kv_heads, self.eps = config.n_heads, config.n_kv_heads, config.norm_eps
        self.layers = fuse_weights(model)
        self.embedding = embedding.detach()
        self.norm = model.norm.weight.detach()
        self.output = model.output.weight.detach()
        self.rope_cos, self.rope_sin = rope_tables(config.head_dim, length, config.rope_theta,
                                                   config.rope_scaling, device=self.device)
        shape = (slots, config.n_kv_heads, length, config.head_dim)
        self.k_cache = [torch.zeros(shape, dtype=self.dtype, device=self.device)
                        for _ in self.layers]
        self.v_cache = [torch.zeros(shape, dtype=self.dtype, device=self.device)
                        for _ in self.layers]
        self.tokens = torch.zeros(slots, dtype=torch.long, device=self.device)
        self.positions = torch.zeros(slots, dtype=torch.long, device=self.device)
        self.compiled = compile_steps
        self.graphs = graphs and self.device.type == "cuda"
        functions = _bound_steps(self.heads, self.kv_heads, self.eps, length - 1)
        if compile_steps:
            compile_settings(self.device)
            decode = [torch.compile(f, fullgraph=True, dynamic=False, backend=compile_backend)
                      for f in functions[:3]]
            prefill = [torch.compile(f, fullgraph=True, backend=compile_backend)
                       for f in functions[3:]]
            functions = (*decode, *prefill)
        (self._decode_prologue, self._decode_block, self._decode_head,
         self._prefill_prologue, self._prefill_block, self._prefill_head) = functions
        self._captured: dict[int, torch.cuda.CUDAGraph] = {}
        self._pool = torch.cuda.graph_pool_handle() if self.graphs else None
        self.decode_sizes: list[int] = []

    @property
    def kv_bytes_per_token(self) -> int:
        """Bytes of K and V one position holds in the cache, over all blocks."""
        config = self.config
        return 2 * config.n_layers * config.n_kv_heads * config.head_dim * self.dtype.itemsize

    def check_fits(self, prompt: int, output: int) -> None:
        """Refuse a request whose prompt and output do not fit the cache (PromptTooLong)."""
        if prompt < 1:
            raise PromptTooLong("a prompt needs at least 1 token")
        if prompt + output > self.length:
            raise PromptTooLong(f"a prompt of {prompt} tokens and {output} output tokens need "
                                f"{prompt + output} positions; the KV cache holds "
                                f"{self.length}")

    # -- prefill ---------------------------------------------------------------------------
    @torch.inference_mode()
    def prefill(self, slots: Sequence[int], prompts: torch.Tensor,
                lengths: Sequence[int]) -> None:
        """Prefill `prompts` [n, L] (right-padded, L a multiple of ALIGN) into `slots`."""
        slot_ids = _on(self.device, slots)
        lengths_on = _on(self.device, lengths)
        self._dynamic(prompts, 0, 1)
        self._dynamic(slot_ids, 0)
        self._dynamic(lengths_on, 0)
        x, cos, sin = self._prefill_prologue(prompts, self.embedding, self.rope_cos,
                                             self.rope_sin)
        self._dynamic(x, 0, 1)
        self._dynamic(cos, 1)
        self._dynamic(sin, 1)
        for weights, k_cache, v_cache in zip(self.layers, self.k_cache, self.v_cache):
            x = self._prefill_block(x, cos, sin, slot_ids, weights, k_cache, v_cache)
        self._dynamic(x, 0, 1)
        self._prefill_head(x, lengths_on, slot_ids, self.norm, self.output, self.tokens,
                           self.positions)

    def _dynamic(self, tensor: torch.Tensor, *dims: int) -> None:
        """Compile `tensor`'s batch and length dimensions as symbolic (a size of 1 apart)."""
        if self.compiled:
            for dim in dims:
                torch._dynamo.maybe_mark_dynamic(tensor, dim)

    # -- decode ----------------------------------------------------------------------------
    @torch.inference_mode()
    def decode(self, size: int) -> None:
        """One greedy step for slots [0, size) (a prepared size's CUDA graph, on a GPU)."""
        graph = self._captured.get(size)
        if graph is not None:
            graph.replay()
        else:
            self._step(size)

    def _step(self, size: int) -> None:
        x, cos, sin, visible, position = self._decode_prologue(
            self.tokens, self.positions, self.embedding, self.rope_cos, self.rope_sin, size)
        for weights, k_cache, v_cache in zip(self.layers, self.k_cache, self.v_cache):
            x = self._decode_block(x, cos, sin, visible, position, weights, k_cache, v_cache)
        self._decode_head(x, self.norm, self.output, self.tokens, self.positions)

    def prepare_decode(self, sizes: Sequence[int]) -> None:
        """Compile (and capture, on a GPU) the decode step of each of `sizes`.

        The warm-up steps run on the cache as it is: prepare before serving, or prefill
        again afterwards (each slot's state is its prefill's).
        """
        self.decode_sizes = sorted(set(sizes))
        saved = self.tokens.clone(), self.positions.clone()
        with torch.inference_mode():
            for size in self.decode_sizes:
                if not self.graphs:
                    self._step(size)
                    continue
                side = torch.cuda.Stream(self.device)
                side.wait_stream(torch.cuda.current_stream(self.device))
                with torch.cuda.stream(side):
                    for _ in range(CAPTURE_WARMUP):
                        self._step(size)
                torch.cuda.current_stream(self.device).wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=self._pool, stream=side):
                    self._step(size)
                torch.cuda.current_stream(self.device).wait_stream(side)
                self._captured[size] = graph
            self.tokens.copy_(saved[0])
            self.positions.copy_(saved[1])

    def decode_size(self, highest_slot: int) -> int:
        """The smallest prepared decode size that covers slots [0, highest_slot]."""
        for size in self.decode_sizes:
            if size > highest_slot:
                return size
        return self.slots

    @functools.cached_property
    def weight_bytes(self) -> int:
        """Bytes of every weight a decode step reads whole: all but the embedding table."""
        weights = sum(tensor.numel() for layer in self.layers for tensor in layer)
        return (weights + self.norm.numel() + self.output.numel()) * self.dtype.itemsize

    def read_bytes(self, rows: int, context_positions: int) -> int:
        """Bytes a decode step must read.

        The weights (`weight_bytes`), one embedding row for each of `rows` slots and the K/V
        of `context_positions` cached positions in all.
        """
        row = self.embedding.shape[1] * self.dtype.itemsize
        return self.weight_bytes + rows * row + context_positions * self.kv_bytes_per_token

    def flops_per_token(self, context: float) -> float:
        """Forward FLOPs of one token with `context` positions to attend to.

        2 per weight of the products (the embedding lookup has none) and 4 per head and
        position for the attention's scores and weighted sum.
        """
        config = self.config
        weights = self.weight_bytes // self.dtype.itemsize
        return 2.0 * weights + 4.0 * config.n_layers * config.n_heads * config.head_dim * context


def _on(device: torch.device, values: Sequence[int]) -> torch.Tensor:
    """A small long tensor on `device`, copied without waiting for the device."""
    host = torch.tensor(list(values), dtype=torch.long)
    return host.to(device, non_blocking=True) if device.type == "cuda" else host


def build_model(config: LlamaConfig, device: torch.device, dtype: torch.dtype,
                seed: int = 0) -> Transformer:
    """The decoder with random weights, made on the meta device and filled where it runs.

    Made in `dtype` directly (a float32 8B model would need twice the memory first); the
    rotary tables stay float32 (the model keeps them so).
    """
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device("meta"):
            model = Transformer(config)
    finally:
        torch.set_default_dtype(default)
    model = model.to_empty(device=device)
    torch.manual_seed(seed)
    model.init_weights()
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model


def greedy_reference(model: Transformer, prompt: Sequence[int], count: int) -> list[int]:
    """`count` greedy tokens by recomputing the whole sequence each time (no cache).

    The definition the engine is tested against: the model's own forward pass.
    """
    device = model.tok_embeddings.weight.device
    sequence = list(prompt)
    generated = []
    with torch.inference_mode():
        for _ in range(count):
            logits = model(torch.tensor([sequence], dtype=torch.long, device=device))
            token = int(logits[0, -1].argmax())
            generated.append(token)
            sequence.append(token)
    return generated


def padded_prompts(prompts: Sequence[Sequence[int]], device: torch.device) -> torch.Tensor:
    """Prompts as one right-padded [n, L] tensor, L the longest rounded up to ALIGN."""
    width = round_up(max(len(prompt) for prompt in prompts))
    rows = [list(prompt) + [0] * (width - len(prompt)) for prompt in prompts]
    return torch.tensor(rows, dtype=torch.long, device=device)


def generate(engine: Engine, prompts: Sequence[Sequence[int]], count: int) -> list[list[int]]:
    """`count` greedy tokens for each prompt, in slots 0..n-1 (a test's and a check's path).

    Reads the tokens back after every step: not a timed path.
    """
    slots = list(range(len(prompts)))
    engine.prefill(slots, padded_prompts(prompts, engine.device), [len(p) for p in prompts])
    outputs = [[token] for token in engine.tokens[:len(prompts)].tolist()]
    size = engine.decode_size(len(prompts) - 1)
    for _ in range(count - 1):
        engine.decode(size)
        for row, token in zip(outputs, engine.tokens[:len(prompts)].tolist()):
            row.append(token)
    return outputs


def prefill_groups(prompt_lengths: Sequence[int], budget: int = PREFILL_TOKENS
                   ) -> list[list[int]]:
    """Indices of `prompt_lengths`, in order, in groups whose padded size fits `budget`.

    A group's size is its count times its longest prompt rounded up to ALIGN; a prompt
    longer than the budget is a group of its own.
    """
    groups: list[list[int]] = []
    current: list[int] = []
    width = 0
    for index, length in enumerate(prompt_lengths):
        wider = max(width, round_up(length))
        if current and wider * (len(current) + 1) > budget:
            groups.append(current)
            current, wider = [], round_up(length)
        current.append(index)
        width = wider
    if current:
        groups.append(current)
    return groups


class Requests:
    """Synthetic requests: their (prompt, output) lengths and random prompt tokens.

    The prompts stay on the device ([count, width] token ids), so that a prefill gathers its
    rows there: nothing but their indices crosses from the host while serving.
    """

    def __init__(self, lengths: Sequence[tuple[int, int]], vocab_size: int,
                 device: torch.device, seed: int = 0) -> None:
        self.lengths = list(lengths)
        width = round_up(max(prompt for prompt, _ in self.lengths))
        generator = torch.Generator().manual_seed(seed)
        self.pool = torch.randint(0, vocab_size, (len(self.lengths), width),
                                  generator=generator).to(device)
        self.device = device

    def __len__(self) -> int:
        return len(self.lengths)

    def prompts(self, indices: Sequence[int]) -> torch.Tensor:
        """The prompts of `indices` as one right-padded [n, L] batch on the device."""
        width = round_up(max(self.lengths[index][0] for index in indices))
        # A new tensor of the standard strides whatever the count and the width (a compiled
        # prefill guards on the strides; contiguous() keeps a batch of one's odd stride).
        return self.pool[:, :width].index_select(0, _on(self.device, indices))

    def tokens(self, index: int) -> list[int]:
        """One prompt's tokens (a test's path: reads the device)."""
        return self.pool[index, :self.lengths[index][0]].tolist()


def describe(engine: Engine) -> dict[str, Any]:
    """The engine's shape, for its log line."""
    return {"slots": engine.slots, "cache_length": engine.length, "compiled": engine.compiled,
            "cuda_graphs": engine.graphs, "dtype": str(engine.dtype).replace("torch.", "")}
