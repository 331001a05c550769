"""Attention score functions of the encoder-decoder lecture (slides; REFERENCE §1).

For a query (decoder state) ``s_t`` and a key (encoder state) ``h_i`` the attention weights
are ``α_t = softmax_i(score(s_t, h_i))`` and the output is ``Σ_i α_ti v_i``:

===================  =========================================  =========================
score                formula                                    source
===================  =========================================  =========================
``scaled_dot``       ``s_tᵀ h_i / √n``                          Vaswani et al. 2017
``dot``              ``s_tᵀ h_i``                               Luong et al. 2015
``general``          ``s_tᵀ W_a h_i``                           Luong et al. 2015
``additive``         ``v_aᵀ tanh(W_a [s_t; h_i])``               Bahdanau et al. 2015
``content``          ``cos(s_t, h_i)``                          Graves et al. 2014
``location``         ``α_t = softmax(W_a s_t)``                 Luong et al. 2015
===================  =========================================  =========================

Here every score works per head on the projected queries ``s = query W_q`` and keys
``h = memory W_k`` (``n = d_head``), so one module serves as encoder self-attention,
decoder masked self-attention and encoder-decoder attention. ``location`` ignores the keys:
its weights over source positions ``1..L`` are the first ``L`` entries of ``W_a s_t``, so it
needs a largest source length ``max_len`` fixed when the module is built.

Masks are boolean (True = may attend) and fill with ``torch.finfo(dtype).min``, which is safe
in bf16/fp16. A query that may attend to no key at all (a fully padded row) gets a zero
output, never NaN.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..config.names import normalize_score
from ..errors import ConfigError, DataError
from .attention import attend, causal_mask
from .dropout import dropout


def attention_mask(
    n_queries: int,
    n_keys: int,
    key_padding_mask: Tensor | None,
    causal: bool,
    device: torch.device,
) -> Tensor | None:
    """Boolean ``[B or 1, 1, Lq, Lk]`` mask, True where a query may attend; None = all."""
    mask: Tensor | None = None
    if causal:
        mask = causal_mask(n_queries, n_keys, device)[None, None]
    if key_padding_mask is not None:
        keep = ~key_padding_mask.to(device=device, dtype=torch.bool)[:, None, None, :]
        mask = keep if mask is None else mask & keep
    return mask


class ScoredAttention(nn.Module):
    """Multi-head attention with a selectable score function (slides; Luong et al. 2015).

    ``forward(query [B, Lq, D], memory [B, Lk, D] | None, key_padding_mask [B, Lk] bool
    (True = padding), causal) -> [B, Lq, D]``. With ``memory=None`` it is self-attention.
    ``scaled_dot`` and ``dot`` run through
    :func:`torch.nn.functional.scaled_dot_product_attention`; the others build the score
    matrix explicitly.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        score: str = "scaled_dot",
        d_head: int | None = None,
        dropout_attn: float = 0.0,
        max_len: int = 0,
        d_additive: int | None = None,
    ) -> None:
        super().__init__()
        self.score = normalize_score(score)
        if n_heads < 1 or d_model < 1:
            raise ConfigError(f"attention needs d_model, n_heads >= 1, got {d_model}, {n_heads}")
        if d_head is None:
            if d_model % n_heads:
                raise ConfigError(
                    f"d_model={d_model} does not divide into {n_heads} heads; set d_head"
                )
            d_head = d_model // n_heads
        if self.score == "location" and max_len < 1:
            raise ConfigError(
                "the location-based score needs the largest source length: set task.max_len"
            )
        self.n_heads, self.d_head, self.max_len = n_heads, d_head, max_len
        self.dropout_attn = dropout_attn
        inner = n_heads * d_head
        self.q_proj = nn.Linear(d_model, inner)
        self.k_proj = nn.Linear(d_model, inner)
        self.v_proj = nn.Linear(d_model, inner)
        self.out = nn.Linear(inner, d_model)
        if self.score == "general":  # W_a per head
            self.w_general = nn.Parameter(torch.empty(n_heads, d_head, d_head))
        elif self.score == "additive":  # W_a = [W_s, W_h] per head, and v_a
            d_att = d_additive or d_head
            self.w_query = nn.Parameter(torch.empty(n_heads, d_head, d_att))
            self.w_key = nn.Parameter(torch.empty(n_heads, d_head, d_att))
            self.v_additive = nn.Parameter(torch.empty(n_heads, d_att))
        elif self.score == "location":  # W_a: d_head -> max_len source positions, per head
            self.w_location = nn.Parameter(torch.empty(n_heads, d_head, max_len))
        self.reset_score_parameters()

    @torch.no_grad()
    def reset_score_parameters(self) -> None:
        """Initialise the score's own parameters: ``general`` starts as the identity (the dot
        score), ``additive`` and ``location`` uniformly with fan-in bounds."""
        if self.score == "general":
            self.w_general.copy_(torch.eye(self.d_head).expand_as(self.w_general))
        elif self.score == "additive":
            bound = 1.0 / math.sqrt(2 * self.d_head)
            nn.init.uniform_(self.w_query, -bound, bound)
            nn.init.uniform_(self.w_key, -bound, bound)
            d_att = self.v_additive.shape[-1]
            nn.init.uniform_(self.v_additive, -1.0 / math.sqrt(d_att), 1.0 / math.sqrt(d_att))
        elif self.score == "location":
            bound = 1.0 / math.sqrt(self.d_head)
            nn.init.uniform_(self.w_location, -bound, bound)

    def extra_repr(self) -> str:
        return f"score={self.score}, n_heads={self.n_heads}, d_head={self.d_head}"

    # ------------------------------------------------------------------ scores

    def scores(self, q: Tensor, k: Tensor) -> Tensor:
        """Unmasked scores ``[B, H, Lq, Lk]`` of per-head queries and keys ``[B, H, L, dh]``."""
        if self.score == "scaled_dot":
            return q @ k.transpose(-1, -2) / math.sqrt(self.d_head)
        if self.score == "dot":
            return q @ k.transpose(-1, -2)
        if self.score == "general":
            return (q @ self.w_general.to(q.dtype)) @ k.transpose(-1, -2)
        if self.score == "additive":
            wq = torch.einsum("bhqd,hde->bhqe", q, self.w_query.to(q.dtype))
            wk = torch.einsum("bhkd,hde->bhke", k, self.w_key.to(k.dtype))
            hidden = torch.tanh(wq[:, :, :, None, :] + wk[:, :, None, :, :])
            return torch.einsum("bhqke,he->bhqk", hidden, self.v_additive.to(hidden.dtype))
        if self.score == "content":
            return F.normalize(q, dim=-1, eps=1e-6) @ F.normalize(k, dim=-1, eps=1e-6).transpose(
                -1, -2
            )
        # location: W_a s_t over the first Lk source positions
        n_keys = k.shape[2]
        return torch.einsum("bhqd,hdl->bhql", q, self.w_location[:, :, :n_keys].to(q.dtype))

    # ------------------------------------------------------------------ forward

    def _heads(self, x: Tensor, proj: nn.Linear) -> Tensor:
        batch, length, _ = x.shape
        return proj(x).view(batch, length, self.n_heads, self.d_head).transpose(1, 2)

    def forward(
        self,
        query: Tensor,
        memory: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        causal: bool = False,
    ) -> Tensor:
        """Attend from ``query [B, Lq, D]`` over ``memory [B, Lk, D]`` (default: ``query``)."""
        memory = query if memory is None else memory
        if query.dim() != 3 or memory.dim() != 3 or query.shape[0] != memory.shape[0]:
            raise DataError(
                f"attention expects query [B, Lq, D] and memory [B, Lk, D], got "
                f"{list(query.shape)} and {list(memory.shape)}"
            )
        batch, n_queries, _ = query.shape
        n_keys = memory.shape[1]
        if key_padding_mask is not None and tuple(key_padding_mask.shape) != (batch, n_keys):
            raise DataError(
                f"key_padding_mask must be [B, Lk] = {[batch, n_keys]}, "
                f"got {list(key_padding_mask.shape)}"
            )
        if self.score == "location" and n_keys > self.max_len:
            raise DataError(
                f"the location-based score covers at most task.max_len={self.max_len} source "
                f"positions, got {n_keys}; raise task.max_len or shorten the input"
            )
        q = self._heads(query, self.q_proj)
        k = self._heads(memory, self.k_proj)
        v = self._heads(memory, self.v_proj)
        mask = attention_mask(n_queries, n_keys, key_padding_mask, causal, query.device)
        empty = None
        if mask is not None:
            # rows with no key at all attend everywhere (no NaN) and are zeroed below
            empty = ~mask.any(dim=-1, keepdim=True)
            mask = mask | empty
        dropout_p = self.dropout_attn if self.training else 0.0
        if self.score in ("scaled_dot", "dot"):
            scale = None if self.score == "scaled_dot" else 1.0
            out = attend(q, k, v, mask, False, dropout_p, scale)
        else:
            scores = self.scores(q, k)
            if mask is not None:
                scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
            weights = scores.float().softmax(dim=-1).to(v.dtype)
            out = dropout(weights, dropout_p) @ v
        if empty is not None:
            out = out.masked_fill(empty, 0.0)
        out = out.transpose(1, 2).reshape(batch, n_queries, self.n_heads * self.d_head)
        return self.out(out)


class ScoredSelfAttention(ScoredAttention):
    """Encoder or decoder self-attention with the block's sublayer signature.

    ``padding`` (``[B, L]`` bool, True = pad) keeps pads out of the keys; the decoder's is
    causal, the encoder's is not.
    """

    def __init__(self, *args: Any, causal: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.causal = causal

    def forward(  # type: ignore[override]
        self,
        h: Tensor,
        context: Tensor | None = None,
        *,
        state: dict | None = None,
        padding: Tensor | None = None,
        **options: Any,
    ) -> Tensor:
        if context is not None or state is not None:
            raise ConfigError("scored attention has no segment memory and no decoding cache")
        return super().forward(h, None, key_padding_mask=padding, causal=self.causal)


class CrossAttention(ScoredAttention):
    """Encoder-decoder attention with the block's sublayer signature: queries from the
    decoder stream, keys and values from the top encoder output ``encoder``."""

    def forward(  # type: ignore[override]
        self,
        h: Tensor,
        context: Tensor | None = None,
        *,
        state: dict | None = None,
        encoder: Tensor | None = None,
        encoder_padding: Tensor | None = None,
        **options: Any,
    ) -> Tensor:
        if encoder is None:
            raise ConfigError("encoder-decoder attention needs the encoder output")
        return super().forward(h, encoder, key_padding_mask=encoder_padding, causal=False)
