"""The papers' equations, literally: slow, obviously-correct oracles for the fast modules.

Each function restates one group of equations in the papers' notation, to be read beside
the paper: plain autograd, no fused products, no hand-written backward, no layout tricks.
The fast modules of :mod:`highway_transformer.nn` name the function here that checks them;
``tests/nn/test_reference.py`` compares each pair in float64, and the other tests and the
benchmarks take their oracles from here.

Conventions:

* weights are in PyTorch's ``[out, in]`` layout, so a paper's ``x W + b`` is ``x @ W.T + b``;
* a boolean ``mask`` is True where a query may *not* attend (the Transformer-XL code's rule);
* the maths runs in the inputs' dtype: give float64 tensors for an oracle;
* nothing here imports the library's fast path.

Sources: Transformer-XL (Dai et al. 2019, §3.3; the code ``kimiyoung/transformer-xl``,
``pytorch/mem_transformer.py``), the Highway Transformer (Chai et al. 2020, "HT"), the
R-Transformer (Wang et al. 2019, "RT"; the code ``DSE-MSU/R-transformer``,
``models/RTransformer.py``), the Gated Transformer-XL (Parisotto et al. 2019, "GTrXL"),
relation-aware attention (Shaw et al. 2018), the Transformer (Vaswani et al. 2017), and the
modern baseline's parts: RMSNorm (Zhang & Sennrich 2019), RoPE (Su et al. 2021), SwiGLU
(Shazeer 2020) and the attention-output gate (Qiu et al. 2025, ``qiuzh20/gated_attention``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_NEG_INF = float("-inf")


def _linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x W + b`` with ``W`` stored ``[out, in]``."""
    out = x @ weight.T
    return out if bias is None else out + bias


def _future(q_len: int, k_len: int, device: torch.device | None = None) -> Tensor:
    """``[L, K]``, True for key ``j`` after query ``i`` (the last ``L`` of the ``K``)."""
    ones = torch.ones(q_len, k_len, dtype=torch.bool, device=device)
    return torch.triu(ones, diagonal=1 + k_len - q_len)


# --------------------------------------------------------------------------- position encodings


def absolute_sinusoid(positions: Tensor, d_model: int) -> Tensor:
    """HT eqs. 5-6 (Vaswani et al. §3.5), ``[N, D]`` for the float ``positions [N]``:
    ``PE(pos, 2i) = sin(pos / 10000^(2i/D))``, ``PE(pos, 2i+1) = cos(pos / 10000^(2i/D))``."""
    feature = torch.arange(d_model, dtype=positions.dtype, device=positions.device)
    two_i = feature - feature % 2  # features 2i and 2i+1 share one angle
    angle = positions[:, None] / 10000 ** (two_i / d_model)  # [N, D]
    return torch.where(feature % 2 == 0, torch.sin(angle), torch.cos(angle))


def split_sinusoid(pos_seq: Tensor, d_model: int) -> Tensor:
    """The Transformer-XL code's ``PositionalEmbedding``: ``[sin | cos]`` of
    ``pos_seq ⊗ inv_freq`` with ``inv_freq_i = 1 / 10000^(2i/D)``, ``[N, 2⌈D/2⌉]`` (the values
    of HT eqs. 5-6, features in another order)."""
    two_i = torch.arange(0, d_model, 2, dtype=pos_seq.dtype, device=pos_seq.device)
    inv_freq = 1 / (10000 ** (two_i / d_model))  # [⌈D/2⌉]
    angles = torch.outer(pos_seq, inv_freq)  # [N, ⌈D/2⌉]
    return torch.cat([angles.sin(), angles.cos()], dim=-1)


def relative_sinusoid(
    k_len: int,
    d_model: int,
    clamp_len: int = 0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | None = None,
) -> Tensor:
    """``R`` of Dai et al. §3.3 for the distances ``K-1 … 0`` (the code's ``pos_seq``),
    ``[K, D]``; distances beyond ``clamp_len`` use its encoding when ``clamp_len > 0`` (the
    code clamps only then)."""
    pos_seq = torch.arange(k_len - 1, -1, -1.0, dtype=dtype, device=device)  # [K]: K-1 … 0
    if clamp_len > 0:
        pos_seq = pos_seq.clamp(max=clamp_len)
    # An odd D gives D+1 features in the code (its r_net then fails); keep the first D.
    return split_sinusoid(pos_seq, d_model)[:, :d_model]


# --------------------------------------------------------------------------- dot-product attention


def scaled_dot_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    scale: float | None = None,
    keep: Tensor | None = None,
) -> Tensor:
    """HT eqs. 1-2 (Vaswani et al. eq. 1): ``softmax(scale · Q Kᵀ) V``, ``scale = 1/√d``.

    ``q [..., Lq, d]``, ``k`` / ``v [..., Lk, d]``; ``mask [Lq, Lk]`` hides keys (−∞ before
    the softmax); ``keep`` multiplies the weights (dropout: the kept mask over ``1 − p``).
    """
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = scale * (q @ k.transpose(-1, -2))  # [..., Lq, Lk]
    if mask is not None:
        scores = scores.masked_fill(mask, _NEG_INF)
    weights = torch.softmax(scores, dim=-1)
    if keep is not None:
        weights = weights * keep
    return weights @ v  # [..., Lq, d]


class AttentionWeights(NamedTuple):
    """Multi-head attention weights: ``[W^Q; W^K; W^V]`` stacked ``[3·H·dh, D]`` and ``W^O``."""

    w_qkv: Tensor
    b_qkv: Tensor | None
    w_o: Tensor
    b_o: Tensor | None


def attention_weights(qkv: nn.Linear, out: nn.Linear) -> AttentionWeights:
    """The weights of a module holding ``qkv`` and ``out`` projections."""
    return AttentionWeights(qkv.weight, qkv.bias, out.weight, out.bias)


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """``[B, L, H·dh] -> [B, H, L, dh]``."""
    bsz, length, _ = x.shape
    return x.view(bsz, length, n_heads, -1).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """``[B, H, L, dh] -> [B, L, H·dh]``: the heads concatenated."""
    bsz, _, length, _ = x.shape
    return x.transpose(1, 2).reshape(bsz, length, -1)


class OutputGateWeights(NamedTuple):
    """The attention-output gate (Qiu et al. 2025): ``W_θ [H·dh or H, D]``, its bias, and
    ``headwise`` (one scalar per head) or not (one per head feature)."""

    w: Tensor
    b: Tensor | None
    headwise: bool


def output_gate_weights(gate: nn.Module | None) -> OutputGateWeights | None:
    """The weights of an :class:`~highway_transformer.nn.output_gate.AttentionOutputGate`."""
    if gate is None:
        return None
    return OutputGateWeights(gate.proj.weight, gate.proj.bias, gate.granularity == "headwise")


def attention_output_gate(heads: Tensor, h: Tensor, gate: OutputGateWeights) -> Tensor:
    """Qiu et al. 2025, G1: ``Y' = Y ⊙ σ(X W_θ)``, ``heads [B, H, L, dh]`` the heads' outputs
    ``Y`` before ``W^O``, ``h [B, L, D]`` the sublayer's (normalised) input ``X``; headwise:
    one ``σ`` per head, broadcast over its features."""
    scores = _linear(h, gate.w, gate.b)  # [B, L, H·dh] or [B, L, H]
    # [B, H, L, 1] (one per head) or [B, H, L, dh] (one per feature)
    per_head = (
        scores.transpose(1, 2)[..., None] if gate.headwise else split_heads(scores, heads.shape[1])
    )
    return heads * torch.sigmoid(per_head)


def rotary_embedding(x: Tensor, positions: Tensor, base: float = 10000.0) -> Tensor:
    """RoPE (Su et al. 2021), rotate-half convention (Llama's and Qwen3's
    ``apply_rotary_pos_emb``): for ``x [..., L, d]`` at ``positions [L]``, feature pair
    ``(f, f + d/2)`` is rotated by ``θ = pos · base^(−2f/d)``, ``f < d/2``:
    ``x'_f = x_f cos θ − x_{f+d/2} sin θ``, ``x'_{f+d/2} = x_{f+d/2} cos θ + x_f sin θ``."""
    d = x.shape[-1]
    out = torch.empty_like(x)
    for f in range(d // 2):
        theta = positions.to(x.dtype) * base ** (-2 * f / d)  # [L]
        cos, sin = torch.cos(theta)[:, None], torch.sin(theta)[:, None]
        first, second = x[..., f : f + 1], x[..., f + d // 2 : f + d // 2 + 1]
        out[..., f : f + 1] = first * cos - second * sin
        out[..., f + d // 2 : f + d // 2 + 1] = second * cos + first * sin
    return out


def multi_head_attention(  # noqa: PLR0913 - the equations' operands
    x: Tensor,
    weights: AttentionWeights,
    n_heads: int,
    causal: bool = True,
    keep: Tensor | None = None,
    *,
    rope_base: float | None = None,
    gate: OutputGateWeights | None = None,
) -> Tensor:
    """HT eqs. 1-3 (Vaswani et al. §3.2.2): ``head_h = Attention(x W^Q_h, x W^K_h, x W^V_h)``,
    ``MultiHead(x) = Concat(head_1 … head_H) W^O``; ``[B, L, D] -> [B, L, D]``. ``causal``
    hides keys after the query (the RT code's ``MHPooling``, which fills −1e9 where this
    fills −∞: the same weights). ``rope_base``: queries and keys rotated by
    :func:`rotary_embedding` at positions ``0 … L-1``; ``gate``: each head multiplied by
    :func:`attention_output_gate` before ``W^O``."""
    q, k, v = _linear(x, weights.w_qkv, weights.b_qkv).chunk(3, dim=-1)  # each [B, L, H·dh]
    length = x.shape[1]
    mask = _future(length, length, x.device) if causal else None
    q, k, v = split_heads(q, n_heads), split_heads(k, n_heads), split_heads(v, n_heads)
    if rope_base is not None:
        positions = torch.arange(length, device=x.device)
        q, k = rotary_embedding(q, positions, rope_base), rotary_embedding(k, positions, rope_base)
    heads = scaled_dot_attention(q, k, v, mask, keep=keep)  # [B, H, L, dh]
    if gate is not None:
        heads = attention_output_gate(heads, x, gate)
    return _linear(merge_heads(heads), weights.w_o, weights.b_o)


# --------------------------------------------------------------------------- Transformer-XL


def xl_attention_mask(
    q_len: int,
    mem_len: int,
    same_length: bool = False,
    window: int | None = None,
    device: torch.device | None = None,
) -> Tensor:
    """The Transformer-XL code's ``dec_attn_mask`` (``MemTransformerLM._forward``), ``[L, M+L]``.

    Causal with memory: query ``i`` (position ``M+i``) sees keys ``j <= M+i``. With
    ``same_length`` the code's rule with its *configured* memory length ``W = window``
    (default: ``M``): ``mask_len = K − W``, ``mask_shift_len = L − mask_len`` if
    ``mask_len > 0`` else ``L``, and keys ``j <= i − mask_shift_len`` are hidden too.
    """
    k_len = mem_len + q_len
    all_ones = torch.ones(q_len, k_len, device=device)
    mask = torch.triu(all_ones, diagonal=1 + mem_len)  # future keys
    window = mem_len if window is None else window
    # W = 0 hides every key in the code (NaN weights); the library keeps the causal mask.
    if same_length and window > 0:
        mask_len = k_len - window
        mask_shift_len = q_len - mask_len if mask_len > 0 else q_len
        mask = mask + torch.tril(all_ones, diagonal=-mask_shift_len)  # keys before the window
    return mask.bool()


def rel_shift(x: Tensor) -> Tensor:
    """The Transformer-XL code's ``_rel_shift`` of ``x [L, K, ...]``: row ``i`` moves left by
    ``L-1-i``.

    Column ``c`` of ``x`` holds distance ``K-1-c``; afterwards entry ``(i, j)`` holds distance
    ``M+i-j`` (``M = K-L``) for every key ``j <= M+i``. The entries of future keys hold
    unrelated numbers (the next row's), which the causal mask hides.
    """
    q_len, k_len, *rest = x.shape
    zero_pad = x.new_zeros(q_len, 1, *rest)  # [L, 1, ...]
    x_padded = torch.cat([zero_pad, x], dim=1)  # [L, K+1, ...]: a zero column first
    x_padded = x_padded.view(k_len + 1, q_len, *rest)  # the same L·(K+1) numbers as [K+1, L, ...]
    return x_padded[1:].view_as(x)  # drop the first L numbers; the rest read as [L, K, ...]


def pair_position_keys(r_k: Tensor, q_len: int) -> Tensor:
    """``[L, K, ...]``: for query ``i`` and key ``j`` the row of ``r_k [K, ...]`` (distances
    ``K-1 … 0``) for the distance ``M+i-j``. Future keys (``M+i-j < 0``) have no distance;
    they read distance 0's row and are masked."""
    k_len = r_k.shape[0]
    i = torch.arange(q_len, device=r_k.device)[:, None]
    j = torch.arange(k_len, device=r_k.device)[None, :]
    distance = (k_len - q_len + i - j).clamp(min=0)  # [L, K]: M+i-j
    return r_k[k_len - 1 - distance]  # row K-1-δ holds distance δ


def rel_score_terms(
    q: Tensor, k: Tensor, r_pair: Tensor, u: Tensor, v: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The four terms of ``A^rel_ij`` (Dai et al. §3.3; HT eqs. 10-13), pair by pair.

    ``(a) q_iᵀ k_j`` content, ``(b) q_iᵀ W_kR R_{i-j}`` content-dependent position,
    ``(c) uᵀ k_j`` global content bias, ``(d) vᵀ W_kR R_{i-j}`` global position bias.
    ``q [L, B, H, dh]``, ``k [K, B, H, dh]``, ``r_pair [L, K, H, dh]`` the position key
    ``W_kR R`` of each pair's distance (:func:`pair_position_keys`), ``u`` / ``v [H, dh]``.
    Each term broadcasts to ``[L, K, B, H]``.
    """
    a = torch.einsum("ibnd,jbnd->ijbn", q, k)  # [L, K, B, H]
    b = torch.einsum("ibnd,ijnd->ijbn", q, r_pair)  # [L, K, B, H]
    c = torch.einsum("nd,jbnd->jbn", u, k)[None]  # [1, K, B, H]: the same for every query
    d = torch.einsum("nd,ijnd->ijn", v, r_pair)[:, :, None]  # [L, K, 1, H]: every batch row
    return a, b, c, d


def rel_scores(q_u: Tensor, q_v: Tensor, k: Tensor, r_k: Tensor) -> Tensor:
    """``A^rel`` as the Transformer-XL code groups it, ``[L, K, B, H]``, from the biased
    queries ``q_u = q + u`` and ``q_v = q + v`` (``[L, B, H, dh]``): ``AC = (q + u) kᵀ``
    (terms a + c) plus ``BD = rel_shift((q + v) (W_kR R)ᵀ)`` (terms b + d), the product taken
    over the position keys ``r_k [K, H, dh]`` of the distances ``K-1 … 0`` and shifted so that
    entry ``(i, j)`` reads distance ``M+i-j``."""
    ac = torch.einsum("ibnd,jbnd->ijbn", q_u, k)  # [L, K, B, H]
    bd = torch.einsum("ibnd,jnd->ijbn", q_v, r_k)  # [L, K, B, H], column c: distance K-1-c
    return ac + rel_shift(bd)


def rel_attend(
    scores: Tensor, value: Tensor, mask: Tensor | None, scale: float, keep: Tensor | None = None
) -> Tensor:
    """HT eq. 17: ``softmax_j(scale · A_ij)`` over the unmasked keys, times ``v_j``, in the
    Transformer-XL code's order (scale, mask, softmax, dropout ``keep``, value product).
    ``scores`` / ``keep [L, K, B, H]``, ``value [K, B, H, dh]``, ``mask [L, K]``; returns
    ``[L, B, H, dh]``."""
    scores = scores * scale
    if mask is not None:
        scores = scores.masked_fill(mask[:, :, None, None], _NEG_INF)
    prob = torch.softmax(scores, dim=1)  # over the keys j
    if keep is not None:
        prob = prob * keep
    return torch.einsum("ijbn,jbnd->ibnd", prob, value)


def rel_attention(
    q: Tensor,
    k: Tensor,
    value: Tensor,
    r_k: Tensor,
    u: Tensor,
    v: Tensor,
    mask: Tensor | None,
    scale: float,
    *,
    keep: Tensor | None = None,
    shift: bool = True,
) -> Tensor:
    """HT eqs. 10-17 for one layer's heads: :func:`rel_attend` of the scores ``A^rel``.

    Time-major, as the Transformer-XL code: ``q [L, B, H, dh]``, ``k`` / ``value [K, B, H, dh]``,
    ``r_k [K, H, dh]`` (``W_kR R``, distances ``K-1 … 0``), ``u`` / ``v [H, dh]``, ``mask
    [L, K]``, ``keep [L, K, B, H]`` (dropout on the weights); returns ``[L, B, H, dh]``.
    ``shift`` scores as the code does (:func:`rel_scores`); without it, term by term with
    each pair's distance (:func:`rel_score_terms`): the same numbers on the unmasked keys.
    """
    if shift:
        scores = rel_scores(q + u, q + v, k, r_k)
    else:
        a, b, c, d = rel_score_terms(q, k, pair_position_keys(r_k, q.shape[0]), u, v)
        scores = a + b + c + d
    return rel_attend(scores, value, mask, scale, keep)


class RelAttentionWeights(NamedTuple):
    """One relative attention layer: ``w_qkv [3·H·dh, D]`` (``W_q; W_k,E; W_v``, the code's
    ``qkv_net``), ``w_r [H·dh, D]`` (``W_k,R``, ``r_net``), ``w_o [D, H·dh]`` (``o_net``) and
    the biases ``u`` / ``v [H, dh]`` (``r_w_bias`` / ``r_r_bias``)."""

    w_qkv: Tensor
    w_r: Tensor
    w_o: Tensor
    u: Tensor
    v: Tensor

    def to(self, dtype: torch.dtype) -> RelAttentionWeights:
        """The same weights in ``dtype`` (differentiably)."""
        return RelAttentionWeights(*(w.to(dtype) for w in self))


def rel_attention_weights(
    module: nn.Module, u: Tensor | None = None, v: Tensor | None = None
) -> RelAttentionWeights:
    """The weights of a :class:`~highway_transformer.nn.relative.RelativeMultiHeadAttention`;
    ``u`` / ``v`` for a layer without its own (shared across layers)."""
    u = module.r_w_bias if u is None else u
    v = module.r_r_bias if v is None else v
    return RelAttentionWeights(module.qkv.weight, module.r_net.weight, module.out.weight, u, v)


def rel_multihead_attention(
    h: Tensor,
    memory: Tensor | None,
    weights: RelAttentionWeights,
    n_heads: int,
    *,
    clamp_len: int = 0,
    same_length: bool = False,
    window: int | None = None,
    shift: bool = True,
    gate: OutputGateWeights | None = None,
) -> Tensor:
    """One Transformer-XL attention sublayer (Dai et al. §3.3; HT eqs. 10-17): the code's
    ``RelPartialLearnableMultiHeadAttn`` without its residual and LayerNorm, batch-first.

    Queries from ``h [B, L, D]``, keys and values from ``[memory ∘ h]`` (``memory [B, M, D]``
    or None), ``R`` from :func:`relative_sinusoid`, the mask from :func:`xl_attention_mask`
    (``window``: the configured memory length of ``same_length``, default ``M``); ``gate``:
    :func:`attention_output_gate` of the heads before ``W_o``. Returns ``[B, L, D]``.
    """
    bsz, q_len, d_model = h.shape
    cat = h if memory is None else torch.cat([memory, h], dim=1)  # [B, K, D]
    k_len = cat.shape[1]
    w_q, w_k, w_v = weights.w_qkv.chunk(3, dim=0)  # each [H·dh, D]

    def heads(x: Tensor) -> Tensor:  # [B, N, H·dh] -> [N, B, H, dh], time-major as the code
        return x.transpose(0, 1).reshape(x.shape[1], bsz, n_heads, -1)

    q = heads(h @ w_q.T)  # [L, B, H, dh]: the segment's queries
    k, value = heads(cat @ w_k.T), heads(cat @ w_v.T)  # [K, B, H, dh]
    r = relative_sinusoid(k_len, d_model, clamp_len, h.dtype, h.device)  # [K, D]
    r_k = (r @ weights.w_r.T).view(k_len, n_heads, -1)  # [K, H, dh]: W_kR R
    mask = xl_attention_mask(q_len, k_len - q_len, same_length, window, h.device)
    scale = 1 / math.sqrt(q.shape[-1])
    out = rel_attention(q, k, value, r_k, weights.u, weights.v, mask, scale, shift=shift)
    if gate is not None:  # [L, B, H, dh] -> [B, H, L, dh] and back
        out = attention_output_gate(out.permute(1, 2, 0, 3), h, gate).permute(2, 0, 1, 3)
    out = out.reshape(q_len, bsz, -1).transpose(0, 1)  # [L, B, H, dh] -> [B, L, H·dh]
    return out @ weights.w_o.T


def xl_update_memory(mems: Sequence[Tensor], hids: Sequence[Tensor], mem_len: int) -> list[Tensor]:
    """The Transformer-XL code's ``_update_mems`` (``ext_len`` 0), time-major ``[M, B, D]``:
    per layer the last ``mem_len`` states of ``[old memory ∘ this segment's layer inputs]``,
    detached (the stop-gradient ``SG`` of HT eq. 10)."""
    new_mems = []
    for old, hid in zip(mems, hids, strict=True):
        cat = torch.cat([old, hid], dim=0)  # [M+L, B, D]
        end_idx = cat.shape[0]
        new_mems.append(cat[max(0, end_idx - mem_len) : end_idx].detach())
    return new_mems


# --------------------------------------------------------------------------- sublayers, norms


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    """LayerNorm (Ba et al. 2016) as :class:`torch.nn.LayerNorm`:
    ``g ⊙ (x − μ) / √(σ² + ε) + b`` with the biased variance over the last dimension."""
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def rt_layer_norm(x: Tensor, a_2: Tensor, b_2: Tensor, eps: float = 1e-6) -> Tensor:
    """The R-Transformer code's ``LayerNorm``: ``a_2 ⊙ (x − mean) / (std + ε) + b_2`` with the
    *unbiased* standard deviation, ε added to it rather than to the variance."""
    mean = x.mean(-1, keepdim=True)
    std = x.std(-1, keepdim=True)
    return a_2 * (x - mean) / (std + eps) + b_2


def rms_norm(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """RMSNorm (Zhang & Sennrich 2019): ``x / √(mean(x²) + ε) ⊙ g`` over the last dimension:
    no centring, no bias."""
    return x / torch.sqrt((x**2).mean(-1, keepdim=True) + eps) * weight


def position_wise_ff(
    x: Tensor, w1: Tensor, b1: Tensor | None, w2: Tensor, b2: Tensor | None
) -> Tensor:
    """HT eq. 8 (Vaswani et al. eq. 2): ``FFN(U) = max(0, U W1 + b1) W2 + b2``."""
    return _linear(torch.relu(_linear(x, w1, b1)), w2, b2)


def swiglu_ff(
    x: Tensor,
    w1: Tensor,
    w3: Tensor,
    w2: Tensor,
    biases: tuple[Tensor | None, Tensor | None, Tensor | None] = (None, None, None),
) -> Tensor:
    """SwiGLU (Shazeer 2020; Llama's ``MLP``): ``FFN(U) = (silu(U W1) ⊙ U W3) W2`` with
    ``silu(z) = z σ(z)``; ``biases`` ``(b1, b3, b2)`` where the layers have them."""
    b1, b3, b2 = biases
    gate = _linear(x, w1, b1)
    return _linear(gate * torch.sigmoid(gate) * _linear(x, w3, b3), w2, b2)


def residual(x: Tensor, y: Tensor) -> Tensor:
    """The plain residual ``x + y`` (HT eqs. 7 and 9)."""
    return x + y


Combine = Callable[[Tensor, Tensor], Tensor]


def post_ln_connection(
    x: Tensor,
    sublayer: Callable[..., Tensor],
    norm: Callable[[Tensor], Tensor],
    combine: Combine = residual,
    context: Tensor | None = None,
) -> Tensor:
    """Post-LN (HT eqs. 7 and 9, the Transformer's order): ``LN(combine(x, sublayer(x)))``.

    ``context`` (the XL memory) goes to the sublayer as it is; dropout on the sublayer
    output, if any, belongs to ``sublayer`` here.
    """
    y = sublayer(x) if context is None else sublayer(x, context)
    return norm(combine(x, y))


def pre_ln_connection(
    x: Tensor,
    sublayer: Callable[..., Tensor],
    norm: Callable[[Tensor], Tensor],
    combine: Combine = residual,
    context: Tensor | None = None,
) -> Tensor:
    """Pre-LN (identity-map order; the RT and XL codes' ``pre_lnorm``):
    ``combine(x, sublayer(LN(x)))``; ``context`` goes through the same LN, as the XL code
    normalises ``[memory ∘ h]``."""
    y = sublayer(norm(x)) if context is None else sublayer(norm(x), norm(context))
    return combine(x, y)


# --------------------------------------------------------------------------- Highway Transformer

PSI: dict[str, Callable[[Tensor], Tensor]] = {"sigmoid": torch.sigmoid, "tanh": torch.tanh}


def ht_gate_weights(gate: nn.Module) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``W1, b1, W2, b2`` of a fast HT gate, which stores ``[W1; W2]`` as one ``[2d, d]``
    Linear (``proj``)."""
    weight, bias = gate.proj.weight, gate.proj.bias
    d = weight.shape[1]
    return weight[:d], bias[:d], weight[d:], bias[d:]


def sdu_gate(
    x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor, psi: str = "sigmoid"
) -> Tensor:
    """The self-dependency unit (HT eqs. 21-23): the gate ``T(X) = Ψ(X W1 + b1)``, Ψ sigmoid
    or tanh, on the transform ``X W2 + b2``: ``SDU(X) = T(X) ⊙ (X W2 + b2)``."""
    gate = PSI[psi](_linear(x, w1, b1))
    return gate * _linear(x, w2, b2)


def sdu(
    x: Tensor, y: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor, psi: str = "sigmoid"
) -> Tensor:
    """HT eq. 24: the SDU beside the residual, ``x + y + Ψ(x W1 + b1) ⊙ (x W2 + b2)``, with
    ``y`` the sublayer output."""
    return x + y + sdu_gate(x, w1, b1, w2, b2, psi)


def highway_gate(x: Tensor, y: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> Tensor:
    """HT eqs. 26-29: transform gate ``T = σ(x W1 + b1)``, carry gate ``1 − T`` on the
    stream, beside the sublayer output: ``(1 − T) ⊙ x + T ⊙ (x W2 + b2) + y``."""
    t = torch.sigmoid(_linear(x, w1, b1))
    return (1 - t) * x + t * _linear(x, w2, b2) + y


def gated_sublayer(x: Tensor, y: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> Tensor:
    """HT eqs. 30-31 (gated MHDPA): the carry gate ``1 − T`` on the sublayer output,
    ``x + (1 − T) ⊙ y + T ⊙ (x W2 + b2)`` with ``T = σ(x W1 + b1)``."""
    t = torch.sigmoid(_linear(x, w1, b1))
    return x + (1 - t) * y + t * _linear(x, w2, b2)


# --------------------------------------------------------------------------- GTrXL gates
# ``y`` is the raw sublayer output; every gate reads ReLU(y) (GTrXL eq. 10). The matrices are
# bias-free, ``b_g`` a constant.


def gtrxl_input_gate(x: Tensor, y: Tensor, w_g: Tensor) -> Tensor:
    """GTrXL eq. 11 (gated input): ``σ(W_g x) ⊙ x + y``."""
    y = torch.relu(y)
    return torch.sigmoid(_linear(x, w_g)) * x + y


def gtrxl_output_gate(x: Tensor, y: Tensor, w_g: Tensor, b_g: float) -> Tensor:
    """GTrXL eq. 12 (gated output): ``x + σ(W_g x − b_g) ⊙ y``."""
    y = torch.relu(y)
    return x + torch.sigmoid(_linear(x, w_g) - b_g) * y


def gtrxl_highway_gate(x: Tensor, y: Tensor, w_g: Tensor, b_g: float) -> Tensor:
    """GTrXL eq. 13 (highway): ``σ(W_g x + b_g) ⊙ x + (1 − σ(W_g x + b_g)) ⊙ y``."""
    y = torch.relu(y)
    gate = torch.sigmoid(_linear(x, w_g) + b_g)
    return gate * x + (1 - gate) * y


def gtrxl_sigmoid_tanh_gate(x: Tensor, y: Tensor, w_g: Tensor, u_g: Tensor, b_g: float) -> Tensor:
    """GTrXL §3.2 (sigmoid-tanh): ``x + σ(W_g y − b_g) ⊙ tanh(U_g y)``."""
    y = torch.relu(y)
    return x + torch.sigmoid(_linear(y, w_g) - b_g) * torch.tanh(_linear(y, u_g))


def gtrxl_gru_gate(
    x: Tensor,
    y: Tensor,
    w_r: Tensor,
    u_r: Tensor,
    w_z: Tensor,
    u_z: Tensor,
    w_g: Tensor,
    u_g: Tensor,
    b_g: float,
) -> Tensor:
    """GTrXL eq. 14 (GRU-type): ``r = σ(W_r y + U_r x)``, ``z = σ(W_z y + U_z x − b_g)``,
    ``ĥ = tanh(W_g y + U_g (r ⊙ x))``, ``g = (1 − z) ⊙ x + z ⊙ ĥ``."""
    y = torch.relu(y)
    r = torch.sigmoid(_linear(y, w_r) + _linear(x, u_r))
    z = torch.sigmoid(_linear(y, w_z) + _linear(x, u_z) - b_g)
    h_hat = torch.tanh(_linear(y, w_g) + _linear(r * x, u_g))
    return (1 - z) * x + z * h_hat


# --------------------------------------------------------------------------- R-Transformer


class RNNWeights(NamedTuple):
    """One recurrent layer in PyTorch's layout: ``w_ih [G·d, D]``, ``w_hh [G·d, d]``,
    ``b_ih`` / ``b_hh [G·d]``, gates stacked in PyTorch's order (GRU ``r, z, n``; LSTM
    ``i, f, g, o``; vanilla RNN one block)."""

    w_ih: Tensor
    w_hh: Tensor
    b_ih: Tensor
    b_hh: Tensor


def rnn_weights(rnn: nn.RNNBase) -> RNNWeights:
    """The (first layer's) weights of ``nn.RNN`` / ``nn.GRU`` / ``nn.LSTM``."""
    return RNNWeights(rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0)


def rnn_cell(x: Tensor, h: Tensor, w: RNNWeights) -> Tensor:
    """Elman RNN (``nn.RNN``, tanh): ``h' = tanh(W_ih x + b_ih + W_hh h + b_hh)``."""
    return torch.tanh(_linear(x, w.w_ih, w.b_ih) + _linear(h, w.w_hh, w.b_hh))


def gru_cell(x: Tensor, h: Tensor, w: RNNWeights) -> Tensor:
    """GRU as ``nn.GRU``: ``r, z = σ(W_i· x + b_i· + W_h· h + b_h·)``,
    ``n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))``, ``h' = (1 − z) ⊙ n + z ⊙ h``."""
    x_r, x_z, x_n = _linear(x, w.w_ih, w.b_ih).chunk(3, dim=-1)  # each [B, d]
    h_r, h_z, h_n = _linear(h, w.w_hh, w.b_hh).chunk(3, dim=-1)
    r = torch.sigmoid(x_r + h_r)
    z = torch.sigmoid(x_z + h_z)
    n = torch.tanh(x_n + r * h_n)
    return (1 - z) * n + z * h


def lstm_cell(x: Tensor, h: Tensor, c: Tensor, w: RNNWeights) -> tuple[Tensor, Tensor]:
    """LSTM as ``nn.LSTM``: ``i, f, o = σ(·)``, ``g = tanh(·)`` of ``W_i· x + b_i· + W_h· h +
    b_h·``; ``c' = f ⊙ c + i ⊙ g``, ``h' = o ⊙ tanh(c')``."""
    pre = _linear(x, w.w_ih, w.b_ih) + _linear(h, w.w_hh, w.b_hh)  # [B, 4d]
    i, f, g, o = pre.chunk(4, dim=-1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def _cell_step(
    cell: str, x: Tensor, h: Tensor, c: Tensor | None, w: RNNWeights
) -> tuple[Tensor, Tensor | None]:
    if cell == "lstm":
        assert c is not None
        return lstm_cell(x, h, c, w)
    return (gru_cell if cell == "gru" else rnn_cell)(x, h, w), None


def local_rnn(
    x: Tensor, cell: str, weights: RNNWeights, window: int, history: Tensor | None = None
) -> Tensor:
    """RT eq. 2 (§3.1): ``h_t = RNN(x_{t-k+1}, …, x_t)`` from a zero state, for every ``t``.

    A plain loop over the positions and the ``k = window`` steps of each window, ``cell``
    (``rnn`` | ``gru`` | ``lstm``) written out above. Inputs before the start are zeros, or
    the ``k−1`` inputs of ``history [B, k−1, D]`` (a chunk of a longer sequence, as in
    incremental decoding). ``[B, L, D] -> [B, L, d]``.
    """
    bsz, length, d_in = x.shape
    before = x.new_zeros(bsz, window - 1, d_in) if history is None else history
    padded = torch.cat([before, x], dim=1)  # [B, k−1+L, D]: x_t is padded[:, t+k−1]
    d_hidden = weights.w_hh.shape[1]
    outputs = []
    for t in range(length):
        h = x.new_zeros(bsz, d_hidden)  # every window starts from a zero state
        c = x.new_zeros(bsz, d_hidden) if cell == "lstm" else None
        for s in range(window):  # x_{t−k+1+s}, oldest first
            h, c = _cell_step(cell, padded[:, t + s], h, c, weights)
        outputs.append(h)  # the window's last hidden state
    return torch.stack(outputs, dim=1)  # [B, L, d]


def local_rnn_windows(rnn: nn.RNNBase, x: Tensor, window: int) -> Tensor:
    """RT eq. 2 as the RT code runs it (``LocalRNN.get_K`` and ``forward``): every zero-padded
    window, ``[B·L, k, D]``, through the module ``rnn`` itself from a zero state; the last
    output of each. ``[B, L, D] -> [B, L, d]``."""
    batch, length, d = x.shape
    padded = F.pad(x, (0, 0, window - 1, 0))  # [B, k−1+L, D]: zeros before the start
    windows = padded.unfold(1, window, 1)  # [B, L, D, k]: window t is padded[:, t : t+k]
    windows = windows.permute(0, 1, 3, 2).reshape(batch * length, window, d)  # [B·L, k, D]
    out, _ = rnn(windows)  # [B·L, k, d]
    return out[:, -1].reshape(batch, length, -1)  # [B, L, d]


def r_transformer_block(
    x: Tensor,
    window: int,
    norms: Sequence[tuple[Tensor, Tensor]],
    rnns: Sequence[nn.RNNBase],
    attention: AttentionWeights,
    n_heads: int,
    ffn: tuple[Tensor, Tensor, Tensor, Tensor],
) -> Tensor:
    """An R-Transformer block as the RT code computes it (``Block.forward``, dropout 0):
    ``N`` LocalRNN sublayers (RT eqs. 2-4), causal multi-head attention (``MHPooling``, RT
    eqs. 5-6) and the FFN (RT eqs. 7-8), each as ``x + sublayer(LN(x))`` with the code's
    LayerNorm (``norms``: one ``(a_2, b_2)`` per sublayer, in order). The paper writes the
    connections post-LN; its code, which this follows, normalises first."""
    *rnn_norms, attn_norm, ffn_norm = norms

    def norm(pair: tuple[Tensor, Tensor]) -> Callable[[Tensor], Tensor]:
        return lambda y: rt_layer_norm(y, *pair)

    for pair, rnn in zip(rnn_norms, rnns, strict=True):
        x = pre_ln_connection(x, lambda y, rnn=rnn: local_rnn_windows(rnn, y, window), norm(pair))
    x = pre_ln_connection(x, lambda y: multi_head_attention(y, attention, n_heads), norm(attn_norm))
    return pre_ln_connection(x, lambda y: position_wise_ff(y, *ffn), norm(ffn_norm))


# --------------------------------------------------------------------------- Shaw et al. 2018


def shaw_edge_tables(rel_k: Tensor, rel_v: Tensor, length: int, clip: int) -> tuple[Tensor, Tensor]:
    """Shaw §3.2: ``a^K_ij = w^K_clip(j−i, k)`` and ``a^V_ij = w^V_clip(j−i, k)`` with
    ``clip(x, k) = max(−k, min(k, x))``, built entry by entry: two ``[L, L, d_head]`` tables.
    Row ``r`` of ``rel_k`` / ``rel_v [2k+1, d_head]`` holds distance ``r − k``."""
    rows_k, rows_v = [], []
    for i in range(length):
        for j in range(length):
            r = max(-clip, min(clip, j - i)) + clip
            rows_k.append(rel_k[r])
            rows_v.append(rel_v[r])
    shape = (length, length, rel_k.shape[-1])
    return torch.stack(rows_k).view(shape), torch.stack(rows_v).view(shape)


def shaw_attention(
    q: Tensor, k: Tensor, v: Tensor, a_k: Tensor, a_v: Tensor, causal: bool
) -> Tensor:
    """Shaw eqs. 2-4 with the edge vectors materialised: ``e_ij = q_i · (k_j + a^K_ij) / √d``,
    ``α_ij = softmax_j(e_ij)``, ``z_i = Σ_j α_ij (v_j + a^V_ij)``.

    ``q`` / ``k`` / ``v [B, H, L, d]``, ``a_k`` / ``a_v [L, L, d]``; ``causal`` hides keys
    ``j > i``. Returns ``z [B, H, L, d]``.
    """
    length, d_head = q.shape[-2], q.shape[-1]
    q = q * (1.0 / math.sqrt(d_head))  # eq. 4's 1/√d on the queries: the same e_ij
    keys = k[:, :, None, :, :] + a_k  # [B, H, L(i), L(j), d]: k_j + a^K_ij
    values = v[:, :, None, :, :] + a_v  # [B, H, L(i), L(j), d]: v_j + a^V_ij
    e = torch.einsum("bhid,bhijd->bhij", q, keys)  # [B, H, L, L]
    if causal:
        e = e.masked_fill(_future(length, length, q.device), _NEG_INF)
    alpha = torch.softmax(e, dim=-1)
    return torch.einsum("bhij,bhijd->bhid", alpha, values)


def shaw_multihead_attention(
    h: Tensor,
    weights: AttentionWeights,
    rel_k: Tensor,
    rel_v: Tensor,
    n_heads: int,
    clip: int,
    causal: bool = True,
    gate: OutputGateWeights | None = None,
) -> Tensor:
    """Multi-head relation-aware self-attention (Shaw eqs. 2-4, the edge tables shared by the
    heads), ``[B, L, D] -> [B, L, D]``; ``gate``: :func:`attention_output_gate` before
    ``W^O``."""
    q, k, v = _linear(h, weights.w_qkv, weights.b_qkv).chunk(3, dim=-1)  # each [B, L, H·dh]
    a_k, a_v = shaw_edge_tables(rel_k, rel_v, h.shape[1], clip)
    z = shaw_attention(
        split_heads(q, n_heads), split_heads(k, n_heads), split_heads(v, n_heads), a_k, a_v, causal
    )  # [B, H, L, dh]
    if gate is not None:
        z = attention_output_gate(z, h, gate)
    return _linear(merge_heads(z), weights.w_o, weights.b_o)


# --------------------------------------------------------------------------- episodic memory (RL)


def episodic_attention(
    h: Tensor, memory: Tensor, valid: Tensor, weights: AttentionWeights, n_heads: int
) -> Tensor:
    """One step of CleanRL ``ppo_trxl``'s memory attention: the query ``h [B, 1, D]`` attends
    to its episode's memory ``[B, M, D]`` (the slots where ``valid [B, M]``) and to itself;
    queries from ``h`` alone, keys and values from ``[memory; h]``."""
    q = _linear(h, *weights[:2])[..., : weights.w_qkv.shape[0] // 3]
    source = torch.cat([memory, h], dim=1)
    _, k, v = _linear(source, weights.w_qkv, weights.b_qkv).chunk(3, dim=-1)
    itself = torch.ones(valid.shape[0], 1, dtype=torch.bool, device=valid.device)
    hidden = ~torch.cat([valid, itself], dim=1)  # [B, M + 1]: True where a key is hidden
    heads = scaled_dot_attention(
        split_heads(q, n_heads), split_heads(k, n_heads), split_heads(v, n_heads),
        hidden[:, None, None, :],
    )  # fmt: skip
    return _linear(merge_heads(heads), weights.w_o, weights.b_o)


# --------------------------------------------------------------------------- PPO (RL)
# Schulman et al. 2016 (GAE, eq. 16) and 2017 (PPO, eqs. 7 and 9), as CleanRL's ppo_trxl.


def gae(
    rewards: Tensor, values: Tensor, dones: Tensor, last_value: Tensor, gamma: float, lam: float
) -> tuple[Tensor, Tensor]:
    """Advantages and returns of a rollout ``[T, N]`` (time-major), literally:
    ``δ_t = r_t + γ (1 - d_t) V_{t+1} - V_t``, ``A_t = δ_t + γ λ (1 - d_t) A_{t+1}``, where
    ``d_t`` says the episode ended with step ``t`` and ``V_T`` is ``last_value [N]``;
    returns ``A + V``."""
    steps, envs = rewards.shape
    advantages = torch.zeros_like(rewards)
    for n in range(envs):
        following = 0.0
        for t in reversed(range(steps)):
            next_value = last_value[n] if t == steps - 1 else values[t + 1, n]
            alive = 1.0 - dones[t, n]
            delta = rewards[t, n] + gamma * alive * next_value - values[t, n]
            following = delta + gamma * lam * alive * following
            advantages[t, n] = following
    return advantages, advantages + values


def ppo_loss(  # noqa: PLR0913 - the objective's terms
    new_logprob: Tensor,
    old_logprob: Tensor,
    advantages: Tensor,
    new_value: Tensor,
    old_value: Tensor,
    returns: Tensor,
    entropy: Tensor,
    clip: float,
    vf_coef: float,
    ent_coef: float,
    clip_vloss: bool = True,
    norm_adv: bool = True,
) -> Tensor:
    """PPO's loss over a minibatch of samples ``[B]``, one sample at a time:
    ``-min(ρ A, clip(ρ, 1 - ε, 1 + ε) A)`` with ``ρ = exp(log π - log π_old)``; the value loss
    ``½ max((V - R)², (V_old + clip(V - V_old, -ε, ε) - R)²)`` (``½ (V - R)²`` without
    clipping); the mean policy loss + ``vf_coef`` x mean value loss - ``ent_coef`` x mean
    entropy. ``norm_adv``: advantages standardised over the minibatch (unbiased std, + 1e-8)."""
    count = advantages.shape[0]
    if norm_adv:
        mean = sum(advantages[i] for i in range(count)) / count
        var = sum((advantages[i] - mean) ** 2 for i in range(count)) / (count - 1)
        advantages = torch.stack(
            [(advantages[i] - mean) / (var.sqrt() + 1e-8) for i in range(count)]
        )
    policy, value, bonus = 0.0, 0.0, 0.0
    for i in range(count):
        ratio = torch.exp(new_logprob[i] - old_logprob[i])
        clipped = torch.clamp(ratio, 1 - clip, 1 + clip)
        policy = policy + torch.maximum(-advantages[i] * ratio, -advantages[i] * clipped)
        plain = (new_value[i] - returns[i]) ** 2
        if clip_vloss:
            moved = old_value[i] + torch.clamp(new_value[i] - old_value[i], -clip, clip)
            plain = torch.maximum(plain, (moved - returns[i]) ** 2)
        value = value + 0.5 * plain
        bonus = bonus + entropy[i]
    return (policy + vf_coef * value - ent_coef * bonus) / count
