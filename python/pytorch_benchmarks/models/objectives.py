"""Training objectives of the transformer families: the loss over the vocabulary.

The output projection and the cross-entropy are one function, so that a compiled head
(the backend compiles it with the blocks, docs/transformers.md) reads the logits once in
their compute dtype: inductor fuses the float32 upcast into the log-softmax, and backward
saves the logits and their log-sum-exp, not a float32 copy and a float32 log-softmax of
[tokens x vocabulary] (4.2 GB each for Llama 3 at sequence 8192). Eager, it runs as written.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

#: BERT's masking rate (Devlin et al. 2018): 15 % of the tokens are predicted.
MASKED_FRACTION = 0.15
#: max_predictions_per_seq of BERT's published pretraining runs, by sequence length.
_PUBLISHED_PREDICTIONS = {128: 20, 512: 80}


def vocab_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor,
                        bias: torch.Tensor | None = None) -> torch.Tensor:
    """Mean cross-entropy of ``hidden`` [..., dim] projected by ``weight`` [vocab, dim].

    ``labels`` has ``hidden``'s leading shape; -100 entries are ignored.
    """
    logits = F.linear(hidden, weight, bias)
    return F.cross_entropy(logits.flatten(0, -2).float(), labels.flatten(), ignore_index=-100)


def masked_predictions(seq_len: int) -> int:
    """Masked positions per sequence: BERT's published 20 (128) and 80 (512), else 15 %."""
    return _PUBLISHED_PREDICTIONS.get(seq_len, max(1, math.ceil(MASKED_FRACTION * seq_len)))
