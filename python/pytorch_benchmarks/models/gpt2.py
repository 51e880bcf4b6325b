"""GPT-2 (Radford et al. 2019): 124M, 355M (medium), 1.5B (XL) and a tiny debug flavour.

The published architecture: learned positions (1024), pre-LayerNorm blocks (eps 1e-5),
one fused QKV projection with biases, causal attention through
``F.scaled_dot_product_attention``, a 4x MLP with GELU (tanh approximation), dropout 0.1,
a final LayerNorm and the output projection tied to the token embedding (vocabulary 50257,
unpadded as published). Trained as a causal language model; FLOPs as for Llama
(docs/transformers.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .layers import FusedSelfAttention, check_context, init_by_name
from .objectives import vocab_cross_entropy
from .registry import register_sequence_models


@dataclass(frozen=True)
class GPT2Config:
    """The published hyper-parameters of one GPT-2 size."""

    dim: int
    n_layers: int
    n_heads: int
    vocab_size: int = 50257
    max_seq_len: int = 1024
    norm_eps: float = 1e-5
    dropout: float = 0.1

    @property
    def head_dim(self) -> int:
        """The width of one attention head."""
        return self.dim // self.n_heads


#: OpenAI's released sizes (their hparams.json). The paper's table lists 117M, 345M and
#: 1542M; the released checkpoints hold 124M, 355M and 1558M parameters (counted here).
FLAVORS: dict[str, GPT2Config] = {
    "gpt2_debug": GPT2Config(dim=64, n_layers=2, n_heads=4, vocab_size=512, max_seq_len=256),
    "gpt2": GPT2Config(dim=768, n_layers=12, n_heads=12),
    "gpt2_medium": GPT2Config(dim=1024, n_layers=24, n_heads=16),
    "gpt2_xl": GPT2Config(dim=1600, n_layers=48, n_heads=25),
}
_TITLES = {"gpt2_debug": "GPT-2 debug", "gpt2": "GPT-2 124M", "gpt2_medium": "GPT-2 Medium",
           "gpt2_xl": "GPT-2 XL"}


def num_params(config: GPT2Config, include_embedding: bool = True) -> int:
    """Parameters of ``config``; without the embeddings, the tied output projection stays."""
    block = 12 * config.dim ** 2 + 13 * config.dim
    positions = config.max_seq_len * config.dim
    total = (config.n_layers * block + 2 * config.dim + config.vocab_size * config.dim
             + positions)
    return total if include_embedding else total - positions


def training_flops_per_token(config: GPT2Config, seq_len: int) -> float:
    """``6 N + 12 L H Dh S`` (llama.training_flops_per_token), N without the lookups."""
    attention = 12 * config.n_layers * config.n_heads * config.head_dim * seq_len
    return float(6 * num_params(config, include_embedding=False) + attention)


class Block(nn.Module):
    """Pre-LayerNorm attention and MLP, each with a residual connection."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(config.dim, eps=config.norm_eps)
        self.attention = FusedSelfAttention(config.dim, config.n_heads, config.dropout,
                                            causal=True)
        self.norm2 = nn.LayerNorm(config.dim, eps=config.norm_eps)
        self.fc = nn.Linear(config.dim, 4 * config.dim)
        self.proj = nn.Linear(4 * config.dim, config.dim)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.dropout(self.attention(self.norm1(x)))
        mlp = self.proj(F.gelu(self.fc(self.norm2(x)), approximate="tanh"))
        return x + self.dropout(mlp)


class GPT2(nn.Module):
    """Token and position embeddings, ``n_layers`` blocks, a final LayerNorm, tied output."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.config = config
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.dim)
        self.pos_embeddings = nn.Embedding(config.max_seq_len, config.dim)
        self.dropout = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = nn.LayerNorm(config.dim, eps=config.norm_eps)
        if not self.tok_embeddings.weight.is_meta:
            self.init_weights()

    def init_weights(self) -> None:
        """GPT-2's: normal std 0.02, residual projections 0.02 / sqrt(2 L), zero biases."""
        init_by_name(self, 0.02, residual_std=0.02 / math.sqrt(2 * self.config.n_layers))

    def hidden_states(self, tokens: torch.Tensor) -> torch.Tensor:
        """The final LayerNorm's output [B, T, dim]."""
        seq_len = tokens.shape[1]
        check_context(seq_len, self.config.max_seq_len)
        positions = torch.arange(seq_len, device=tokens.device)
        h = self.dropout(self.tok_embeddings(tokens) + self.pos_embeddings(positions))
        for block in self.layers:
            h = block(h)
        return self.norm(h)

    def head_loss(self, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Next-token cross-entropy through the tied output projection."""
        return vocab_cross_entropy(hidden, self.tok_embeddings.weight, labels)

    def loss(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The training loss of ``tokens`` [B, T] against ``labels`` [B, T]."""
        return self.head_loss(self.hidden_states(tokens), labels)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits [B, T, vocab]."""
        return F.linear(self.hidden_states(tokens), self.tok_embeddings.weight)


register_sequence_models(
    FLAVORS, _TITLES, GPT2, "causal_lm",
    default_seq_len=lambda config: min(config.max_seq_len, 1024 if config.dim > 64 else 128),
    flops_per_token=training_flops_per_token, num_params=num_params)
