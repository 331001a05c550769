"""The Highway Transformer's gates (Chai et al., ACL 2020, §3): SDU, highway, gated MHDPA.

Each is a :class:`~highway_transformer.nn.combiner.Combiner` applied to the stream ``x`` and
the sublayer output ``y``. ``W1, W2 ∈ R^{d×d}`` cost ``2d(d+1)`` parameters per gated sublayer.
Oracles: :func:`.reference.sdu`, :func:`.reference.highway_gate`, :func:`.reference.gated_sublayer`.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor, nn

from ..errors import unknown_choice
from .combiner import ACTIVATIONS, Combiner


class _GatedTransform(Combiner):
    """Shared part of the HT gates: ``T = act(x W1 + b1)`` and ``f = x W2 + b2``.

    W1 and W2 are stored as one ``[2d, d]`` projection (one matmul instead of two); the
    first half is the gate, the second the transform. ``b1`` starts at ``bias`` (HT §3: 0
    unless set), ``b2`` at zero. ``activations`` lists the activations a gate accepts.
    """

    matmuls: ClassVar[int] = 2  # W1, W2
    activations: ClassVar[tuple[str, ...]] = tuple(ACTIVATIONS)

    def __init__(self, d_model: int, activation: str = "sigmoid", bias: float | None = None):
        super().__init__()
        if activation not in self.activations:  # validation refuses it in a config
            raise unknown_choice(f"{type(self).__name__} activation", activation, self.activations)
        self.d_model = d_model
        self.activation = activation
        self.initial_bias = 0.0 if bias is None else float(bias)
        self.proj = nn.Linear(d_model, 2 * d_model)
        self.reset_own_parameters()

    @classmethod
    def build(
        cls, d_model: int, activation: str = "sigmoid", bias: float | None = None
    ) -> _GatedTransform:
        return cls(d_model, activation, bias)

    @torch.no_grad()
    def reset_own_parameters(self) -> None:
        """The gate's biases (the model initialiser runs this after re-drawing Linears)."""
        self.proj.bias.zero_()
        self.proj.bias[: self.d_model].fill_(self.initial_bias)

    def gate_and_transform(self, x: Tensor) -> tuple[Tensor, Tensor]:
        gate_pre, transform = self.proj(x).chunk(2, dim=-1)
        return ACTIVATIONS[self.activation](gate_pre), transform

    def gate_bias(self) -> Tensor:
        return self.proj.bias[: self.d_model]

    def gate_scores(self, x: Tensor, y: Tensor) -> Tensor:
        """``T = Ψ(x W1 + b1)``."""
        return self.gate_and_transform(x)[0]

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, activation={self.activation}"


class SelfDependencyUnit(_GatedTransform):
    """SDU (HT eqs. 21-24): ``x + y + Ψ(x W1 + b1) ⊙ (x W2 + b2)``, Ψ ∈ {sigmoid, tanh}."""

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        gate, transform = self.gate_and_transform(x)
        return x + y + gate * transform


class HighwayGate(_GatedTransform):
    """Highway gate (HT eqs. 26-29): ``(1 - T) ⊙ x + y + T ⊙ f(x)``, T sigmoid."""

    activations = ("sigmoid",)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        gate, transform = self.gate_and_transform(x)
        return x + gate * (transform - x) + y  # promotes dtypes under autocast


class GatedSublayer(_GatedTransform):
    """Gated MHDPA (HT eqs. 30-31), applied to any sublayer: ``x + (1 - T) ⊙ y + T ⊙ f(x)``,
    T sigmoid."""

    activations = ("sigmoid",)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        gate, transform = self.gate_and_transform(x)
        return x + y + gate * (transform - y)
