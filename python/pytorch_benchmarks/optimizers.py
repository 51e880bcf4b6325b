"""The optimizers a training step can use: SGD, LARS and AdamW, each fused or foreach.

``sgd``: momentum 0.9 and weight decay 1e-4 on every parameter (the ImageNet recipe).
``lars``: layer-wise adaptive rate scaling (You et al. 2017) as MLPerf's ResNet-50 uses it:
convolution and linear weights get weight decay and a per-tensor trust ratio
eta x ||w|| / (||g|| + wd x ||w||); biases and batch-norm parameters get neither; then SGD
with momentum. LARS is SGD whose gradients are rescaled first, so both run on torch.optim's
SGD kernels.

``adamw``: decoupled weight decay Adam (Loshchilov & Hutter 2019) with the LLM recipe's
settings (Llama's and torchtitan's: betas 0.9 and 0.95, eps 1e-8, weight decay 0.1 on every
parameter); the default for transformers. Its states are float32 beside float32 weights:
16 bytes a parameter with the gradient (docs/transformers.md, memory).

``fused``: torch.optim's fused SGD or AdamW (one multi-tensor kernel for the update; with a
GradScaler it unscales and skips an overflowed step on the device, so the step never waits
for the host and can be captured in a CUDA graph). ``foreach``: torch.optim's multi-tensor
(foreach) SGD; with a GradScaler, ``scaler.step`` then reads the overflow flag on the host
every step.
"""

from __future__ import annotations

import torch
import torch.nn as nn

MOMENTUM = 0.9
WEIGHT_DECAY = 1e-4
LARS_ETA = 0.001
ADAMW_BETAS = (0.9, 0.95)
ADAMW_EPS = 1e-8
ADAMW_WEIGHT_DECAY = 0.1
OPTIMIZERS = ("sgd", "lars", "adamw")
IMPLEMENTATIONS = ("fused", "foreach")


class LARS(torch.optim.SGD):
    """SGD with momentum whose adapted groups' gradients get LARS's weight decay and trust ratio.

    Param groups with ``lars: True`` are adapted; their own ``weight_decay`` is 0 (LARS adds
    it before the trust ratio). Every operation is a device-side foreach op: no host sync,
    so a CUDA graph can capture the step. With a GradScaler and the fused kernel,
    ``scaler.step`` hands the scale in ``self.grad_scale``; the gradients are unscaled here
    first (the trust ratio needs true norms) and the kernel is told they are.
    """

    def __init__(self, groups: list[dict], lr: float, weight_decay: float, eta: float,
                 foreach: bool, fused: bool) -> None:
        super().__init__(groups, lr=lr, momentum=MOMENTUM, weight_decay=0.0,
                         foreach=foreach or None, fused=fused or None)
        self.lars_weight_decay = weight_decay
        self.eta = eta

    @torch.no_grad()
    def step(self, closure=None):  # type: ignore[override]
        """Rescale the adapted groups' gradients, then the SGD step."""
        scale = getattr(self, "grad_scale", None)
        if scale is not None:
            every = [p.grad for group in self.param_groups for p in group["params"]
                     if p.grad is not None]
            torch._foreach_div_(every, scale)
            self.grad_scale = None  # the kernel must not unscale again
        for group in self.param_groups:
            if group.get("lars"):
                self._adapt([p for p in group["params"] if p.grad is not None])
        return super().step(closure)

    def _adapt(self, params: list[torch.Tensor]) -> None:
        if not params:
            return
        grads = [p.grad for p in params]
        weight_norms = torch.stack(torch._foreach_norm(params))
        grad_norms = torch.stack(torch._foreach_norm(grads))
        torch._foreach_add_(grads, params, alpha=self.lars_weight_decay)
        trust = self.eta * weight_norms / (grad_norms + self.lars_weight_decay * weight_norms)
        trust = torch.where((weight_norms > 0) & (grad_norms > 0), trust,
                            torch.ones_like(trust))
        torch._foreach_mul_(grads, list(trust.unbind()))


def lars_groups(model: nn.Module) -> list[dict]:
    """Weights of convolutions and linear layers (adapted), everything else (not)."""
    adapted, plain = [], []
    for module in model.modules():
        for name, parameter in module.named_parameters(recurse=False):
            if not parameter.requires_grad:
                continue
            is_weight = name == "weight" and isinstance(module, nn.Conv2d | nn.Linear)
            (adapted if is_weight else plain).append(parameter)
    return [{"params": adapted, "lars": True}, {"params": plain, "lars": False}]


def make_optimizer(model: nn.Module, kind: str, implementation: str,
                   lr: float) -> torch.optim.Optimizer:
    """``kind`` sgd, lars or adamw, ``implementation`` fused or foreach (module docstring)."""
    fused, foreach = implementation == "fused", implementation == "foreach"
    if kind == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=lr, betas=ADAMW_BETAS, eps=ADAMW_EPS,
                                 weight_decay=ADAMW_WEIGHT_DECAY, foreach=foreach or None,
                                 fused=fused or None)
    if kind == "lars":
        return LARS(lars_groups(model), lr=lr, weight_decay=WEIGHT_DECAY, eta=LARS_ETA,
                    foreach=foreach, fused=fused)
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=MOMENTUM,
                           weight_decay=WEIGHT_DECAY, foreach=foreach or None,
                           fused=fused or None)
