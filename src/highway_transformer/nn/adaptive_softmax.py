"""Adaptive softmax (Grave et al. 2017) laid out as the Transformer-XL reference's
``ProjectedAdaptiveLogSoftmax``, so that it can share weights with
:class:`~highway_transformer.nn.adaptive.AdaptiveInput`.

torch's ``nn.AdaptiveLogSoftmaxWithLoss`` cannot be tied: its head is one matrix holding the
shortlist *and* the cluster rows, its tails project with their own ``Linear`` and nothing has
a bias. Here cluster ``i`` (0 = head shortlist) has an output layer ``layers[i]`` (weight
``[size_i, d_i]`` + bias, the shape of ``AdaptiveInput.tables[i]``) and, unless ``div = 1``,
a projection ``projections[i]`` (weight ``[d, d_i]``, the shape of
``AdaptiveInput.projections[i]``) applied transposed: ``h @ P_i``. The head also scores the
tail clusters (``clusters``); tail ``i``'s log-probability is read from head column ``-i``,
the reference's order. With ``div = 1`` one ``[V, d]`` layer is sliced per cluster.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .adaptive import AdaptiveInput, check_cutoffs, cluster_dims


def _log_softmax(logits: Tensor) -> Tensor:
    """Log-probabilities over the last dimension, in fp32 at least: the bf16/fp16 logits of
    an autocast step (where a CPU's autocast would leave them in bf16) are not normalised in
    their own precision."""
    return F.log_softmax(logits, dim=-1, dtype=torch.promote_types(logits.dtype, torch.float32))


class AdaptiveSoftmax(nn.Module):
    """``forward(hidden [N, d], target [N]) -> nll [N]``; ``log_prob(hidden) -> [N, V]``."""

    def __init__(self, d_model: int, vocab_size: int, cutoffs: tuple[int, ...], div: float = 4.0):
        super().__init__()
        self.bounds = [0, *check_cutoffs(cutoffs, vocab_size), vocab_size]
        n_clusters = len(self.bounds) - 1
        self.layers = nn.ModuleList()
        self.projections = nn.ModuleList()
        if div == 1:
            self.layers.append(nn.Linear(d_model, vocab_size))
            head_dim = d_model
        else:
            dims = cluster_dims(d_model, n_clusters, div)
            for i, dim in enumerate(dims):
                self.layers.append(nn.Linear(dim, self.bounds[i + 1] - self.bounds[i]))
                self.projections.append(nn.Linear(dim, d_model, bias=False))
            head_dim = dims[0]
        self.clusters = nn.Linear(head_dim, n_clusters - 1)

    def tie_to(self, embedding: AdaptiveInput, projections: bool = True) -> None:
        """Share the output layers' weights with ``embedding``'s tables and (when
        ``projections``) the tail projections with its projections, as the reference's
        ``tie_weight`` / ``tie_projs = [False, True, ...]`` (the head projection stays own)."""
        for layer, table in zip(self.layers, embedding.tables, strict=True):
            layer.weight = table.weight
        if projections:
            for i in range(1, len(self.projections)):
                self.projections[i].weight = embedding.projections[i].weight

    def _logits(self, hidden: Tensor, i: int) -> Tensor:
        """Scores of cluster ``i``'s tokens (the head's also score the tail clusters)."""
        if self.projections:
            hidden = hidden @ self.projections[i].weight
            weight, bias = self.layers[i].weight, self.layers[i].bias
        else:
            lo, hi = self.bounds[i], self.bounds[i + 1]
            weight, bias = self.layers[0].weight[lo:hi], self.layers[0].bias[lo:hi]
        logits = F.linear(hidden, weight, bias)
        return torch.cat([logits, self.clusters(hidden)], dim=-1) if i == 0 else logits

    def log_prob(self, hidden: Tensor) -> Tensor:
        """Log-probabilities of every token ``[N, V]``."""
        head = _log_softmax(self._logits(hidden, 0))
        parts = [head[:, : self.bounds[1]]]
        for i in range(1, len(self.bounds) - 1):
            tail = _log_softmax(self._logits(hidden, i))
            parts.append(head[:, -i, None] + tail)
        return torch.cat(parts, dim=-1)

    def forward(self, hidden: Tensor, target: Tensor) -> Tensor:
        """Negative log-likelihood of each ``target`` (computes only the clusters it needs)."""
        head = _log_softmax(self._logits(hidden, 0))
        nll = hidden.new_zeros(target.shape)
        for i in range(len(self.bounds) - 1):
            lo, hi = self.bounds[i], self.bounds[i + 1]
            rows = ((target >= lo) & (target < hi)).nonzero().squeeze(1)
            if rows.numel() == 0:
                continue
            local = (target[rows] - lo)[:, None]
            if i == 0:
                logprob = head[rows].gather(1, local).squeeze(1)
            else:
                tail = _log_softmax(self._logits(hidden[rows], i))
                logprob = head[rows, -i] + tail.gather(1, local).squeeze(1)
            nll[rows] = -logprob
        return nll
