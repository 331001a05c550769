"""Position-wise feed-forward networks: HT eq. 8's ``FFN(U) = FF(ReLU(FF(U)))`` and SwiGLU.

``relu`` (the default, :class:`FeedForward`): ``W2 · ReLU(W1 u + b1) + b2``.
``swiglu`` (Shazeer 2020; Llama, Qwen3, :class:`SwiGLU`): ``W2 (silu(W1 u) ⊙ W3 u)``, three
matrices, so its hidden width is :func:`swiglu_hidden` of ``d_inner``: ``round(2/3 ·
d_inner)`` rounded up to a multiple of 8, which keeps the parameters of the ReLU FFN of width
``d_inner`` (``3 · d · h ≈ 2 · d · d_inner``). Dropout sits on the hidden units in both, as
in the RT/XL reference code. Oracles: :func:`.reference.position_wise_ff`,
:func:`.reference.swiglu_ff`.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from .dropout import Dropout


def swiglu_hidden(d_inner: int) -> int:
    """SwiGLU's hidden width for a ReLU FFN of width ``d_inner``: the 2/3 rule, to 8s."""
    return -(-round(2 * d_inner / 3) // 8) * 8


class FeedForward(nn.Module):
    """``W2 · Dropout(ReLU(W1 u + b1)) + b2``; the dropout follows the RT/XL reference code."""

    def __init__(self, d_model: int, d_inner: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_inner, bias=bias)
        self.fc2 = nn.Linear(d_inner, d_model, bias=bias)
        self.dropout = Dropout(dropout)

    def forward(self, u: Tensor) -> Tensor:
        return self.fc2(self.dropout(self.fc1(u).relu()))


class SwiGLU(nn.Module):
    """``W2 · Dropout(silu(W1 u) ⊙ W3 u)`` with hidden width :func:`swiglu_hidden` of
    ``d_inner`` (``fc1`` is Llama's ``gate_proj``, ``fc3`` its ``up_proj``, ``fc2`` its
    ``down_proj``)."""

    def __init__(self, d_model: int, d_inner: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        hidden = swiglu_hidden(d_inner)
        self.fc1 = nn.Linear(d_model, hidden, bias=bias)
        self.fc3 = nn.Linear(d_model, hidden, bias=bias)
        self.fc2 = nn.Linear(hidden, d_model, bias=bias)
        self.dropout = Dropout(dropout)

    def forward(self, u: Tensor) -> Tensor:
        return self.fc2(self.dropout(F.silu(self.fc1(u)) * self.fc3(u)))


#: ``model.ffn`` name -> class ``(d_model, d_inner, dropout, bias)``.
FFNS: dict[str, type[FeedForward | SwiGLU]] = {"relu": FeedForward, "swiglu": SwiGLU}
