"""BERT (Devlin et al. 2018) with its pretraining heads: base, large and a tiny debug flavour.

The published encoder: word, position (512) and segment embeddings summed and
LayerNorm-ed (eps 1e-12), post-LayerNorm blocks of bidirectional attention (through
``F.scaled_dot_product_attention``, no mask: synthetic sequences have no padding) and a 4x
feed-forward with GELU, dropout 0.1, the pooler; and the pretraining heads: masked-LM
(a dense + GELU + LayerNorm transform, then the decoder tied to the word embeddings, with its
own bias) over the masked positions only (20 of 128, 80 of 512, as BERT's published runs and
MLPerf's BERT predict them), and next-sentence prediction from the pooled first token.
Q, K and V are one fused projection (the same weights as three; one matmul).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .layers import FusedSelfAttention, check_context, init_by_name
from .objectives import masked_predictions, vocab_cross_entropy
from .registry import register_sequence_models


@dataclass(frozen=True)
class BertConfig:
    """The published hyper-parameters of one BERT size."""

    dim: int
    n_layers: int
    n_heads: int
    ffn_dim: int
    vocab_size: int = 30522
    max_seq_len: int = 512
    type_vocab_size: int = 2
    norm_eps: float = 1e-12
    dropout: float = 0.1

    @property
    def head_dim(self) -> int:
        """The width of one attention head."""
        return self.dim // self.n_heads


#: Google's released configs (bert_config.json of BERT-Base and BERT-Large, uncased).
FLAVORS: dict[str, BertConfig] = {
    "bert_debug": BertConfig(dim=64, n_layers=2, n_heads=4, ffn_dim=256, vocab_size=512,
                             max_seq_len=256),
    "bert_base": BertConfig(dim=768, n_layers=12, n_heads=12, ffn_dim=3072),
    "bert_large": BertConfig(dim=1024, n_layers=24, n_heads=16, ffn_dim=4096),
}
_TITLES = {"bert_debug": "BERT debug", "bert_base": "BERT-Base", "bert_large": "BERT-Large"}


def encoder_params(config: BertConfig, include_embedding: bool = True) -> int:
    """The encoder with its pooler (the 110M / 340M the paper quotes)."""
    d = config.dim
    block = 4 * (d * d + d) + 2 * (d * config.ffn_dim) + config.ffn_dim + d + 4 * d
    embeddings = (config.vocab_size + config.max_seq_len + config.type_vocab_size) * d
    total = config.n_layers * block + 2 * d + (d * d + d)  # embedding LayerNorm, pooler
    return total + embeddings if include_embedding else total


def head_params(config: BertConfig) -> int:
    """The pretraining heads: the MLM transform, LayerNorm and decoder bias; NSP."""
    d = config.dim
    return (d * d + d) + 2 * d + config.vocab_size + (2 * d + 2)


def num_params(config: BertConfig) -> int:
    """The pretraining model's parameters (the decoder weight is the word embedding's)."""
    return encoder_params(config) + head_params(config)


def training_flops_per_token(config: BertConfig, seq_len: int) -> float:
    """``6 N + 12 L H Dh S`` over the encoder, plus the heads where they run.

    N: the encoder's blocks (no embedding lookups). The masked-LM head runs at the masked
    positions only (``masked_predictions(S)`` of S), the pooler and NSP at one position.
    """
    d, vocab = config.dim, config.vocab_size
    attention = 12 * config.n_layers * config.n_heads * config.head_dim * seq_len
    mlm = (d * d + d) + 2 * d + vocab * d + vocab
    pooler_nsp = (d * d + d) + (2 * d + 2)
    per_sequence = 6 * (mlm * masked_predictions(seq_len) + pooler_nsp)
    blocks = encoder_params(config, include_embedding=False) - (d * d + d) - 2 * d
    return float(6 * blocks + attention) + per_sequence / seq_len


class EncoderBlock(nn.Module):
    """Attention and feed-forward, each followed by dropout, the residual and a LayerNorm."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.attention = FusedSelfAttention(config.dim, config.n_heads, config.dropout,
                                            causal=False)
        self.attention_norm = nn.LayerNorm(config.dim, eps=config.norm_eps)
        self.up = nn.Linear(config.dim, config.ffn_dim)
        self.down = nn.Linear(config.ffn_dim, config.dim)
        self.ffn_norm = nn.LayerNorm(config.dim, eps=config.norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.attention_norm(x + self.dropout(self.attention(x)))
        return self.ffn_norm(x + self.dropout(self.down(F.gelu(self.up(x)))))


class Bert(nn.Module):
    """The encoder and its pretraining heads (masked LM and next-sentence prediction)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.dim)
        self.pos_embeddings = nn.Embedding(config.max_seq_len, config.dim)
        self.type_embeddings = nn.Embedding(config.type_vocab_size, config.dim)
        self.embedding_norm = nn.LayerNorm(config.dim, eps=config.norm_eps)
        self.dropout = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(EncoderBlock(config) for _ in range(config.n_layers))
        self.pooler = nn.Linear(config.dim, config.dim)
        self.mlm_transform = nn.Linear(config.dim, config.dim)
        self.mlm_norm = nn.LayerNorm(config.dim, eps=config.norm_eps)
        self.mlm_bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.nsp = nn.Linear(config.dim, 2)
        if not self.tok_embeddings.weight.is_meta:
            self.init_weights()

    def init_weights(self) -> None:
        """BERT's: truncated normal std 0.02, zero biases, unit LayerNorm weights."""
        init_by_name(self, 0.02, truncated=True)

    def hidden_states(self, tokens: torch.Tensor,
                      token_types: torch.Tensor | None = None) -> torch.Tensor:
        """The last block's output [B, T, dim] (segment 0 where ``token_types`` is None)."""
        seq_len = tokens.shape[1]
        check_context(seq_len, self.config.max_seq_len)
        positions = torch.arange(seq_len, device=tokens.device)
        types = self.type_embeddings.weight[0] if token_types is None else \
            self.type_embeddings(token_types)
        h = self.tok_embeddings(tokens) + self.pos_embeddings(positions) + types
        h = self.dropout(self.embedding_norm(h))
        for block in self.layers:
            h = block(h)
        return h

    def _mlm_hidden(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.mlm_norm(F.gelu(self.mlm_transform(hidden)))

    def head_loss(self, hidden: torch.Tensor,
                  targets: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """Masked-LM plus next-sentence loss.

        ``targets``: masked positions [B, M], their token ids [B, M], next-sentence labels
        [B].
        """
        positions, masked_ids, next_sentence = targets
        masked = hidden.gather(1, positions.unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))
        mlm = vocab_cross_entropy(self._mlm_hidden(masked), self.tok_embeddings.weight,
                                  masked_ids, self.mlm_bias)
        pooled = torch.tanh(self.pooler(hidden[:, 0]))
        return mlm + F.cross_entropy(self.nsp(pooled).float(), next_sentence)

    def loss(self, tokens: torch.Tensor,
             targets: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """The pretraining loss of ``tokens`` [B, T] (``head_loss`` for the targets)."""
        return self.head_loss(self.hidden_states(tokens), targets)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Masked-LM logits [B, T, vocab] at every position."""
        return F.linear(self._mlm_hidden(self.hidden_states(tokens)), self.tok_embeddings.weight,
                        self.mlm_bias)


register_sequence_models(FLAVORS, _TITLES, Bert, "masked_lm",
                         default_seq_len=lambda config: 128,
                         flops_per_token=training_flops_per_token, num_params=num_params)
