"""Sinusoidal encodings against the formula of HT eqs. 5-6 and the XL code's ``[sin | cos]``,
and RoPE against its rotate-half formula (:mod:`highway_transformer.nn.reference`)."""

from __future__ import annotations

import pytest
import torch

from highway_transformer.nn import reference
from highway_transformer.nn.positional import (
    SinusoidalPositionalEncoding,
    apply_rotary,
    rotary_angles,
)
from highway_transformer.nn.relative import distance_rows


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_absolute_encoding_is_computed_in_the_models_precision(dtype, tol) -> None:  # noqa: ANN001
    # a float64 model gets float64 encodings (computed in float32, positions 300-304 were
    # off by 2.4e-6, and a GPU's float32 sin differs from a CPU's in the last bits)
    d, start, length = 8, 300, 5
    out = SinusoidalPositionalEncoding(d)(torch.zeros(1, length, d, dtype=dtype), start=start)
    assert out.dtype == dtype
    positions = torch.arange(start, start + length, dtype=torch.float64)
    expected = reference.absolute_sinusoid(positions, d)
    torch.testing.assert_close(out[0].double(), expected, rtol=0, atol=tol)


def test_relative_distances_in_float64_for_a_float64_model() -> None:
    d = 8
    rows = distance_rows(0, 400, d, 0, torch.zeros(1, dtype=torch.float64))
    assert rows.dtype == torch.float64
    # [sin | cos] layout, distances 399 ... 0
    expected = reference.split_sinusoid(torch.tensor([399.0], dtype=torch.float64), d)
    torch.testing.assert_close(rows[:1], expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_rope_is_the_rotate_half_formula_from_any_start(dtype: torch.dtype, tol: float) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 7, 8, generator=g, dtype=torch.float64)
    for start in (0, 5):
        cos, sin = rotary_angles(start, 7, 8, 500.0, x.to(dtype))
        got = apply_rotary(x.to(dtype), cos, sin).double()
        expected = reference.rotary_embedding(x, torch.arange(start, start + 7), 500.0)
        torch.testing.assert_close(got, expected, atol=tol, rtol=tol)


def test_rope_scores_depend_on_the_distance_only() -> None:
    g = torch.Generator().manual_seed(1)
    q = torch.randn(1, 1, 8, generator=g, dtype=torch.float64)
    k = torch.randn(1, 1, 8, generator=g, dtype=torch.float64)

    def score(i: int, j: int) -> torch.Tensor:
        qi = reference.rotary_embedding(q, torch.tensor([i]))
        kj = reference.rotary_embedding(k, torch.tensor([j]))
        return (qi * kj).sum()

    torch.testing.assert_close(score(3, 1), score(10, 8), atol=1e-12, rtol=0)
    assert not torch.allclose(score(3, 1), score(3, 2))
    # position 0 leaves a vector as it is; the rotation keeps its norm
    torch.testing.assert_close(reference.rotary_embedding(q, torch.tensor([0])), q)
    torch.testing.assert_close(reference.rotary_embedding(q, torch.tensor([9])).norm(), q.norm())
