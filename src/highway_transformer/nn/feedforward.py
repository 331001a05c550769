"""Position-wise feed-forward network (HT eq. 8): ``FFN(U) = FF(ReLU(FF(U)))``.

Oracle: :func:`.reference.position_wise_ff`.
"""

from __future__ import annotations

from torch import Tensor, nn

from .dropout import Dropout


class FeedForward(nn.Module):
    """``W2 · Dropout(ReLU(W1 u + b1)) + b2``; the dropout follows the RT/XL reference code."""

    def __init__(self, d_model: int, d_inner: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_inner)
        self.fc2 = nn.Linear(d_inner, d_model)
        self.dropout = Dropout(dropout)

    def forward(self, u: Tensor) -> Tensor:
        return self.fc2(self.dropout(self.fc1(u).relu()))
