"""Relation-aware self-attention (Shaw, Uszkoreit & Vaswani, NAACL 2018, eqs. 3-5).

For query position ``i`` and key position ``j`` the clipped distance
``clip(j − i, −k, k)`` selects learned edge vectors ``a^K_ij, a^V_ij ∈ R^{d_head}``
(Shaw §3.2), shared across heads and sequences:

    e_ij = q_i · (k_j + a^K_ij) / √d_head                     (Shaw eq. 4)
    α_ij = softmax_j(e_ij)                                     (Shaw eq. 2)
    z_i  = Σ_j α_ij (v_j + a^V_ij)                             (Shaw eq. 3)

Efficient form (Shaw eq. 5), without any ``L × L × d_head`` tensor: the key term is one
product of the queries with the ``2k+1`` key embeddings, ``[B, H, L, 2k+1]``, gathered per
``(i, j)`` to ``[B, H, L, L]``; the value term scatters ``α`` into the ``2k+1`` distance
buckets, ``w_ir = Σ_{j: clip(j−i)=r} α_ij`` (``[B, H, L, 2k+1]``), then multiplies by the
value embeddings: ``Σ_j α_ij a^V_ij = Σ_r w_ir a^V_r``.

``output_gate`` multiplies the heads by the attention-output gate (:mod:`.output_gate`)
before the output projection; ``bias`` False drops the projections' biases.
Oracle: :func:`.reference.shaw_multihead_attention` (edge tables built entry by entry).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..errors import ConfigError
from .dropout import dropout
from .output_gate import build_output_gate


def relative_buckets(length: int, clip: int, device: torch.device | None = None) -> Tensor:
    """``[L, L]`` long tensor ``clip(j − i, −k, k) + k`` (row ``i`` = query, column ``j``).

    Index ``r ∈ [0, 2k]`` selects row ``r`` of the ``2k+1`` relative embeddings (Shaw §3.2).
    """
    pos = torch.arange(length, device=device)
    return (pos[None, :] - pos[:, None]).clamp(-clip, clip) + clip


class ShawAttention(nn.Module):
    """Multi-head relation-aware self-attention sublayer (Shaw et al., 2018), ``[B, L, D]``.

    A sublayer only: no residual and no normalisation. ``rel_k`` and ``rel_v`` hold ``a^K``
    and ``a^V`` for the ``2k+1`` clipped distances ``−k .. k`` (row ``r`` is distance
    ``r − k``) and are shared across heads. ``causal=True`` masks keys ``j > i`` for language
    modelling. Dropout on the attention weights ``α`` applies in training only.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        clip: int,
        dropout_attn: float = 0.0,
        causal: bool = True,
        *,
        bias: bool = True,
        output_gate: str = "none",
    ) -> None:
        super().__init__()
        if clip < 1:
            raise ConfigError(f"clip distance must be >= 1, got {clip}")
        if n_heads < 1 or d_model < 1 or d_model % n_heads != 0:
            raise ConfigError(
                f"d_model ({d_model}) must be a positive multiple of n_heads ({n_heads}), "
                "n_heads >= 1"
            )
        if not 0.0 <= dropout_attn < 1.0:
            raise ConfigError(f"dropout_attn must be in [0, 1), got {dropout_attn}")
        self.d_model = d_model
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.clip = clip
        self.causal = causal
        self.dropout_attn = dropout_attn
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)
        self.output_gate = build_output_gate(output_gate, d_model, n_heads, self.d_head, bias)
        self.rel_k = nn.Embedding(2 * clip + 1, self.d_head)
        self.rel_v = nn.Embedding(2 * clip + 1, self.d_head)
        self.reset_own_parameters()

    @torch.no_grad()
    def reset_own_parameters(self) -> None:
        """Edge vectors on the scale of the projected keys/values (Shaw et al. do not say);
        the model initialiser runs this after re-drawing Embeddings."""
        nn.init.normal_(self.rel_k.weight, std=self.d_head**-0.5)
        nn.init.normal_(self.rel_v.weight, std=self.d_head**-0.5)

    def split_heads(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values ``[B, H, L, d_head]`` from the input ``[B, L, D]``."""
        b, length, _ = h.shape
        qkv = self.qkv(h).view(b, length, 3, self.n_heads, self.d_head)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        return q, k, v

    def forward(self, h: Tensor) -> Tensor:
        """Relation-aware attention of ``h`` ``[B, L, D]`` over itself; returns ``[B, L, D]``."""
        b, length, _ = h.shape
        q, k, v = self.split_heads(h)
        q = q * (1.0 / math.sqrt(self.d_head))
        buckets = relative_buckets(length, self.clip, h.device)
        index = buckets.expand(b, self.n_heads, length, length)  # a view, no copy

        # e_ij = q_i·k_j + q_i·a^K_{r(i,j)}: [B,H,L,2k+1] product, gathered to [B,H,L,L].
        # In-place updates are safe: neither matmul nor add saves its output for backward.
        scores = q @ k.transpose(-2, -1)
        scores.add_((q @ self.rel_k.weight.t()).gather(-1, index))
        if self.causal:
            future = torch.ones(length, length, dtype=torch.bool, device=h.device).triu(1)
            scores.masked_fill_(future, torch.finfo(scores.dtype).min)
        # The probabilities and their bucket sums in fp32 at least (bf16 / fp16 scores: a CPU's
        # autocast would leave the softmax in bf16, CUDA's promotes it as here); the products
        # take them in the values' dtype.
        alpha = torch.softmax(
            scores, dim=-1, dtype=torch.promote_types(scores.dtype, torch.float32)
        )
        if self.training and self.dropout_attn > 0.0:
            alpha = dropout(alpha, self.dropout_attn)

        # z_i = Σ_j α_ij v_j + Σ_r w_ir a^V_r, w_ir = α summed over the bucket r of row i.
        weights = alpha.new_zeros(b, self.n_heads, length, 2 * self.clip + 1)
        weights = weights.scatter_add(-1, index, alpha)
        z = alpha.to(v.dtype) @ v + weights.to(v.dtype) @ self.rel_v.weight
        heads = z.transpose(1, 2).reshape(b, length, self.d_model)
        if self.output_gate is not None:
            heads = self.output_gate(h, heads)
        return self.out(heads)

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, n_heads={self.n_heads}, clip={self.clip}, "
            f"dropout_attn={self.dropout_attn}, causal={self.causal}"
        )


__all__ = ["ShawAttention", "relative_buckets"]
