"""The gating layers of the Gated Transformer-XL (Parisotto et al., 2019, "Stabilizing
Transformers for Reinforcement Learning", §3.2, eqs. 11-14).

GTrXL puts the LayerNorm on the sublayer input only (identity-map reordering) and replaces
each residual connection with a gating layer ``g(x, y)`` of the stream ``x`` and the
ReLU-activated sublayer output (GTrXL eq. 10):

    Ȳ = RelMHA(LN([SG(M), E]));  Y = g_MHA(E, ReLU(Ȳ));  Ē = f(LN(Y));  E' = g_MLP(Y, ReLU(Ē)).

Every class here is a :class:`~highway_transformer.nn.combiner.Combiner` whose ``forward``
takes the *raw* sublayer output ``y`` and applies the ReLU itself, ``y' = ReLU(y)``:

=======================  ===========================================================  =======
combiner                 formula                                                      GTrXL
=======================  ===========================================================  =======
``gtrxl-input``          ``σ(W_g x) ⊙ x + y'``                                        eq. 11
``gtrxl-output``         ``x + σ(W_g x − b_g) ⊙ y'``                                  eq. 12
``gtrxl-highway``        ``σ(W_g x + b_g) ⊙ x + (1 − σ(W_g x + b_g)) ⊙ y'``           eq. 13
``gtrxl-sigmoid-tanh``   ``x + σ(W_g y' − b_g) ⊙ tanh(U_g y')``                       §3.2
``gtrxl-gru``            ``(1 − z) ⊙ x + z ⊙ ĥ`` (r, z, ĥ below)                      eq. 14
=======================  ===========================================================  =======

The matrices ``W``/``U`` are bias-free linear maps; ``b_g`` is a fixed constant (not learned),
2.0 by default as in the GTrXL paper, so that the gates start close to the identity map
``g(x, y) ≈ x``. All gates are defined for the pre-LN ordering only (``pre_ln_only``).
Oracles: :func:`.reference.gtrxl_input_gate` and its neighbours, one per gate.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import ConfigError
from .combiner import Combiner

#: The GTrXL paper's initial gate bias ``b_g`` (Parisotto et al., 2019, §3.2).
DEFAULT_GATE_BIAS = 2.0


def _check_bias(bias: float | None) -> float:
    """``b_g`` as a float: ``None`` gives :data:`DEFAULT_GATE_BIAS`; non-finite values fail."""
    if bias is None:
        return DEFAULT_GATE_BIAS
    value = float(bias)
    if not math.isfinite(value):
        raise ConfigError(f"GTrXL gate bias must be a finite number, got {bias!r}")
    return value


class _GTrXLGate(Combiner):
    """Shared part of the GTrXL gates: ``d_model``, the constant ``b_g`` and pre-LN only."""

    pre_ln_only: ClassVar[bool] = True

    def __init__(self, d_model: int, bias: float | None = None) -> None:
        super().__init__()
        if d_model < 1:
            raise ConfigError(f"d_model must be >= 1, got {d_model}")
        self.d_model = d_model
        self.b_g = _check_bias(bias)

    @classmethod
    def build(
        cls, d_model: int, activation: str = "sigmoid", bias: float | None = None
    ) -> _GTrXLGate:
        return cls(d_model, bias)

    def gate_bias(self) -> Tensor | None:
        """None: the GTrXL gates have no learned bias (``b_g`` is a fixed constant)."""
        return None

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, b_g={self.b_g}"


class InputGate(_GTrXLGate):
    """Gated input connection (GTrXL eq. 11): ``σ(W_g x) ⊙ x + ReLU(y)``.

    This gate has no ``b_g``; the ``bias`` argument is accepted for a uniform constructor and
    only validated.
    """

    matmuls: ClassVar[int] = 1

    def __init__(self, d_model: int, bias: float | None = None) -> None:
        super().__init__(d_model, bias)
        self.w_g = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return torch.sigmoid(self.w_g(x)) * x + F.relu(y)

    def gate_scores(self, x: Tensor, y: Tensor) -> Tensor:
        """``σ(W_g x)``."""
        return torch.sigmoid(self.w_g(x))

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}"


class OutputGate(_GTrXLGate):
    """Gated output connection (GTrXL eq. 12): ``x + σ(W_g x − b_g) ⊙ ReLU(y)``."""

    matmuls: ClassVar[int] = 1

    def __init__(self, d_model: int, bias: float | None = None) -> None:
        super().__init__(d_model, bias)
        self.w_g = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return x + torch.sigmoid(self.w_g(x) - self.b_g) * F.relu(y)

    def gate_scores(self, x: Tensor, y: Tensor) -> Tensor:
        """``σ(W_g x − b_g)``."""
        return torch.sigmoid(self.w_g(x) - self.b_g)


class HighwayGTrXLGate(_GTrXLGate):
    """Highway connection (GTrXL eq. 13): ``σ(W_g x + b_g) ⊙ x + (1 − σ(W_g x + b_g)) ⊙ y'``
    with ``y' = ReLU(y)``."""

    matmuls: ClassVar[int] = 1

    def __init__(self, d_model: int, bias: float | None = None) -> None:
        super().__init__(d_model, bias)
        self.w_g = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        gate = torch.sigmoid(self.w_g(x) + self.b_g)
        # lerp(y', x, gate) = gate ⊙ x + (1 − gate) ⊙ y'
        return torch.lerp(F.relu(y), x, gate)

    def gate_scores(self, x: Tensor, y: Tensor) -> Tensor:
        """``σ(W_g x + b_g)``."""
        return torch.sigmoid(self.w_g(x) + self.b_g)


class SigmoidTanhGate(_GTrXLGate):
    """Sigmoid-tanh gate (GTrXL §3.2): ``x + σ(W_g y' − b_g) ⊙ tanh(U_g y')``, ``y' = ReLU(y)``.

    ``[W_g; U_g]`` is one ``[2d, d]`` bias-free projection of ``y'`` (one matmul).
    """

    matmuls: ClassVar[int] = 2

    def __init__(self, d_model: int, bias: float | None = None) -> None:
        super().__init__(d_model, bias)
        self.wu_y = nn.Linear(d_model, 2 * d_model, bias=False)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        gate_pre, transform = self.wu_y(F.relu(y)).chunk(2, dim=-1)
        return x + torch.sigmoid(gate_pre - self.b_g) * torch.tanh(transform)

    def gate_scores(self, x: Tensor, y: Tensor) -> Tensor:
        """``σ(W_g y' − b_g)``."""
        return torch.sigmoid(self.wu_y(F.relu(y)).chunk(2, dim=-1)[0] - self.b_g)


class GRUGate(_GTrXLGate):
    """GRU-type gate (GTrXL eq. 14), with ``y' = ReLU(y)``:

    ``r = σ(W_r y' + U_r x)``, ``z = σ(W_z y' + U_z x − b_g)``,
    ``ĥ = tanh(W_g y' + U_g (r ⊙ x))``, ``g(x, y) = (1 − z) ⊙ x + z ⊙ ĥ``.

    Written from these equations, not :class:`torch.nn.GRUCell` (whose reset gate multiplies
    ``U_g x`` rather than ``x``). ``[W_r; W_z; W_g]`` is one ``[3d, d]`` projection of ``y'``
    and ``[U_r; U_z]`` one ``[2d, d]`` projection of ``x``; ``U_g`` reads ``r ⊙ x``. All are
    bias-free; ``b_g`` (default 2) starts ``z`` small, so the gate starts near ``g = x``.
    """

    matmuls: ClassVar[int] = 6

    def __init__(self, d_model: int, bias: float | None = None) -> None:
        super().__init__(d_model, bias)
        self.w_y = nn.Linear(d_model, 3 * d_model, bias=False)
        self.u_x = nn.Linear(d_model, 2 * d_model, bias=False)
        self.u_g = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        wr_y, wz_y, wg_y = self.w_y(F.relu(y)).chunk(3, dim=-1)
        ur_x, uz_x = self.u_x(x).chunk(2, dim=-1)
        r = torch.sigmoid(wr_y + ur_x)
        z = torch.sigmoid(wz_y + uz_x - self.b_g)
        h_hat = torch.tanh(wg_y + self.u_g(r * x))
        # lerp(x, ĥ, z) = (1 − z) ⊙ x + z ⊙ ĥ
        return torch.lerp(x, h_hat, z)

    def gate_scores(self, x: Tensor, y: Tensor) -> Tensor:
        """The update gate ``z = σ(W_z y' + U_z x − b_g)``."""
        wz_y = self.w_y(F.relu(y)).chunk(3, dim=-1)[1]
        uz_x = self.u_x(x).chunk(2, dim=-1)[1]
        return torch.sigmoid(wz_y + uz_x - self.b_g)


#: GTrXL combiner name -> class (``model.gate.kind``); ``model.gate.bias`` is ``b_g`` and the
#: activation is not used (the GTrXL gates fix their own nonlinearities).
GTRXL_COMBINERS: dict[str, type[Combiner]] = {
    "gtrxl-input": InputGate,
    "gtrxl-output": OutputGate,
    "gtrxl-highway": HighwayGTrXLGate,
    "gtrxl-sigmoid-tanh": SigmoidTanhGate,
    "gtrxl-gru": GRUGate,
}

__all__ = [
    "DEFAULT_GATE_BIAS",
    "GTRXL_COMBINERS",
    "GRUGate",
    "HighwayGTrXLGate",
    "InputGate",
    "OutputGate",
    "SigmoidTanhGate",
]
