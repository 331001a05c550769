"""Adaptive input embeddings (Baevski & Auli 2019) for large word vocabularies.

The vocabulary is split at ``cutoffs`` into a head and tail clusters; cluster ``i`` embeds
into ``d / div^i`` dimensions and is projected up to ``d``. Paired with torch's
:class:`~torch.nn.AdaptiveLogSoftmaxWithLoss` on the output side (Transformer-XL on
WikiText-103).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..errors import ConfigError


def check_cutoffs(cutoffs: tuple[int, ...], vocab_size: int) -> list[int]:
    bounds = list(cutoffs)
    if not bounds or bounds != sorted(set(bounds)) or bounds[0] <= 0 or bounds[-1] >= vocab_size:
        raise ConfigError(
            f"adaptive cutoffs {cutoffs} must increase strictly within (0, vocab_size={vocab_size})"
        )
    return bounds


class AdaptiveInput(nn.Module):
    """Embeds ids with cluster-sized tables, each projected to ``d_model``."""

    def __init__(self, vocab_size: int, d_model: int, cutoffs: tuple[int, ...], div: float = 4.0):
        super().__init__()
        bounds = [0, *check_cutoffs(cutoffs, vocab_size), vocab_size]
        self.bounds = bounds
        self.d_model = d_model
        self.tables = nn.ModuleList()
        self.projections = nn.ModuleList()
        for i in range(len(bounds) - 1):
            dim = max(1, int(d_model // (div**i)))
            self.tables.append(nn.Embedding(bounds[i + 1] - bounds[i], dim))
            self.projections.append(nn.Linear(dim, d_model, bias=False))

    def forward(self, tokens: Tensor) -> Tensor:
        out = torch.zeros(*tokens.shape, self.d_model, device=tokens.device)
        out = out.to(self.projections[0].weight.dtype)
        for i, (table, projection) in enumerate(zip(self.tables, self.projections, strict=True)):
            lo, hi = self.bounds[i], self.bounds[i + 1]
            selected = (tokens >= lo) & (tokens < hi)
            if selected.any():
                out[selected] = projection(table(tokens[selected] - lo)).to(out.dtype)
        return out
