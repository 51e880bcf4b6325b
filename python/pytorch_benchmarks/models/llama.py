"""Llama 3 decoders (Meta, 2024): the 3.2 1B/3B, the 3.1 8B/70B and a tiny debug flavour.

One file: the published hyper-parameters (``FLAVORS``), the modules, the parameter count and
the training FLOPs per token beside them (torchtitan's ``models/llama3`` layout, written
here). The modules are plain PyTorch: attention goes through
``F.scaled_dot_product_attention`` (FlashAttention kernels on Hopper), grouped-query
attention through its ``enable_gqa`` (no copies of K and V), and every piece compiles as one
graph per block. The serving engine reuses the pieces (the
norms, ``wq``/``wk``/``wv``/``wo``, ``feed_forward``, ``rope_tables``/``apply_rope``) with its
own cache-aware attention, so this stays a training model: keep its names and signatures
(docs/transformers.md).

Rotary embeddings rotate adjacent pairs (Meta's reference layout, as torchtitan does), in
float32, with Llama 3.1's "llama3" frequency scaling where the flavour publishes one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .layers import check_context
from .objectives import vocab_cross_entropy
from .registry import register_sequence_models


@dataclass(frozen=True)
class RopeScaling:
    """Llama 3.1's frequency scaling of RoPE (``rope_type: llama3`` in Meta's configs).

    Wavelengths longer than ``original_max_seq_len / low_freq_factor`` are divided by
    ``factor``, shorter than ``original_max_seq_len / high_freq_factor`` kept, and those
    between interpolated smoothly.
    """

    factor: float
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_seq_len: int = 8192


@dataclass(frozen=True)
class LlamaConfig:
    """The published hyper-parameters of one Llama 3 size."""

    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    vocab_size: int
    #: The hidden size of the SwiGLU feed-forward (14336 for 8B).
    ffn_dim: int
    #: The context the model was published with; longer sequences are refused.
    max_seq_len: int
    #: The 3.2 1B and 3B share the output projection with the token embedding.
    tie_embeddings: bool = False
    norm_eps: float = 1e-5
    rope_theta: float = 500000.0
    rope_scaling: RopeScaling | None = None

    @property
    def head_dim(self) -> int:
        """The width of one attention head."""
        return self.dim // self.n_heads


#: Meta's published sizes (the ``params.json`` / ``config.json`` of each release). The 1B and
#: 3B are Llama 3.2 (tied embeddings, RoPE scaling factor 32), the 8B and 70B Llama 3.1
#: (128K context, factor 8); the 8B and 70B of Llama 3.0 differ only in their 8K context and
#: unscaled RoPE, with the same parameters and the same FLOPs at any sequence that fits.
FLAVORS: dict[str, LlamaConfig] = {
    "llama3_debug": LlamaConfig(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=512,
                                ffn_dim=192, max_seq_len=512, rope_theta=10000.0),
    "llama3_1b": LlamaConfig(dim=2048, n_layers=16, n_heads=32, n_kv_heads=8,
                             vocab_size=128256, ffn_dim=8192, max_seq_len=131072,
                             tie_embeddings=True, rope_scaling=RopeScaling(factor=32.0)),
    "llama3_3b": LlamaConfig(dim=3072, n_layers=28, n_heads=24, n_kv_heads=8,
                             vocab_size=128256, ffn_dim=8192, max_seq_len=131072,
                             tie_embeddings=True, rope_scaling=RopeScaling(factor=32.0)),
    "llama3_8b": LlamaConfig(dim=4096, n_layers=32, n_heads=32, n_kv_heads=8,
                             vocab_size=128256, ffn_dim=14336, max_seq_len=131072,
                             rope_scaling=RopeScaling(factor=8.0)),
    "llama3_70b": LlamaConfig(dim=8192, n_layers=80, n_heads=64, n_kv_heads=8,
                              vocab_size=128256, ffn_dim=28672, max_seq_len=131072,
                              rope_scaling=RopeScaling(factor=8.0)),
}


def num_params(config: LlamaConfig, include_embedding: bool = True) -> int:
    """The parameter count of ``config``, from its numbers (the modules agree: tested).

    ``include_embedding=False`` leaves out the token-embedding table (a lookup, no FLOPs).
    A tied model's shared table is the output projection too, which is a matmul: it stays.
    """
    attention = config.dim * config.head_dim * (2 * config.n_heads + 2 * config.n_kv_heads)
    feed_forward = 3 * config.dim * config.ffn_dim
    block = attention + feed_forward + 2 * config.dim
    table = config.vocab_size * config.dim
    total = config.n_layers * block + config.dim + table * (1 if config.tie_embeddings else 2)
    if not include_embedding and not config.tie_embeddings:
        total -= table
    return total


def training_flops_per_token(config: LlamaConfig, seq_len: int) -> float:
    """Training FLOPs per token as torchtitan and PaLM (appendix B) count them.

    ``6 N + 12 L H Dh S``: 6 FLOPs per matmul weight and token (2 forward, 4 backward), N
    without the embedding lookup, plus the attention scores and their weighted sum at full
    (not causal-halved) length S. Normalisations, activations and the loss are left out, as
    there.
    """
    attention = 12 * config.n_layers * config.n_heads * config.head_dim * seq_len
    return float(6 * num_params(config, include_embedding=False) + attention)


class RMSNorm(nn.Module):
    """Root-mean-square normalisation, computed in float32 and cast back to the input's dtype."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight

    def reset_parameters(self) -> None:
        """Ones, as published."""
        nn.init.ones_(self.weight)


def _scaled_frequencies(frequencies: torch.Tensor, scaling: RopeScaling) -> torch.Tensor:
    """Llama 3.1's "llama3" rescaling of the rotary frequencies."""
    wavelengths = 2 * math.pi / frequencies
    low_freq_wavelength = scaling.original_max_seq_len / scaling.low_freq_factor
    high_freq_wavelength = scaling.original_max_seq_len / scaling.high_freq_factor
    smooth = ((scaling.original_max_seq_len / wavelengths - scaling.low_freq_factor)
              / (scaling.high_freq_factor - scaling.low_freq_factor))
    interpolated = (1 - smooth) * frequencies / scaling.factor + smooth * frequencies
    return torch.where(wavelengths > low_freq_wavelength, frequencies / scaling.factor,
                       torch.where(wavelengths < high_freq_wavelength, frequencies,
                                   interpolated))


def rope_tables(head_dim: int, max_positions: int, theta: float,
                scaling: RopeScaling | None = None,
                device: torch.device | str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Cosines and sines of the rotary angles: float32 [max_positions, head_dim // 2] each."""
    exponents = torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim
    frequencies = 1.0 / (theta ** exponents)
    if scaling is not None:
        frequencies = _scaled_frequencies(frequencies, scaling)
    positions = torch.arange(max_positions, device=device, dtype=torch.float32)
    angles = torch.outer(positions, frequencies)
    return torch.cos(angles), torch.sin(angles)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate adjacent pairs of ``x`` [B, T, H, Dh] by angles already gathered at its positions.

    ``cos``/``sin`` are [B or 1, T, Dh // 2]; the rotation runs in float32 and the result has
    ``x``'s dtype.
    """
    pairs = x.float().unflatten(-1, (-1, 2))
    even, odd = pairs[..., 0], pairs[..., 1]
    cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return rotated.flatten(-2).type_as(x)


class Attention(nn.Module):
    """Causal multi-head attention with grouped-query K/V heads and rotary positions."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.n_heads = config.n_heads
        self.n_kv_heads = config.n_kv_heads
        self.head_dim = config.head_dim
        self.wq = nn.Linear(config.dim, config.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(config.dim, config.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(config.dim, config.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(config.n_heads * self.head_dim, config.dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, seq_len, _ = x.shape
        q = self.wq(x).view(batch, seq_len, self.n_heads, self.head_dim)
        k = self.wk(x).view(batch, seq_len, self.n_kv_heads, self.head_dim)
        v = self.wv(x).view(batch, seq_len, self.n_kv_heads, self.head_dim)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True,
            enable_gqa=self.n_kv_heads != self.n_heads)
        return self.wo(y.transpose(1, 2).reshape(batch, seq_len, -1))


class FeedForward(nn.Module):
    """SwiGLU: ``w2(silu(w1 x) * w3 x)``."""

    def __init__(self, dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    """Pre-norm attention and feed-forward, each with a residual connection."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(config.dim, config.norm_eps)
        self.attention = Attention(config)
        self.ffn_norm = RMSNorm(config.dim, config.norm_eps)
        self.feed_forward = FeedForward(config.dim, config.ffn_dim)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), cos, sin)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    """The decoder: token embedding, ``n_layers`` blocks, a final norm and the output projection.

    Build it on the meta device to count or plan, then ``to_empty`` and ``init_weights`` to run
    (the rotary tables are non-persistent float32 buffers that ``init_weights`` fills).
    """

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.config = config
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.dim)
        self.layers = nn.ModuleList(TransformerBlock(config) for _ in range(config.n_layers))
        self.norm = RMSNorm(config.dim, config.norm_eps)
        self.output = nn.Linear(config.dim, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.output.weight = self.tok_embeddings.weight
        cos, sin = self._rope_tables(self.tok_embeddings.weight.device)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        if not self.tok_embeddings.weight.is_meta:
            self.init_weights()

    def _rope_tables(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        config = self.config
        return rope_tables(config.head_dim, config.max_seq_len, config.rope_theta,
                           config.rope_scaling, device=device)

    @torch.no_grad()
    def init_weights(self) -> None:
        """Random weights (normal, std 0.02; residual outputs scaled by depth) and the RoPE tables.

        The weights only have to be a sane model's: the benchmarks measure speed, and a loss
        that diverges into inf or NaN would run other kernels.
        """
        self.rope_cos, self.rope_sin = self._rope_tables(self.rope_cos.device)
        nn.init.normal_(self.tok_embeddings.weight, std=0.02)
        residual_std = 0.02 / math.sqrt(2 * self.config.n_layers)
        # The blocks wherever a wrapper (checkpointing, torch.compile) has put them.
        for block in (module for module in self.modules()
                      if isinstance(module, TransformerBlock)):
            for linear in (block.attention.wq, block.attention.wk, block.attention.wv,
                           block.feed_forward.w1, block.feed_forward.w3):
                nn.init.normal_(linear.weight, std=0.02)
            nn.init.normal_(block.attention.wo.weight, std=residual_std)
            nn.init.normal_(block.feed_forward.w2.weight, std=residual_std)
            block.attention_norm.reset_parameters()
            block.ffn_norm.reset_parameters()
        self.norm.reset_parameters()
        if not self.config.tie_embeddings:
            nn.init.normal_(self.output.weight, std=0.02)

    def _apply(self, fn, recurse=True):
        # ``model.to(torch.bfloat16)`` would round the rotary angles' cosines to bf16; they
        # stay float32 (recomputed, since a cast back could not restore the digits).
        super()._apply(fn, recurse)
        if self.rope_cos.dtype != torch.float32 and not self.rope_cos.is_meta:
            self.rope_cos, self.rope_sin = self._rope_tables(self.rope_cos.device)
        return self

    def hidden_states(self, tokens: torch.Tensor) -> torch.Tensor:
        """The final norm's output [B, T, dim] at positions 0..T-1 (the loss projects it)."""
        seq_len = tokens.shape[1]
        check_context(seq_len, self.config.max_seq_len)
        cos, sin = self.rope_cos[None, :seq_len], self.rope_sin[None, :seq_len]
        h = self.tok_embeddings(tokens)
        for block in self.layers:
            h = block(h, cos, sin)
        return self.norm(h)

    def head_loss(self, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Next-token cross-entropy of the final hidden states (objectives.py)."""
        return vocab_cross_entropy(hidden, self.output.weight, labels)

    def loss(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The training loss of ``tokens`` [B, T] against ``labels`` [B, T]."""
        return self.head_loss(self.hidden_states(tokens), labels)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits [B, T, vocab] of ``tokens`` [B, T] (long) at positions 0..T-1."""
        return self.output(self.hidden_states(tokens))


_TITLES = {"llama3_debug": "Llama 3 debug", "llama3_1b": "Llama 3.2 1B",
           "llama3_3b": "Llama 3.2 3B", "llama3_8b": "Llama 3.1 8B",
           "llama3_70b": "Llama 3.1 70B"}


# Sequence 8192 by default: Llama 3's pretraining context, torchtitan's training default.
register_sequence_models(
    FLAVORS, _TITLES, Transformer, "causal_lm",
    default_seq_len=lambda config: min(config.max_seq_len, 8192 if config.dim > 64 else 128),
    flops_per_token=training_flops_per_token, num_params=num_params)
