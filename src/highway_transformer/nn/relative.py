"""Transformer-XL relative multi-head attention (Dai et al., 2019, §3.3; HT eqs. 10-17).

Query ``i`` of the segment (length ``L``) and key ``j`` of ``[memory ∘ h]`` (``M`` memory
positions, ``K = M + L`` keys), one head::

    A_ij = (q_i + u)ᵀ k_j  +  (q_i + v)ᵀ W_kR R_{M+i-j}
           AC: terms (a)+(c)   BD: terms (b)+(d)

    out_i = Σ_j softmax_j(A_ij / √d_head) v_j   (HT eq. 17), then the output projection

``R``: the sinusoid of the distance, ``[sin | cos]``; ``W_kR``: ``r_net``; ``u`` / ``v``:
``r_w_bias`` / ``r_r_bias``. ``BD`` is computed for the distances ``K-1 … 0`` and aligned by
:func:`rel_shift`. Reference code: ``pytorch/mem_transformer.py``,
``RelPartialLearnableMultiHeadAttn.forward`` and ``_rel_shift``. Shapes: ``h [B, L, D]``,
``memory [B, M, D]`` -> ``[B, L, D]``.

Oracle: :func:`.reference.rel_multihead_attention` (terms :func:`.reference.rel_score_terms`,
mask :func:`.reference.xl_attention_mask`, ``R`` :func:`.reference.relative_sinusoid`); the
fast kernel: :func:`.kernels.relative_attention`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..config.names import ATTENTION_KERNELS
from ..errors import ConfigError, unknown_choice
from . import kernels
from .decoding import DistanceTable, KVCache
from .dropout import Dropout, dropout
from .output_gate import build_output_gate
from .positional import encoding_dtype, sinusoid


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
    q_len: int,
    mem_len: int,
    *,
    same_length: bool = False,
    window: int | None = None,
    device: torch.device | None = None,
) -> Tensor:
    """Boolean mask ``[L, M+L]``, ``True`` where query ``i`` may *not* attend to key ``j``.

    Causal: query ``i`` (absolute position ``M+i``, ``M = mem_len`` keys of memory held)
    sees keys ``j <= M+i``. With ``same_length``, the reference code's rule with its
    *configured* memory length ``W = window`` (default: the memory held):
    ``mask_len = K - W``; ``mask_shift_len = L - mask_len`` if ``mask_len > 0`` else ``L``;
    keys ``j <= i - mask_shift_len`` are masked too. That is: every query sees the keys at
    distances ``0 … W-1`` only, also while the memory is still filling (``M < W``). With
    ``W = 0`` the window would be empty (the reference code gives NaN), so the mask stays
    causal.
    """
    k_len = mem_len + q_len
    ones = torch.ones(q_len, k_len, dtype=torch.bool, device=device)
    mask = torch.triu(ones, diagonal=1 + mem_len)
    window = mem_len if window is None else window
    if same_length and window > 0:
        mask_len = k_len - window
        mask_shift_len = q_len - mask_len if mask_len > 0 else q_len
        mask = mask | torch.tril(ones, diagonal=-mask_shift_len)
    return mask


@dataclass(frozen=True)
class RelativeInputs:
    """What every layer of one forward pass shares (reference ``MemTransformerLM._forward``).

    ``r`` is the sinusoid ``R`` of the distances ``K-1 … 0`` (``[K, D]``, clamped, dropped
    out once per pass), ``mask`` the ``[L, K]`` attention mask (``None`` when it masks
    nothing: one query over a plain memory), ``u`` / ``v`` the global biases when shared
    across layers (``None``: each layer's own), ``clamp_len`` the clamping ``r`` was made
    with and ``distances`` (decoding) the table ``r`` is a slice of, which may hold rows of
    distances beyond ``K`` already (decoding caches key their rows on ``clamp_len`` and
    project ahead as far as ``distances`` goes).
    """

    r: Tensor
    mask: Tensor | None
    u: Tensor | None = None
    v: Tensor | None = None
    clamp_len: int = 0
    distances: DistanceTable | None = None


def distance_rows(lo: int, hi: int, d_model: int, clamp_len: int, like: Tensor) -> Tensor:
    """``R`` for the distances ``hi-1 … lo``, ``[hi-lo, D]``, laid out ``[sin | cos]`` as in
    the reference code; distances beyond ``clamp_len`` use its encoding when ``clamp_len > 0``."""
    dtype = encoding_dtype(like)
    pos = torch.arange(hi - 1, lo - 1, -1, device=like.device, dtype=dtype)
    if clamp_len > 0:
        pos = pos.clamp(max=clamp_len)
    return sinusoid(pos, d_model, split=True, dtype=dtype).to(like.dtype)


def distance_encoding(k_len: int, d_model: int, clamp_len: int, like: Tensor) -> Tensor:
    """``R`` for the distances ``K-1 … 0``, ``[K, D]`` (see :func:`distance_rows`)."""
    return distance_rows(0, k_len, d_model, clamp_len, like)


def masks_nothing(q_len: int, mem_len: int, same_length: bool, window: int) -> bool:
    """True when :func:`relative_attention_mask` would mask no key: one query (the newest
    position) over its memory, unless ``same_length`` cuts the memory to the window."""
    return q_len == 1 and not (same_length and 0 < window < mem_len + 1)


def _check_clamp_len(clamp_len: int) -> None:
    if isinstance(clamp_len, bool) or not isinstance(clamp_len, int):
        raise ConfigError(f"clamp_len must be an integer (<= 0: no clamping); got {clamp_len!r}")


def uv_biases(
    n_heads: int, d_head: int, here: bool
) -> tuple[nn.Parameter | None, nn.Parameter | None]:
    """Transformer-XL's ``u`` and ``v`` (the code's ``r_w_bias``, ``r_r_bias``), one vector per
    head, uninitialised; ``(None, None)`` where another module holds them (``here`` False)."""
    if not here:
        return None, None
    return nn.Parameter(torch.empty(n_heads, d_head)), nn.Parameter(torch.empty(n_heads, d_head))


def reset_uv_biases(*biases: nn.Parameter | None) -> None:
    """``u`` and ``v`` from N(0, 0.02), as the reference code initialises them."""
    for bias in biases:
        if bias is not None:
            nn.init.normal_(bias, std=0.02)


class RelativePositions(nn.Module):
    """The model-level part of Transformer-XL attention: ``R``, the mask, shared ``u`` / ``v``.

    As in the reference code, ``R`` is computed once per forward pass and dropped out
    (``dropout``, the reference's ``self.drop(pos_emb)``) with one mask shared by every
    layer; ``u`` and ``v`` are one pair for all layers unless ``shared_biases`` is False
    (the reference's ``untie_r``), in which case each attention layer holds its own.
    """

    def __init__(
        self, d_model: int, n_heads: int, d_head: int, dropout: float, shared_biases: bool
    ) -> None:
        super().__init__()
        self.d_model = d_model
        self.dropout = Dropout(dropout)
        self.r_w_bias, self.r_r_bias = uv_biases(n_heads, d_head, shared_biases)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_uv_biases(self.r_w_bias, self.r_r_bias)

    def forward(
        self,
        q_len: int,
        mem_len: int,
        like: Tensor,
        *,
        clamp_len: int = 0,
        same_length: bool = False,
        window: int | None = None,
        table: DistanceTable | None = None,
    ) -> RelativeInputs:
        """Inputs for ``q_len`` queries over ``mem_len`` memory keys; ``window`` is the
        configured memory length for ``same_length`` (see :func:`relative_attention_mask`).
        ``table`` (incremental decoding, evaluation mode) keeps the rows of ``R`` already
        computed, so a step computes the encodings of its new distances only."""
        _check_clamp_len(clamp_len)
        k_len = mem_len + q_len
        if table is not None and not self.training:  # no dropout: the rows are fixed
            r = table.rows(
                k_len,
                lambda lo, hi: distance_rows(lo, hi, self.d_model, clamp_len, like),
                key=(clamp_len, like.dtype, like.device),
                ahead=2 * k_len,  # a decoder grows K by one per token
            )
        else:
            table = None
            r = self.dropout(distance_encoding(k_len, self.d_model, clamp_len, like))
        window = mem_len if window is None else window
        mask = None
        if not masks_nothing(q_len, mem_len, same_length, window):
            mask = relative_attention_mask(
                q_len, mem_len, same_length=same_length, window=window, device=like.device
            )
        return RelativeInputs(r, mask, self.r_w_bias, self.r_r_bias, clamp_len, table)


class PositionKeys(DistanceTable):
    """Decoding cache of the position keys ``W_kR R`` of one layer, ``[K, H·dh]`` for the
    distances ``K-1 … 0``: each step projects only the distances it has not seen."""

    def get(self, relative: RelativeInputs, project: nn.Module, dtype: torch.dtype) -> Tensor:
        """Position keys for the distances of ``relative.r`` (``[K, D]``, distances
        ``K-1 … 0``); as far ahead as the model's distance table goes, when it has one."""
        k_len = relative.r.shape[0]
        key = (relative.clamp_len, dtype, relative.r.device)
        table = relative.distances
        if table is None:
            r = relative.r.to(dtype)
            return self.rows(k_len, lambda lo, hi: project(r[k_len - hi : k_len - lo]), key)
        return self.rows(
            k_len, lambda lo, hi: project(table.span(lo, hi).to(dtype)), key, ahead=table.held
        )


class RelativeMultiHeadAttention(nn.Module):
    """Transformer-XL relative multi-head attention sublayer (Dai et al., 2019; HT eqs. 10-17).

    No residual, LayerNorm or output dropout: the library's connection adds those.

    Args:
        d_model: width ``D`` of the input and output.
        n_heads: number of heads ``H``.
        d_head: width of each head; scores are scaled by ``1/√d_head``.
        dropout_attn: dropout on the attention weights (training mode only).
        own_biases: hold this layer's own ``u`` / ``v``; without them the biases come with
            the :class:`RelativeInputs` of each call (shared across layers, the reference
            code's default).
        kernel: what computes scores, softmax and the value product: ``core``
            (:mod:`.kernels.relative_core`), ``fused`` (the Triton kernel,
            :mod:`.kernels.relative_triton`) or ``auto`` (the core until the kernel is
            verified on a GPU; see :func:`.kernels.attention_function`).
        output_gate: ``none``, or the attention-output gate (:mod:`.output_gate`) applied
            to the heads before the output projection: ``elementwise`` or ``headwise``.
        gate_bias: whether that gate's projection has a bias.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_head: int,
        dropout_attn: float = 0.0,
        own_biases: bool = True,
        kernel: str = "auto",
        output_gate: str = "none",
        gate_bias: bool = True,
    ) -> None:
        super().__init__()
        for name, value in (("d_model", d_model), ("n_heads", n_heads), ("d_head", d_head)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if not 0.0 <= float(dropout_attn) < 1.0:
            raise ConfigError(f"dropout_attn must be in [0, 1), got {dropout_attn!r}")
        self.d_model = d_model
        self.n_heads = n_heads
        self.d_head = d_head
        if kernel not in ATTENTION_KERNELS:
            raise unknown_choice("attention kernel", kernel, ATTENTION_KERNELS)
        self.dropout_attn = float(dropout_attn)
        self.kernel = kernel
        inner = n_heads * d_head
        self.qkv = nn.Linear(d_model, 3 * inner, bias=False)
        self.r_net = nn.Linear(d_model, inner, bias=False)  # W_kR
        self.out = nn.Linear(inner, d_model, bias=False)
        self.r_w_bias, self.r_r_bias = uv_biases(n_heads, d_head, own_biases)
        self.output_gate = build_output_gate(output_gate, d_model, n_heads, d_head, gate_bias)
        self.reset_biases()

    def reset_biases(self) -> None:
        reset_uv_biases(self.r_w_bias, self.r_r_bias)

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, n_heads={self.n_heads}, d_head={self.d_head}, "
            f"dropout_attn={self.dropout_attn}, own_biases={self.r_w_bias is not None}"
        )

    def _check(self, h: Tensor, memory: Tensor | None) -> None:
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

    def _biases(self, relative: RelativeInputs, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        u = relative.u if self.r_w_bias is None else self.r_w_bias
        v = relative.v if self.r_r_bias is None else self.r_r_bias
        if u is None or v is None:
            raise ConfigError(
                "this attention layer has no u/v biases of its own; pass shared ones in "
                "RelativeInputs (RelativePositions(shared_biases=True)) or build it with "
                "own_biases=True"
            )
        return u.to(dtype), v.to(dtype)

    def _inputs(
        self,
        h: Tensor,
        mem_len: int,
        clamp_len: int,
        same_length: bool,
        relative: RelativeInputs | None,
    ) -> RelativeInputs:
        """``relative``, or ``R`` and the mask made here; checked against ``K = M + L`` keys."""
        q_len = h.shape[1]
        if relative is None:
            _check_clamp_len(clamp_len)
            relative = RelativeInputs(
                distance_encoding(mem_len + q_len, self.d_model, clamp_len, h),
                relative_attention_mask(q_len, mem_len, same_length=same_length, device=h.device),
            )
        k_len = mem_len + q_len
        mask_shape = (q_len, k_len) if relative.mask is None else tuple(relative.mask.shape)
        if mask_shape != (q_len, k_len) or relative.r.shape[0] != k_len:
            raise ConfigError(
                f"relative inputs are for {relative.r.shape[0]} keys but the layer has {k_len}"
            )
        return relative

    def forward(
        self,
        h: Tensor,
        memory: Tensor | None = None,
        *,
        clamp_len: int = 0,
        same_length: bool = False,
        relative: RelativeInputs | None = None,
        cache: dict | None = None,
    ) -> Tensor:
        """Attend from ``h [B, L, D]`` over ``[memory ∘ h]`` (``memory [B, M, D]`` or None).

        ``relative`` carries ``R``, the mask and shared biases computed once per pass by the
        model (:class:`RelativePositions`); without it they are computed here from
        ``clamp_len`` (``<= 0``: no clamping) and ``same_length`` (window: the memory held).
        Returns ``[B, L, D]``. Gradients flow into ``memory`` if it requires them; stopping
        them (SG in Transformer-XL) is the caller's business. ``cache`` (incremental decoding
        in evaluation mode, one dict per layer) keeps the keys/values of the positions seen
        and the position keys, so a new token projects only itself: the cost of a KV cache.
        """
        self._check(h, memory)
        bsz, q_len, _ = h.shape
        mem_len = 0 if memory is None else memory.shape[1]
        relative = self._inputs(h, mem_len, clamp_len, same_length, relative)
        n_h, d_h = self.n_heads, self.d_head

        # Projections (HT eqs. 13-16): q from the segment, k and v from [memory ∘ h], the
        # position keys r_k = W_kR R for the distances K-1 … 0.
        q = F.linear(h, self.qkv.weight[: n_h * d_h]).view(bsz, q_len, n_h, d_h)  # [B, L, H, dh]
        if cache is None:
            cat = h if memory is None or mem_len == 0 else torch.cat([memory.to(h.dtype), h], 1)
            k, v = self._keys_values(cat)  # [B, H, K, dh]
            r_k = self.r_net(relative.r.to(q.dtype))  # [K, H·dh]
        else:
            k, v = self._cached_keys_values(h, memory, cache)
            r_k = cache.setdefault("positions", PositionKeys()).get(relative, self.r_net, q.dtype)
        r_w_bias, r_r_bias = self._biases(relative, q.dtype)  # u, v of the paper: [H, dh]
        scale = 1.0 / math.sqrt(d_h)
        p_attn = self.dropout_attn if self.training else 0.0

        if kernels.fast_path():  # the same maths, fused: nn/kernels/relative_core.py, _triton.py
            attn = kernels.relative_attention(
                self.kernel,
                ac_query=(q + r_w_bias).permute(2, 0, 1, 3),  # [H, B, L, dh]
                bd_query=(q + r_r_bias).permute(2, 0, 1, 3),
                k=k,
                values=v,
                position_keys=r_k,
                mask=relative.mask,
                scale=scale,
                dropout=p_attn,
            )  # [B, L, H·dh]
            return self.out(self._gate_output(h, attn))

        # A_ij = (q_i + u)ᵀ k_j + (q_i + v)ᵀ W_kR R_{M+i-j}: terms (a)+(c) and (b)+(d), the
        # reference's AC and BD (BD column c is distance K-1-c until _rel_shift aligns it).
        AC = torch.einsum("bihd,bhjd->bhij", q + r_w_bias, k.to(q.dtype))  # [B, H, L, K]
        BD = torch.einsum("bihd,jhd->bhij", q + r_r_bias, r_k.view(-1, n_h, d_h))
        BD = rel_shift(BD)  # the reference's _rel_shift
        score = (AC + BD) * scale
        if relative.mask is not None:
            score = score.masked_fill(relative.mask, float("-inf"))
        prob = torch.softmax(score, dim=-1, dtype=torch.promote_types(score.dtype, torch.float32))
        prob = dropout(prob, p_attn).to(v.dtype)  # softmax(A / √d_head) V: HT eq. 17
        attn = torch.einsum("bhij,bhjd->bihd", prob, v).reshape(bsz, q_len, n_h * d_h)
        attn = self._gate_output(h, attn)
        return self.out(attn)

    def _gate_output(self, h: Tensor, attn: Tensor) -> Tensor:
        """Qiu et al. 2025 G1: the heads ⊙ σ(h W_θ) before W_o, where the model has the gate."""
        return attn if self.output_gate is None else self.output_gate(h, attn)

    def _keys_values(self, context: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values ``[B, H, K, dh]`` of ``context [B, K, D]``."""
        bsz, k_len, _ = context.shape
        w_kv = self.qkv.weight[self.n_heads * self.d_head :]
        kv = F.linear(context, w_kv).view(bsz, k_len, 2, self.n_heads, self.d_head)
        key, value = kv.permute(2, 0, 3, 1, 4)
        return key, value

    def _cached_keys_values(
        self, h: Tensor, memory: Tensor | None, cache: dict
    ) -> tuple[Tensor, Tensor]:
        """Keys/values of ``[memory ∘ h]``: the memory's from the cache (the memory is the
        last ``M`` positions seen, so they are the cache's last ``M``), ``h``'s projected now."""
        mem_len = 0 if memory is None else memory.shape[1]
        held: KVCache = cache.setdefault("kv", KVCache())
        if held.length < mem_len:  # a memory the cache has not seen: project it once
            assert memory is not None
            held.clear()
            held.extend(*self._keys_values(memory.to(h.dtype)))
        return held.extend(*self._keys_values(h), keep=mem_len)
