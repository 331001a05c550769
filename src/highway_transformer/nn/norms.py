"""Layer normalisations: PyTorch's, the R-Transformer code's and RMSNorm.

``torch``: :class:`torch.nn.LayerNorm`, ``g ⊙ (x - μ) / √(σ²_biased + 1e-5) + b``.
``rt``: the R-Transformer code's ``LayerNorm`` (``models/RTransformer.py``),
``g ⊙ (x - μ) / (σ_unbiased + 1e-6) + b``: the *unbiased* standard deviation, with ε added
to the deviation rather than the variance. At d 128 the two differ by up to ~6e-2.
``rmsnorm``: :class:`torch.nn.RMSNorm` (Zhang & Sennrich 2019; Llama, Qwen3),
``g ⊙ x / √(mean(x²) + 1e-6)``: no centring and no bias, ε 1e-6 as Llama's and Qwen3's.
With ``bias=False`` (``model.bias=false``) the two LayerNorms have no ``b`` either.
Oracles: :func:`.reference.layer_norm`, :func:`.reference.rt_layer_norm`,
:func:`.reference.rms_norm`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from ..errors import unknown_choice


class RTLayerNorm(nn.LayerNorm):
    """The R-Transformer code's LayerNorm; ``weight``/``bias`` as in :class:`nn.LayerNorm`.

    A subclass, so code that treats LayerNorm parameters specially (initialisation, weight
    decay groups) treats these the same way.
    """

    def __init__(self, d_model: int, eps: float = 1e-6, bias: bool = True) -> None:
        super().__init__(d_model, eps=eps, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        return _RTNormalise.apply(x, self.weight, self.bias, self.eps)


class _RTNormalise(torch.autograd.Function):
    """``g ⊙ c / (s + ε) + b`` with ``c = x − mean(x)``, ``s = √(Σc² / (n − 1))``, and its
    backward written out: autograd's graph of the formula keeps and walks about ten
    row-sized temporaries (forward and backward at HT Table 2's `cpu` size: 5.7 ms through
    autograd, 2.0 ms here).

    With ``r = 1 / (s + ε)`` and ``u = g ⊙ dy``:
    ``dx = r (u − mean(u)) − r² Σ(u ⊙ c) / ((n − 1) s) · c`` (the mean of the second term is
    0, as Σc = 0). A constant row (``s = 0``) gets no gradient through ``s``, where autograd's
    ``std`` would give NaN."""

    @staticmethod
    def forward(
        ctx: torch.autograd.function.FunctionCtx, x: Tensor, weight: Tensor,
        bias: Tensor | None, eps: float,
    ) -> Tensor:  # fmt: skip
        centred = x - x.mean(-1, keepdim=True)
        std = centred.square().sum(-1, keepdim=True).div_(max(x.shape[-1] - 1, 1)).sqrt_()
        inverse = (std + eps).reciprocal_()
        normalised = centred * inverse
        ctx.save_for_backward(normalised, std, inverse, weight)
        ctx.has_bias = bias is not None
        return normalised * weight if bias is None else torch.addcmul(bias, normalised, weight)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: Tensor) -> tuple:
        normalised, std, inverse, weight = ctx.saved_tensors
        rows = grad.reshape(-1, grad.shape[-1])
        grad_weight = (rows * normalised.reshape(rows.shape)).sum(0)
        grad_bias = rows.sum(0) if ctx.has_bias else None
        u = grad * weight
        # r² Σ(u ⊙ c) c / ((n − 1) s) = Σ(u ⊙ x̂) x̂ / ((n − 1) s), with x̂ = c r (saved)
        through_std = (u * normalised).sum(-1, keepdim=True)
        scale = std * max(grad.shape[-1] - 1, 1)
        through_std = torch.where(std > 0, through_std / scale, torch.zeros_like(through_std))
        grad_x = (u - u.mean(-1, keepdim=True)).mul_(inverse)
        grad_x.addcmul_(through_std, normalised, value=-1.0)
        return grad_x, grad_weight, grad_bias, None


#: RMSNorm's ε: Llama's and Qwen3's ``rms_norm_eps`` (torch's own default is the dtype's
#: machine epsilon, which would make a float64 model another model).
RMS_EPS = 1e-6


def _layer_norm(d_model: int, bias: bool) -> nn.Module:
    return nn.LayerNorm(d_model, bias=bias)


def _rt_layer_norm(d_model: int, bias: bool) -> nn.Module:
    return RTLayerNorm(d_model, bias=bias)


def _rms_norm(d_model: int, bias: bool) -> nn.Module:
    return nn.RMSNorm(d_model, eps=RMS_EPS)  # no bias to remove


#: ``model.layer_norm`` name -> factory ``(d_model, bias) -> module``.
NORMS: dict[str, Callable[[int, bool], nn.Module]] = {
    "torch": _layer_norm,
    "rt": _rt_layer_norm,
    "rmsnorm": _rms_norm,
}


def build_norm(kind: str, d_model: int, bias: bool = True) -> nn.Module:
    """A fresh normalisation of the named kind (see :data:`NORMS`); ``bias`` False: no ``b``."""
    if kind not in NORMS:
        raise unknown_choice("layer norm", kind, NORMS)
    return NORMS[kind](d_model, bias)
