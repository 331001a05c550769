"""Connections: how a sublayer's output rejoins the residual stream.

A connection is *where the LayerNorm sits* (post-LN or pre-LN) times a *combiner* of the
stream ``x`` and the sublayer output ``y``. Every gate of the Highway Transformer (HT) is a
combiner, and so is the plain residual:

=================  ==============================================  ==================
combiner           formula                                         source
=================  ==============================================  ==================
``residual``       ``x + y``                                       HT eqs. 7-9
``sdu``            ``x + y + Ψ(x W1 + b1) ⊙ (x W2 + b2)``          HT eqs. 21-24
``highway``        ``(1 - T) ⊙ x + y + T ⊙ (x W2 + b2)``           HT eqs. 26-29
``gated``          ``x + (1 - T) ⊙ y + T ⊙ (x W2 + b2)``           HT eqs. 30-31
``gtrxl-*``        GTrXL gates on ``(x, ReLU(y))``, pre-LN only     GTrXL (post §III)
=================  ==============================================  ==================

with ``T = σ(x W1 + b1)`` and ``Ψ`` sigmoid or tanh. Post-LN wraps the combination as
``LN(combine(x, y(x)))``; pre-LN feeds the sublayer a normalised input,
``combine(x, y(LN(x)))``. A new gate is one small :class:`Combiner` subclass registered in
:data:`COMBINERS`.
Oracles: :func:`.reference.post_ln_connection`, :func:`.reference.pre_ln_connection`.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

from ..config.names import NORM_POSITIONS
from ..errors import ConfigError, unknown_choice
from .combiner import Combiner, Residual
from .dropout import Dropout
from .gtrxl import GTRXL_COMBINERS
from .highway_gates import GatedSublayer, HighwayGate, SelfDependencyUnit
from .norms import build_norm

#: Combiner name (``model.gate.kind``) -> class; :meth:`Combiner.build` makes one from the
#: gate settings.
COMBINERS: dict[str, type[Combiner]] = {
    "none": Residual,
    "sdu": SelfDependencyUnit,
    "highway": HighwayGate,
    "gated": GatedSublayer,
    # Gated Transformer-XL gating layers (Parisotto et al. 2019), pre-LN only.
    **GTRXL_COMBINERS,
}


def combiner_class(kind: str) -> type[Combiner]:
    """The class registered as ``kind`` (its class flags: ``pre_ln_only``, ``activations``,
    ``matmuls``)."""
    if kind not in COMBINERS:
        raise unknown_choice("gate", kind, COMBINERS)
    return COMBINERS[kind]


def build_combiner(
    kind: str, d_model: int, activation: str = "sigmoid", bias: float | None = None
) -> Combiner:
    """A fresh combiner of the named kind (see :data:`COMBINERS`); ``bias`` is the initial
    gate bias (HT gates: ``b1``; GTrXL: ``b_g``), ``None`` the gate's own default."""
    return combiner_class(kind).build(d_model, activation, bias)


class Connection(nn.Module):
    """Wraps one sublayer call: normalisation position, dropout on ``y``, and the combiner.

    ``sublayer`` is called as ``sublayer(h)`` or, when ``context`` is given (e.g. the
    Transformer-XL memory), as ``sublayer(h, context)``; in pre-LN both go through the same
    input norm, as in the Transformer-XL reference code. ``layer_norm`` names the
    normalisation (:data:`~highway_transformer.nn.norms.NORMS`: ``torch`` or the
    R-Transformer code's ``rt``, or ``rmsnorm``); ``norm_bias`` False: a LayerNorm without
    ``b``.
    """

    def __init__(
        self,
        d_model: int,
        combiner: Combiner,
        norm: str = "post",
        dropout: float = 0.0,
        layer_norm: str = "torch",
        norm_bias: bool = True,
    ) -> None:
        super().__init__()
        if norm not in NORM_POSITIONS:
            raise unknown_choice("norm position", norm, NORM_POSITIONS)
        if combiner.pre_ln_only and norm != "pre":
            raise ConfigError(
                f"the {type(combiner).__name__} gate is defined for pre-LN (identity-map "
                "reordering) only; set model.norm=pre"
            )
        self.norm_position = norm
        self.norm = build_norm(layer_norm, d_model, norm_bias)
        self.dropout = Dropout(dropout)
        self.combiner = combiner

    def forward(
        self, x: Tensor, sublayer: Callable[..., Tensor], context: Tensor | None = None
    ) -> Tensor:
        if self.norm_position == "post":
            y = sublayer(x) if context is None else sublayer(x, context)
            return self.norm(self.combiner(x, self.dropout(y)))
        h = self.norm(x)
        y = sublayer(h) if context is None else sublayer(h, self.norm(context))
        return self.combiner(x, self.dropout(y))
