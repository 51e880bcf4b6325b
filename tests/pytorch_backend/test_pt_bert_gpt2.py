"""BERT and GPT-2 (models/bert.py, models/gpt2.py): published sizes, FLOPs, the registry."""

from __future__ import annotations

import pytest
import torch
from pytorch_benchmarks.models import bert, get_model_spec, gpt2, llama
from pytorch_benchmarks.models.objectives import masked_predictions
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

pytestmark = pytest.mark.pytorch

#: Google's BERT: the encoder with its pooler (the paper's 110M and 340M) and the
#: pretraining model with both heads; OpenAI's released GPT-2 checkpoints.
BERT_COUNTS = {"bert_base": (109_482_240, 110_106_428),
               "bert_large": (335_141_888, 336_226_108)}
GPT2_COUNTS = {"gpt2": 124_439_808, "gpt2_medium": 354_823_168, "gpt2_xl": 1_557_611_200}


@pytest.mark.parametrize("flavor", sorted(BERT_COUNTS))
def test_bert_parameter_counts(flavor):
    encoder, pretraining = BERT_COUNTS[flavor]
    config = bert.FLAVORS[flavor]
    with torch.device("meta"):
        model = bert.Bert(config)
    assert sum(p.numel() for p in model.parameters()) == pretraining == bert.num_params(config)
    assert bert.encoder_params(config) == encoder
    assert round(encoder, -7) == {"bert_base": 110e6, "bert_large": 340e6}[flavor]


@pytest.mark.parametrize("flavor", sorted(GPT2_COUNTS))
def test_gpt2_parameter_counts(flavor):
    config = gpt2.FLAVORS[flavor]
    with torch.device("meta"):
        model = gpt2.GPT2(config)
    assert sum(p.numel() for p in model.parameters()) == GPT2_COUNTS[flavor] == \
        gpt2.num_params(config)


def _bert_targets(config, batch, seq_len):
    predicted = masked_predictions(seq_len)
    positions = torch.stack([torch.randperm(seq_len)[:predicted].sort().values
                             for _ in range(batch)])
    return (positions, torch.randint(0, config.vocab_size, (batch, predicted)),
            torch.randint(0, 2, (batch,)))


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_training_flops_match_torchs_flop_counter(family):
    module = {"bert": bert, "gpt2": gpt2}[family]
    config = module.FLAVORS[f"{family}_debug"]
    torch.manual_seed(0)
    model = bert.Bert(config) if family == "bert" else gpt2.GPT2(config)
    tokens = torch.randint(0, config.vocab_size, (2, 128))
    targets = _bert_targets(config, 2, 128) if family == "bert" else tokens
    # The math backend: the counter has no formula for the CPU's fused attention kernel.
    with FlopCounterMode(display=False) as counter, sdpa_kernel(SDPBackend.MATH):
        model.loss(tokens, targets).backward()
    counted = counter.get_total_flops() / tokens.numel()
    assert module.training_flops_per_token(config, 128) == pytest.approx(counted, rel=0.05)


def test_bert_predicts_published_masked_counts():
    assert (masked_predictions(128), masked_predictions(512), masked_predictions(100)) == \
        (20, 80, 15)


def test_registry_describes_every_transformer():
    for module, objective in ((llama, "causal_lm"), (gpt2, "causal_lm"), (bert, "masked_lm")):
        for flavor, config in module.FLAVORS.items():
            spec = get_model_spec(flavor)
            assert spec.sequence is not None and spec.sequence.objective == objective
            assert spec.num_classes == spec.sequence.vocab_size == config.vocab_size
            assert spec.input_shape == (spec.sequence.default_seq_len,)
            assert spec.sequence.default_seq_len <= spec.sequence.max_seq_len
    assert get_model_spec("llama3_8b").sequence.default_seq_len == 8192
    assert get_model_spec("bert_large").sequence.default_seq_len == 128
    assert get_model_spec("resnet50").sequence is None


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_longer_than_the_context_is_refused(family):
    model = bert.Bert(bert.FLAVORS["bert_debug"]) if family == "bert" else \
        gpt2.GPT2(gpt2.FLAVORS["gpt2_debug"])
    with pytest.raises(ValueError, match="longer than the model's context, 256"):
        model(torch.zeros(1, 257, dtype=torch.long))
