"""Transformers over token ids (BERT, GPT-2, Llama): their batches, and the model as trained.

The model is built on the meta device and made in place where it runs (no full copy on
the host: 32 GB for Llama 3 8B in float32), with, in this order (torchtitan's):
activation checkpointing of each block (``none``, ``selective``: matmul and attention
outputs kept, the rest recomputed; ``full``: only each block's input kept), torch.compile
of each block and of the loss head (one graph each, reused by every block), then FSDP2
(``fully_shard`` per block and at the root, bfloat16 or float16 compute with float32
gradient reduction) or, after materialising, DDP. One replica and DDP run the half dtypes
under autocast over float32 weights; FSDP2 casts the weights itself
(docs/transformers.md).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn

from .errors import UserError
from .models import ModelSpec
from .models.objectives import masked_predictions

CHECKPOINTING = ("none", "selective", "full")
DATA_PARALLEL = ("fsdp", "ddp")


def sequence_length(spec: ModelSpec, requested: int) -> int:
    """The run's sequence length: ``requested`` (0: the model's default), within its context."""
    assert spec.sequence is not None
    seq_len = requested or spec.sequence.default_seq_len
    if seq_len > spec.sequence.max_seq_len:
        raise UserError(f"--seq_len {seq_len}: {spec.model_id} takes at most "
                        f"{spec.sequence.max_seq_len} tokens (its published context)")
    return seq_len


class TokenSource:
    """One synthetic batch of token ids and training targets, made once on the device.

    Causal LMs: random ids and the next id of each as its target. Masked LMs: random ids,
    ``masked_predictions(seq_len)`` distinct masked positions per sequence, their original
    ids and a next-sentence label.
    """

    from_host = False

    def __init__(self, spec: ModelSpec, batch_size: int, seq_len: int,
                 device: torch.device) -> None:
        assert spec.sequence is not None
        generator = torch.Generator().manual_seed(0)
        vocab = spec.sequence.vocab_size
        tokens = torch.randint(0, vocab, (batch_size, seq_len + 1), generator=generator)
        self.inputs = tokens[:, :-1].contiguous().to(device)
        if spec.sequence.objective == "causal_lm":
            self.labels: Any = tokens[:, 1:].contiguous().to(device)
            return
        predicted = masked_predictions(seq_len)
        order = torch.rand((batch_size, seq_len), generator=generator).argsort(dim=1)
        positions = order[:, :predicted].sort(dim=1).values
        next_sentence = torch.randint(0, 2, (batch_size,), generator=generator)
        self.labels = (positions.to(device), tokens.gather(1, positions).to(device),
                       next_sentence.to(device))

    def next(self) -> tuple[torch.Tensor, Any]:
        """The batch: token ids [B, T] and the objective's targets."""
        return self.inputs, self.labels

    def close(self) -> None:
        """Nothing runs in the background."""


class SequenceLoss(nn.Module):
    """The unit a training step calls: (tokens, targets) -> the model's loss.

    The root of FSDP2's sharding: its group holds what no block holds (embeddings, final
    norm, heads), gathered for its forward.
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens: torch.Tensor, targets: Any) -> torch.Tensor:
        return self.model.loss(tokens, targets)


def _saved_in_selective() -> frozenset:
    """The operators whose outputs selective checkpointing keeps: matmuls and attention."""
    aten = torch.ops.aten
    names = ("mm", "addmm", "bmm", "_scaled_dot_product_flash_attention",
             "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
             "_scaled_dot_product_flash_attention_for_cpu")
    return frozenset(getattr(aten, name).default for name in names if hasattr(aten, name))


def _selective_context() -> tuple[contextlib.AbstractContextManager,
                                  contextlib.AbstractContextManager]:
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    saved = _saved_in_selective()

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if op in saved else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


class CheckpointedBlock(nn.Module):
    """A block whose activations are recomputed in backward (all, or all but the saved ops)."""

    def __init__(self, block: nn.Module, selective: bool) -> None:
        super().__init__()
        self.block = block
        self.selective = selective

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        from torch.utils.checkpoint import checkpoint

        extra = {"context_fn": _selective_context} if self.selective else {}
        return checkpoint(self.block, *args, use_reentrant=False, **extra)


def _replace_blocks(layers: nn.ModuleList, wrap: Callable[[nn.Module], nn.Module]) -> None:
    for index, block in enumerate(layers):
        layers.register_module(str(index), wrap(block))


def apply_checkpointing(model: nn.Module, mode: str) -> None:
    """Wrap each block of ``model.layers`` for ``mode`` (CHECKPOINTING)."""
    if mode != "none":
        _replace_blocks(model.layers,
                        functools.partial(CheckpointedBlock, selective=mode == "selective"))


def apply_compile(model: nn.Module, options: dict[str, Any]) -> None:
    """torch.compile each block (one graph, reused by all) and the loss head.

    The head's graph holds the output projection and the cross-entropy, so the logits are
    read once in the compute dtype (models/objectives.py).
    """
    _replace_blocks(model.layers, lambda block: torch.compile(block, fullgraph=True,
                                                              options=options))
    model.head_loss = torch.compile(model.head_loss, options=options)


def apply_fsdp(root: SequenceLoss, dtype: torch.dtype) -> None:
    """FSDP2 over the default mesh (every rank): each block, then the root.

    Half dtypes compute in that dtype and reduce gradients in float32; the last block stays
    gathered after forward (backward needs it at once).
    """
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy() if dtype == torch.float32 else \
        MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
    layers = root.model.layers
    for index, block in enumerate(layers):
        fully_shard(block, mp_policy=policy, reshard_after_forward=index < len(layers) - 1)
    fully_shard(root, mp_policy=policy)


def materialise(root: nn.Module, device: torch.device) -> None:
    """Allocate the meta model's tensors on ``device`` (sharded, if it is) and initialise them."""
    torch.manual_seed(0)
    root.to_empty(device=device)
    model = root.model if isinstance(root, SequenceLoss) else root
    model.init_weights()


def build_training_module(spec: ModelSpec, device: torch.device, dtype: torch.dtype,
                          checkpointing: str, compile_options: dict[str, Any] | None,
                          data_parallel: str | None) -> SequenceLoss:
    """The model as trained: checkpointed, compiled, sharded as asked, on ``device``.

    ``compile_options``: None for eager; ``data_parallel``: ``fsdp`` shards it here, ``ddp``
    and None leave it whole (the runner wraps DDP).
    """
    with torch.device("meta"):
        model = spec.build()
    apply_checkpointing(model, checkpointing)
    if compile_options is not None:
        apply_compile(model, compile_options)
    root = SequenceLoss(model)
    if data_parallel == "fsdp":
        apply_fsdp(root, dtype)
    materialise(root, device)
    root.train()
    return root


def build_inference_model(spec: ModelSpec, device: torch.device, dtype: torch.dtype,
                          compile_options: dict[str, Any] | None) -> nn.Module:
    """The model in ``dtype``, in eval mode without gradients: tokens -> logits."""
    with torch.device("meta"):
        model = spec.build()
    materialise(model, device)
    model = model.to(dtype).eval().requires_grad_(False)
    if compile_options is not None:
        _replace_blocks(model.layers, lambda block: torch.compile(block, fullgraph=True,
                                                                  options=compile_options))
    return model


def sequence_results(spec: ModelSpec, seq_len: int, training: bool, throughput: float,
                     replicas: int, on_gpu: bool) -> dict[str, Any]:
    """Tokens per second and the FLOPs of the formula (docs/transformers.md)."""
    assert spec.sequence is not None
    per_token = spec.sequence.flops_per_token(seq_len)
    forward = per_token / 3  # the formula's forward: 2 N + 4 L H Dh S
    tokens_per_second = throughput * seq_len
    results: dict[str, Any] = {
        "results.seq_len": seq_len,
        "results.tokens_per_second": tokens_per_second,
        "results.flops_per_token": per_token if training else forward,
        "results.flops_forward_per_sample": forward * seq_len,
        "results.flops_per_sample": (per_token if training else forward) * seq_len,
        "results.flops_method": "formula: 6 N + 12 L H Dh S per token (docs/transformers.md)",
        "results.num_params": spec.sequence.num_params,
    }
    if on_gpu:
        results["results.tokens_per_second_per_gpu"] = tokens_per_second / replicas
    return results
