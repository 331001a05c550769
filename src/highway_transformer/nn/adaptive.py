"""Adaptive input embeddings (Baevski & Auli 2019) for large word vocabularies.

The vocabulary is split at ``cutoffs`` into a head and tail clusters; cluster ``i`` embeds
into ``d / div^i`` dimensions and is projected up to ``d``. As in the Transformer-XL
reference (``AdaptiveEmbedding``), ``div = 1`` is one full-width table with no projection.
The output side is :class:`~highway_transformer.nn.adaptive_softmax.AdaptiveSoftmax`,
which can share these tables and projections.
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


def cluster_dims(d_model: int, n_clusters: int, div: float) -> list[int]:
    """Width of each cluster's table: ``d / div^i`` (the reference's ``d_embed // div_val**i``)."""
    return [max(1, int(d_model // (div**i))) for i in range(n_clusters)]


class AdaptiveInput(nn.Module):
    """Embeds ids with cluster-sized tables, each projected to ``d_model``.

    ``tables[i]`` / ``projections[i]`` are cluster ``i``'s; with ``div = 1`` there is one
    table for the whole vocabulary and no projection.
    """

    def __init__(self, vocab_size: int, d_model: int, cutoffs: tuple[int, ...], div: float = 4.0):
        super().__init__()
        bounds = [0, *check_cutoffs(cutoffs, vocab_size), vocab_size]
        self.d_model = d_model
        self.tables = nn.ModuleList()
        self.projections = nn.ModuleList()
        if div == 1:
            self.bounds = [0, vocab_size]
            self.tables.append(nn.Embedding(vocab_size, d_model))
            return
        self.bounds = bounds
        for i, dim in enumerate(cluster_dims(d_model, len(bounds) - 1, div)):
            self.tables.append(nn.Embedding(bounds[i + 1] - bounds[i], dim))
            self.projections.append(nn.Linear(dim, d_model, bias=False))

    def forward(self, tokens: Tensor) -> Tensor:
        if not self.projections:
            return self.tables[0](tokens)
        out = torch.zeros(*tokens.shape, self.d_model, device=tokens.device)
        out = out.to(self.projections[0].weight.dtype)
        for i, (table, projection) in enumerate(zip(self.tables, self.projections, strict=True)):
            lo, hi = self.bounds[i], self.bounds[i + 1]
            selected = (tokens >= lo) & (tokens < hi)
            if selected.any():
                out[selected] = projection(table(tokens[selected] - lo)).to(out.dtype)
        return out
