"""Layer normalisations: PyTorch's and the R-Transformer code's.

``torch``: :class:`torch.nn.LayerNorm`, ``g ⊙ (x - μ) / √(σ²_biased + 1e-5) + b``.
``rt``: the R-Transformer code's ``LayerNorm`` (``models/RTransformer.py``),
``g ⊙ (x - μ) / (σ_unbiased + 1e-6) + b``: the *unbiased* standard deviation, with ε added
to the deviation rather than the variance. At d 128 the two differ by up to ~6e-2.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

from ..errors import unknown_choice


class RTLayerNorm(nn.LayerNorm):
    """The R-Transformer code's LayerNorm; ``weight``/``bias`` as in :class:`nn.LayerNorm`.

    A subclass, so code that treats LayerNorm parameters specially (initialisation, weight
    decay groups) treats these the same way.
    """

    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super().__init__(d_model, eps=eps)

    def forward(self, x: Tensor) -> Tensor:
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)  # unbiased (n - 1), as torch.Tensor.std in the RT code
        return self.weight * (x - mean) / (std + self.eps) + self.bias


#: ``model.layer_norm`` name -> factory ``(d_model) -> module``.
NORMS: dict[str, Callable[[int], nn.Module]] = {
    "torch": nn.LayerNorm,
    "rt": RTLayerNorm,
}


def build_norm(kind: str, d_model: int) -> nn.Module:
    """A fresh LayerNorm of the named kind (see :data:`NORMS`)."""
    if kind not in NORMS:
        raise unknown_choice("layer norm", kind, NORMS)
    return NORMS[kind](d_model)
