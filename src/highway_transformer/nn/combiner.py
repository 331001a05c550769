"""The combiner interface: how the stream ``x`` and a sublayer output ``y`` merge.

See :mod:`highway_transformer.nn.connections` for the table of all combiners.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import torch
from torch import Tensor, nn

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}


class Combiner(nn.Module):
    """Merges the stream ``x`` with the sublayer output ``y`` (both ``[..., d_model]``)."""

    #: True for combiners defined only for the identity-map (pre-LN) ordering (GTrXL).
    pre_ln_only: ClassVar[bool] = False
    #: d×d matrix products per call (for FLOP counts).
    matmuls: ClassVar[int] = 0
    #: The ``model.gate.activation`` values the combiner accepts (all where it has none).
    activations: ClassVar[tuple[str, ...]] = tuple(ACTIVATIONS)

    @classmethod
    def build(
        cls, d_model: int, activation: str = "sigmoid", bias: float | None = None
    ) -> Combiner:
        """A fresh combiner from the gate settings (``model.gate.*``); the plain residual
        takes none of them."""
        return cls()

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        """Subclasses override this; the base combiner is the plain residual ``x + y``."""
        return x + y

    def gate_bias(self) -> Tensor | None:
        """The learned gate bias ``b1`` (HT Figs. 13-14), or None for ungated combiners."""
        return None

    def gate_scores(self, x: Tensor, y: Tensor) -> Tensor | None:
        """The gate's values for the stream ``x`` and sublayer output ``y`` (what an analysis
        reads; the forward computes them itself), or None for ungated combiners."""
        return None


class Residual(Combiner):
    """The plain residual ``x + y`` (HT eqs. 7 and 9)."""

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return x + y
