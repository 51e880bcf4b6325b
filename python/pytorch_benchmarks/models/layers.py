"""Pieces the transformer families share (BERT and GPT-2 attention, initialisation, context)."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


def check_context(seq_len: int, max_seq_len: int) -> None:
    """A sequence longer than the model's published context is an error, said plainly."""
    if seq_len > max_seq_len:
        raise ValueError(f"sequence of {seq_len} tokens is longer than the model's context, "
                         f"{max_seq_len}")


class FusedSelfAttention(nn.Module):
    """Multi-head attention with one fused QKV projection and biases (BERT, GPT-2).

    Causal for a decoder, unmasked for an encoder (synthetic sequences have no padding);
    ``dropout`` on the attention weights in training, inside the SDPA kernel.
    """

    def __init__(self, dim: int, n_heads: int, dropout: float, causal: bool) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.dropout = dropout
        self.causal = causal
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq_len, dim = x.shape
        q, k, v = self.qkv(x).view(batch, seq_len, 3, self.n_heads, -1).unbind(2)
        y = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=self.causal,
            dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(batch, seq_len, dim))


@torch.no_grad()
def init_by_name(module: nn.Module, std: float, residual_std: float | None = None,
                 truncated: bool = False) -> None:
    """Zero biases, unit norm weights, normal(std) for the rest.

    ``residual_std`` for the projections into the residual stream (names ending in
    ``proj.weight``); ``truncated`` cuts the normal at two standard deviations (BERT's).
    Names are matched wherever a wrapper (checkpointing, torch.compile) put the module.
    """
    for name, parameter in module.named_parameters():
        if name.endswith("bias"):
            nn.init.zeros_(parameter)
        elif "norm" in name:
            nn.init.ones_(parameter)
        else:
            scale = residual_std if residual_std is not None and \
                name.endswith("proj.weight") else std
            if truncated:
                nn.init.trunc_normal_(parameter, std=scale, a=-2 * scale, b=2 * scale)
            else:
                nn.init.normal_(parameter, std=scale)
