"""Multi-head scaled dot-product attention (HT eqs. 1-3; Vaswani et al. 2017).

``head = softmax(Q Kᵀ / √d_head) V`` per head, heads concatenated and projected by ``Wo``.
The product runs through :func:`torch.nn.functional.scaled_dot_product_attention`, which
picks a fused kernel per device and handles masking safely in bf16/fp16. Two exceptions,
both on the CPU. Its bf16/fp16 kernel is slower than its fp32 one for narrow heads, so there
those operands go through fp32 copies (:func:`fused_in_fp32`; the result in their dtype).
And dropout on the attention weights, where torch has no fused kernel and falls back
to its reference maths, drawing the mask with ``bernoulli_`` (slow on the CPU) and checking
its masks on every call. There fp32/fp64 attention whose scores outgrow the caches takes
the queries a block at a time (:mod:`.attention_dropout`: nothing of ``[B, H, Lq, Lk]`` but
the mask is kept), the rest the same maths written out (:func:`attend_written_out`), the
masks drawn as every other dropout mask here
(:mod:`.dropout`); ``benchmarks/bench_attention_dropout.py`` times both against torch.
With ``rope_theta`` the queries and keys are rotated by their absolute positions (RoPE,
:mod:`.positional`; under a KV cache the new positions start at the cache's length), and
``output_gate`` multiplies the heads by the attention-output gate (:mod:`.output_gate`).
Oracles: :func:`.reference.multi_head_attention`, :func:`.reference.scaled_dot_attention`,
:func:`.reference.rotary_embedding`, :func:`.reference.attention_output_gate`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import ConfigError
from .attention_dropout import block_attention, takes_blocks
from .decoding import KVCache
from .dropout import dropout
from .output_gate import build_output_gate
from .positional import apply_rotary, rotary_angles

__all__ = ["KVCache", "MultiHeadAttention", "attend", "causal_mask"]


def causal_mask(n_queries: int, n_keys: int, device: torch.device) -> Tensor:
    """Boolean ``[Lq, Lk]`` mask, True where query i (the last ``Lq`` of ``Lk``) may attend."""
    offset = n_keys - n_queries
    queries = torch.arange(n_queries, device=device)[:, None] + offset
    return torch.arange(n_keys, device=device)[None, :] <= queries


def attend(  # noqa: PLR0913 - scaled_dot_product_attention's operands
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    is_causal: bool,
    dropout_p: float,
    scale: float | None = None,
) -> Tensor:
    """``softmax(scale · q kᵀ + mask)`` (``scale`` default ``1/√d_head``; a boolean ``mask``
    is True where a query may attend) with dropout ``dropout_p`` on the weights, times ``v``:
    :func:`~torch.nn.functional.scaled_dot_product_attention` itself, on fp32 copies for
    bf16/fp16 narrow heads on the CPU; for dropout on the CPU its maths written out (see the
    module's note)."""
    if dropout_p == 0.0 and runs_faster_in_fp32(q):
        return fused_in_fp32(q, k, v, mask, is_causal, scale)
    if dropout_p == 0.0 or q.device.type != "cpu":
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale
        )
    if takes_blocks(q, k):
        return block_attention(q, k, v, mask, is_causal, dropout_p, scale)
    return attend_written_out(q, k, v, mask, is_causal, dropout_p, scale)


#: Operand dtypes whose fused CPU attention may run faster on fp32 copies.
REDUCED_ON_CPU = (torch.bfloat16, torch.float16)
#: Up to this head width it does: torch's bf16 CPU flash attention (forward + backward) took
#: 1.3-4.3x the time of ours at d_head 16 and 2.5x at 32 (lengths 120-784, 1 thread, on a
#: CPU with AMX), while at 64 it was 0.9-1.7x and at 128 0.6x
#: (``benchmarks/bench_attention_precision.py``, docs/benchmarks.md).
MAX_FP32_HEAD_DIM = 32


def runs_faster_in_fp32(q: Tensor) -> bool:
    """Whether fused attention on these queries is faster on fp32 copies (CPU, bf16/fp16,
    narrow heads)."""
    return q.device.type == "cpu" and q.dtype in REDUCED_ON_CPU and q.shape[-1] <= MAX_FP32_HEAD_DIM


def fused_in_fp32(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool, scale: float | None
) -> Tensor:
    """Torch's fused attention on fp32 copies of ``q``, ``k``, ``v`` (and a float
    ``mask``), the result (and so the operands' gradients) in their own dtype: no dropout."""
    if mask is not None and mask.is_floating_point():
        mask = mask.float()
    with torch.autocast("cpu", enabled=False):  # CPU autocast would cast the copies back
        out = F.scaled_dot_product_attention(
            q.float(), k.float(), v.float(), attn_mask=mask, is_causal=is_causal, scale=scale
        )
    return out.to(q.dtype)


def attend_written_out(  # noqa: PLR0913 - scaled_dot_product_attention's operands
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    is_causal: bool,
    dropout_p: float,
    scale: float | None = None,
) -> Tensor:
    """:func:`attend`'s dropout maths on whole ``[..., Lq, Lk]`` tensors, the softmax in
    fp32: the CPU route where :func:`.attention_dropout.takes_blocks` says no."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = torch.matmul(q, k.transpose(-1, -2)).mul_(scale)
    if is_causal:
        mask = causal_mask(q.shape[-2], k.shape[-2], q.device)
    if mask is not None:  # every query keeps at least one key here: no row is all -inf
        # added, not filled: a broadcast add passes the gradient through as it is, where
        # masked_fill would take another pass over the scores' gradient
        blocked = torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device)
        scores.add_(blocked.masked_fill_(~mask, float("-inf")))
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(v.dtype)
    return torch.matmul(dropout(weights, dropout_p), v)


class MultiHeadAttention(nn.Module):
    """Multi-head dot-product self-attention, causal by default, with an optional KV cache.

    ``rope_theta``: rotary positions with this base (None: none); ``bias``: biases in the
    projections; ``output_gate``: ``none``, ``elementwise`` or ``headwise``.
    """

    def __init__(  # noqa: PLR0913 - the attention's settings
        self,
        d_model: int,
        n_heads: int,
        d_head: int | None = None,
        dropout_attn: float = 0.0,
        causal: bool = True,
        *,
        rope_theta: float | None = None,
        bias: bool = True,
        output_gate: str = "none",
    ) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.d_head = d_head if d_head is not None else d_model // n_heads
        self.causal = causal
        self.dropout_attn = dropout_attn
        if rope_theta is not None and self.d_head % 2:
            raise ConfigError(f"RoPE needs an even head size, got {self.d_head}; set d_head")
        self.rope_theta = rope_theta
        inner = n_heads * self.d_head
        self.qkv = nn.Linear(d_model, 3 * inner, bias=bias)
        self.out = nn.Linear(inner, d_model, bias=bias)
        self.output_gate = build_output_gate(output_gate, d_model, n_heads, self.d_head, bias)

    def forward(self, h: Tensor, cache: KVCache | None = None) -> Tensor:
        batch, length, _ = h.shape
        q, k, v = self._project(h, 0 if cache is None else cache.length)
        if cache is not None:
            k, v = cache.extend(k, v)
        mask, is_causal = None, False
        if self.causal:
            if k.shape[2] == length:
                is_causal = True
            elif length > 1:  # one new query may attend to every cached key: no mask
                mask = causal_mask(length, k.shape[2], h.device)
        dropout_p = self.dropout_attn if self.training else 0.0
        out = attend(q, k, v, mask, is_causal, dropout_p)
        heads = out.transpose(1, 2).reshape(batch, length, self.n_heads * self.d_head)
        if self.output_gate is not None:
            heads = self.output_gate(h, heads)
        return self.out(heads)

    def _project(self, h: Tensor, start: int) -> tuple[Tensor, Tensor, Tensor]:
        """``q, k, v [B, H, L, dh]`` of ``h``, queries and keys rotated from position
        ``start`` under RoPE."""
        batch, length, _ = h.shape
        # One product per third of the fused weight, each [B, L, H*dh] -> [B, H, L, dh]: the
        # same values as slicing one [B, L, 3*H*dh] product, but q, k and v come out as separate
        # tensors, so their gradients need no stacking copy and the CPU attention kernel reads
        # rows H*dh (not 3*H*dh) apart (T-L3 step at length 400: ~2% faster).
        weights = self.qkv.weight.chunk(3)
        biases = (None,) * 3 if self.qkv.bias is None else self.qkv.bias.chunk(3)
        q, k, v = (
            F.linear(h, w, b).view(batch, length, self.n_heads, self.d_head).transpose(1, 2)
            for w, b in zip(weights, biases, strict=True)
        )
        if self.rope_theta is not None:  # new positions follow the cached ones
            cos, sin = rotary_angles(start, length, self.d_head, self.rope_theta, q)
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        return q, k, v

    @torch.no_grad()
    def attention_weights(self, h: Tensor) -> Tensor:
        """``softmax(q kᵀ / √d_head)`` of ``h`` (no cache; causal where the layer is), fp32
        ``[B, H, L, L]``: what an analysis reads (the forward never forms it)."""
        q, k, _ = self._project(h, 0)
        scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) * self.d_head**-0.5
        if self.causal:
            length = h.shape[1]
            scores = scores.masked_fill(~causal_mask(length, length, h.device), float("-inf"))
        return scores.softmax(-1)
