"""Sinusoidal position encodings (HT eqs. 4-6; Vaswani et al.) and rotary ones (RoPE).

``PE(pos, 2i) = sin(pos / 10000^(2i/d))``, ``PE(pos, 2i+1) = cos(pos / 10000^(2i/d))``.
Computed per call for the positions asked for: no table, no length cap. Oracles:
:func:`.reference.absolute_sinusoid`, :func:`.reference.split_sinusoid`.

RoPE (Su et al. 2021, RoFormer) rotates each query and key of dot-product attention by its
position, so ``q_i · k_j`` depends on ``i − j`` only. Convention: *rotate-half*, as
``apply_rotary_pos_emb`` of Llama and Qwen3 in Transformers (feature ``f`` pairs with
``f + d/2``, not with ``f + 1`` as in RoFormer's interleaved form; a fixed permutation of the
head features): ``x' = x cos θ_p + rotate_half(x) sin θ_p`` with ``rotate_half(x) =
[−x₂, x₁]`` and ``θ_p = p · base^(−2i/d)`` for ``i < d/2``, repeated for both halves.
Oracle: :func:`.reference.rotary_embedding`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def sinusoid(
    positions: Tensor,
    d_model: int,
    *,
    split: bool = False,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """Encodings ``[len(positions), d_model]`` of (possibly negative or fractional) positions.

    Even features hold the sines and odd features the cosines, as in HT eqs. 5-6; with
    ``split`` the features are ``[sin | cos]`` (the Transformer-XL code's ``PositionalEmbedding``
    layout, a fixed permutation of the same values). Computed in ``dtype`` (float32, or
    float64 for exact comparisons).
    """
    half = torch.arange(0, d_model, 2, device=positions.device, dtype=dtype)
    inv_freq = torch.exp(-math.log(10000.0) * half / d_model)
    angles = positions.to(dtype)[:, None] * inv_freq[None, :]
    if split:
        return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)[:, :d_model]
    out = torch.empty(positions.shape[0], d_model, device=positions.device, dtype=dtype)
    out[:, 0::2] = torch.sin(angles)
    out[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return out


def encoding_dtype(like: Tensor) -> torch.dtype:
    """float64 for a float64 model (its CPU and GPU results then agree to ~1e-15), else
    float32: reduced-precision models get fp32 encodings rounded once to their dtype."""
    return torch.float64 if like.dtype == torch.float64 else torch.float32


class SinusoidalPositionalEncoding(nn.Module):
    """Adds ``PE(start .. start+L-1)`` to ``[B, L, D]`` embeddings (HT eq. 4: X = E + PE)."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.d_model = d_model

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        positions = torch.arange(start, start + x.shape[1], device=x.device)
        return x + sinusoid(positions, self.d_model, dtype=encoding_dtype(x)).to(x.dtype)


def rotary_angles(
    start: int, length: int, d_head: int, base: float, like: Tensor
) -> tuple[Tensor, Tensor]:
    """``cos`` and ``sin`` ``[length, d_head]`` of positions ``start .. start+length-1``
    (the two halves of the features repeated, as Llama's ``emb = cat(freqs, freqs)``),
    computed in float32 (float64 for a float64 ``like``) and cast to ``like``'s dtype."""
    dtype = encoding_dtype(like)
    half = torch.arange(0, d_head, 2, device=like.device, dtype=dtype)
    inv_freq = base ** (-half / d_head)
    positions = torch.arange(start, start + length, device=like.device, dtype=dtype)
    angles = positions[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(like.dtype), angles.sin().to(like.dtype)


def rotate_half(x: Tensor) -> Tensor:
    """``[−x₂, x₁]`` of the halves ``x₁, x₂`` of the last dimension."""
    first, second = x.chunk(2, dim=-1)
    return torch.cat([-second, first], dim=-1)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """``x cos + rotate_half(x) sin`` for ``x [..., L, d_head]``, ``cos``/``sin [L, d_head]``."""
    return x * cos + rotate_half(x) * sin
