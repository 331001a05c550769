"""Transformer-XL relative multi-head attention (Dai et al., 2019; HT eqs. 10-17).

For a query at position ``i`` of the current segment and a key at position ``j`` of the
extended context ``[memory ∘ h]`` (memory length ``M``, segment length ``L``, ``K = M + L``
keys), the score of one head is (HT eqs. 10-13; Dai et al. eq. in §3.3)::

    A_ij = q_iᵀ k_j  +  q_iᵀ W_kR R_{M+i-j}  +  uᵀ k_j  +  vᵀ W_kR R_{M+i-j}
           (a) "AC"      (b) "BD"              (c) "AC"    (d) "BD"

with ``R`` the parameter-free sinusoid of the distance, ``W_kR`` (``r_net``) a projection
separate from the content keys, and ``u`` / ``v`` the global content / position biases
(``r_w_bias`` / ``r_r_bias`` in the reference code). Terms (a)+(c) are ``(q_i + u)ᵀ k_j``
and (b)+(d) are ``(q_i + v)ᵀ W_kR R_{M+i-j}``; the output is ``softmax(A / √d_head) V``
(HT eq. 17) followed by the output projection.

Efficient form (post on Transformer-XL, "Bonus"): ``(q + v)`` is multiplied once with the
``K`` position keys ``W_kR R`` for the distances ``K-1 … 0`` (``B̃``, ``[B, H, L, K]``);
row ``i`` of the wanted ``BD`` matrix is row ``i`` of ``B̃`` shifted left by ``L-1-i``,
done with the pad-and-reshape trick of the reference code. The content term goes through
:func:`torch.nn.functional.scaled_dot_product_attention` with ``(q + u)`` as the query and
the shifted, scaled ``BD`` term plus the mask as its additive ``attn_mask``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import ConfigError
from .positional import sinusoid


def rel_shift(x: Tensor) -> Tensor:
    """Shift row ``i`` of ``x [..., L, K]`` left by ``L-1-i`` columns (reference ``_rel_shift``).

    Column ``c`` of ``x`` holds distance ``K-1-c``; in the result, entry ``(i, j)`` holds
    ``x[..., i, j + L-1-i]``, i.e. distance ``M+i-j`` with ``M = K-L``, for every ``j <= M+i``.
    Entries with ``j > M+i`` (future keys) hold unrelated values and must be masked.
    Zero-pad one column on the left, reinterpret the flat rows as ``[K+1, L]``, drop the
    first ``L`` elements and read the rest back as ``[L, K]``: O(L·K) memory, no gather.
    """
    *lead, q_len, k_len = x.shape
    padded = F.pad(x, (1, 0)).reshape(*lead, q_len * (k_len + 1))
    return padded[..., q_len:].reshape(*lead, q_len, k_len)


def relative_attention_mask(
    q_len: int, mem_len: int, *, same_length: bool = False, device: torch.device | None = None
) -> Tensor:
    """Boolean mask ``[L, M+L]``, ``True`` where query ``i`` may *not* attend to key ``j``.

    Causal: query ``i`` (absolute position ``M+i``) sees keys ``j <= M+i``. With
    ``same_length`` (reference code, with its configured ``mem_len`` taken as ``M``):
    ``mask_len = K - M``; ``mask_shift_len = L - mask_len`` if ``mask_len > 0`` else ``L``;
    keys ``j <= i - mask_shift_len`` are masked too, so every query sees its ``M`` most recent
    keys (itself included). With ``M = 0`` that window would be empty, so the mask stays
    causal (the reference's first segment, which has no memory yet, behaves the same way).
    """
    k_len = mem_len + q_len
    ones = torch.ones(q_len, k_len, dtype=torch.bool, device=device)
    mask = torch.triu(ones, diagonal=1 + mem_len)
    if same_length and mem_len > 0:
        mask_len = k_len - mem_len
        mask_shift_len = q_len - mask_len if mask_len > 0 else q_len
        mask = mask | torch.tril(ones, diagonal=-mask_shift_len)
    return mask


class RelativeMultiHeadAttention(nn.Module):
    """Transformer-XL relative multi-head attention sublayer (Dai et al., 2019; HT eqs. 10-17).

    No residual, LayerNorm or output dropout: the library's connection adds those.

    Args:
        d_model: width ``D`` of the input and output.
        n_heads: number of heads ``H``.
        d_head: width of each head; scores are scaled by ``1/√d_head``.
        dropout_attn: dropout on the attention weights (training mode only).
    """

    def __init__(self, d_model: int, n_heads: int, d_head: int, dropout_attn: float = 0.0) -> None:
        super().__init__()
        for name, value in (("d_model", d_model), ("n_heads", n_heads), ("d_head", d_head)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if not 0.0 <= float(dropout_attn) < 1.0:
            raise ConfigError(f"dropout_attn must be in [0, 1), got {dropout_attn!r}")
        self.d_model = d_model
        self.n_heads = n_heads
        self.d_head = d_head
        self.dropout_attn = float(dropout_attn)
        inner = n_heads * d_head
        self.qkv = nn.Linear(d_model, 3 * inner, bias=False)
        self.r_net = nn.Linear(d_model, inner, bias=False)  # W_kR
        self.r_w_bias = nn.Parameter(torch.empty(n_heads, d_head))  # u
        self.r_r_bias = nn.Parameter(torch.empty(n_heads, d_head))  # v
        self.out = nn.Linear(inner, d_model, bias=False)
        nn.init.normal_(self.r_w_bias, std=0.02)
        nn.init.normal_(self.r_r_bias, std=0.02)

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, n_heads={self.n_heads}, d_head={self.d_head}, "
            f"dropout_attn={self.dropout_attn}"
        )

    def _check(self, h: Tensor, memory: Tensor | None, clamp_len: int) -> None:
        if isinstance(clamp_len, bool) or not isinstance(clamp_len, int) or clamp_len < -1:
            raise ConfigError(
                f"clamp_len must be an integer >= 0, or -1 for no clamping; got {clamp_len!r}"
            )
        if h.dim() != 3 or h.shape[-1] != self.d_model:
            raise ConfigError(
                f"h must have shape [batch, length, {self.d_model}]; got {list(h.shape)}"
            )
        if memory is None:
            return
        if memory.dim() != 3:
            raise ConfigError(
                f"memory must have shape [batch, mem_len, {self.d_model}]; got {list(memory.shape)}"
            )
        if memory.shape[0] != h.shape[0]:
            raise ConfigError(
                f"memory has batch size {memory.shape[0]} but h has {h.shape[0]}; "
                "pass one memory row per sequence"
            )
        if memory.shape[-1] != self.d_model:
            raise ConfigError(
                f"memory has width {memory.shape[-1]} but the model's d_model is {self.d_model}"
            )

    def position_keys(self, k_len: int, clamp_len: int, like: Tensor) -> Tensor:
        """``W_kR R`` for the distances ``K-1 … 0`` (``Q`` of the post), ``[H, K, d_head]``.

        Distances beyond ``clamp_len`` use the encoding of ``clamp_len`` when it is ``>= 0``.
        """
        pos = torch.arange(k_len - 1, -1, -1, device=like.device, dtype=torch.float32)
        if clamp_len >= 0:
            pos = pos.clamp(max=clamp_len)
        r = sinusoid(pos, self.d_model).to(like.dtype)
        r_k = self.r_net(r)  # [K, H*dh]
        return r_k.view(k_len, self.n_heads, self.d_head).transpose(0, 1)

    def forward(
        self,
        h: Tensor,
        memory: Tensor | None = None,
        *,
        clamp_len: int = -1,
        same_length: bool = False,
    ) -> Tensor:
        """Attend from ``h [B, L, D]`` over ``[memory ∘ h]`` (``memory [B, M, D]`` or None).

        Returns ``[B, L, D]``. Gradients flow into ``memory`` if it requires them; stopping
        them (SG in Transformer-XL) is the caller's business.
        """
        self._check(h, memory, clamp_len)
        bsz, q_len, _ = h.shape
        mem_len = 0 if memory is None else memory.shape[1]
        cat = h if memory is None or mem_len == 0 else torch.cat([memory.to(h.dtype), h], dim=1)
        k_len = cat.shape[1]
        n_h, d_h = self.n_heads, self.d_head
        inner = n_h * d_h

        # Queries from the segment only; keys/values from the extended context.
        w_q, w_kv = self.qkv.weight.split([inner, 2 * inner], dim=0)
        q = F.linear(h, w_q).view(bsz, q_len, n_h, d_h).transpose(1, 2)  # [B, H, L, dh]
        key, value = F.linear(cat, w_kv).view(bsz, k_len, 2, n_h, d_h).permute(2, 0, 3, 1, 4)

        r_k = self.position_keys(k_len, clamp_len, like=q)  # [H, K, dh]
        q_u = q + self.r_w_bias.to(q.dtype)[:, None, :]  # (a) + (c): AC query
        q_v = q + self.r_r_bias.to(q.dtype)[:, None, :]  # (b) + (d): BD query
        bd = rel_shift(torch.matmul(q_v, r_k.transpose(-1, -2)))  # [B, H, L, K]
        bd = bd * (1.0 / math.sqrt(d_h))

        mask = relative_attention_mask(q_len, mem_len, same_length=same_length, device=h.device)
        bias = bd.masked_fill(mask, float("-inf")).to(q_u.dtype)
        attn = F.scaled_dot_product_attention(
            q_u,
            key.to(q_u.dtype),
            value.to(q_u.dtype),
            attn_mask=bias,
            dropout_p=self.dropout_attn if self.training else 0.0,
            scale=1.0 / math.sqrt(d_h),
        )  # [B, H, L, dh]
        return self.out(attn.transpose(1, 2).reshape(bsz, q_len, inner))
