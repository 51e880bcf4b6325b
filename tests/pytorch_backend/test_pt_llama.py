"""The Llama 3 decoders (pytorch_benchmarks/models/llama.py): published sizes, FLOPs, RoPE."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from pytorch_benchmarks.models.llama import (
    FLAVORS,
    RopeScaling,
    Transformer,
    apply_rope,
    num_params,
    rope_tables,
    training_flops_per_token,
)
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

pytestmark = pytest.mark.pytorch

#: Meta's model cards: Llama 3.2 1B 1.24 B, 3B 3.21 B; Llama 3.1 8B 8.03 B, 70B 70.6 B
#: (the exact counts of their checkpoints, tied output included once for the 3.2s).
PUBLISHED = {
    "llama3_1b": (1.24e9, 1_235_814_400),
    "llama3_3b": (3.21e9, 3_212_749_824),
    "llama3_8b": (8.03e9, 8_030_261_248),
    "llama3_70b": (70.6e9, 70_553_706_496),
}


@pytest.mark.parametrize("flavor", sorted(PUBLISHED))
def test_published_parameter_counts(flavor):
    rounded, exact = PUBLISHED[flavor]
    with torch.device("meta"):
        model = Transformer(FLAVORS[flavor])
    built = sum(p.numel() for p in model.parameters())  # a tied table is one parameter
    assert built == exact == num_params(FLAVORS[flavor])
    assert round(built / 1e9, 2 if built < 1e10 else 1) == pytest.approx(rounded / 1e9)


def test_llama3_8b_hyper_parameters():
    config = FLAVORS["llama3_8b"]
    assert (config.n_layers, config.dim, config.n_heads, config.n_kv_heads, config.ffn_dim,
            config.vocab_size, config.rope_theta, config.head_dim) == (
        32, 4096, 32, 8, 14336, 128256, 500000.0, 128)


def test_embedding_left_out_of_flops_unless_it_is_the_output():
    untied, tied = FLAVORS["llama3_8b"], FLAVORS["llama3_1b"]
    assert num_params(untied) - num_params(untied, include_embedding=False) == 128256 * 4096
    assert num_params(tied, include_embedding=False) == num_params(tied)


@pytest.mark.parametrize("seq_len", [64, 256])
def test_training_flops_match_torchs_flop_counter(seq_len):
    config = FLAVORS["llama3_debug"]
    torch.manual_seed(0)
    model = Transformer(config)
    tokens = torch.randint(0, config.vocab_size, (2, seq_len))
    # The math backend: the counter has no formula for the CPU's fused attention kernel; the
    # math one is matmuls it counts, at full length as the formula does.
    with FlopCounterMode(display=False) as counter, sdpa_kernel(SDPBackend.MATH):
        logits = model(tokens)
        F.cross_entropy(logits.flatten(0, 1), tokens.flatten()).backward()
    counted = counter.get_total_flops() / tokens.numel()
    assert training_flops_per_token(config, seq_len) == pytest.approx(counted, rel=0.05)


def test_8b_flops_per_token_at_8192():
    # 6 * 7.505 G non-embedding parameters + 12 * 32 * 32 * 128 * 8192.
    assert training_flops_per_token(FLAVORS["llama3_8b"], 8192) == pytest.approx(57.91e9,
                                                                                rel=1e-3)


def test_rope_depends_on_relative_position_only():
    cos, sin = rope_tables(16, 64, theta=500000.0, scaling=RopeScaling(factor=8.0))
    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 1, 16), torch.randn(1, 1, 1, 16)

    def score(m: int, n: int) -> float:
        rotated_q = apply_rope(q, cos[None, m:m + 1], sin[None, m:m + 1])
        rotated_k = apply_rope(k, cos[None, n:n + 1], sin[None, n:n + 1])
        return float((rotated_q * rotated_k).sum())

    assert score(10, 3) == pytest.approx(score(50, 43), rel=1e-4)
    assert score(10, 3) != pytest.approx(score(10, 4), rel=1e-4)
    assert apply_rope(q, cos[None, 5:6], sin[None, 5:6]).norm() == pytest.approx(q.norm())


def test_llama3_rope_scaling_keeps_high_and_divides_low_frequencies():
    # At position 1 the angle is the frequency (sines: exact for the small ones too).
    _, plain_sin = rope_tables(128, 2, theta=500000.0)
    _, scaled_sin = rope_tables(128, 2, theta=500000.0, scaling=RopeScaling(factor=8.0))
    plain, scaled = torch.asin(plain_sin[1]).tolist(), torch.asin(scaled_sin[1]).tolist()
    assert scaled[0] == pytest.approx(plain[0])  # wavelength 2 pi: kept
    assert scaled[-1] == pytest.approx(plain[-1] / 8, rel=1e-4)  # the longest: divided


def test_debug_flavor_trains_and_keeps_float32_rope_in_bfloat16():
    config = FLAVORS["llama3_debug"]
    assert (config.n_layers, config.dim) == (2, 64)
    torch.manual_seed(0)
    model = Transformer(config).to(torch.bfloat16)
    assert model.rope_cos.dtype == torch.float32
    tokens = torch.randint(0, config.vocab_size, (2, 16))
    logits = model(tokens)
    assert logits.shape == (2, 16, config.vocab_size) and logits.dtype == torch.bfloat16
    F.cross_entropy(logits.flatten(0, 1).float(), tokens.flatten()).backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_meta_model_materialises_with_to_empty_and_init_weights():
    config = FLAVORS["llama3_debug"]
    with torch.device("meta"):
        model = Transformer(config)
    model.to_empty(device="cpu")
    model.init_weights()
    reference_cos, _ = rope_tables(config.head_dim, config.max_seq_len, config.rope_theta)
    assert torch.equal(model.rope_cos, reference_cos)
    assert torch.isfinite(model(torch.zeros(1, 8, dtype=torch.long))).all()


def test_sequence_longer_than_the_context_is_refused():
    config = FLAVORS["llama3_debug"]
    model = Transformer(config)
    with pytest.raises(ValueError, match="longer than the model's context, 512"):
        model(torch.zeros(1, config.max_seq_len + 1, dtype=torch.long))
