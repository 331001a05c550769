"""Sinusoidal encodings against the formula evaluated with Python's math module (HT eqs. 5-6)."""

from __future__ import annotations

import math

import pytest
import torch

from highway_transformer.nn.positional import SinusoidalPositionalEncoding
from highway_transformer.nn.relative import distance_rows


def _formula(pos: float, d: int) -> list[float]:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(the same angle)."""
    row = []
    for i in range(d):
        angle = pos / 10000 ** ((i - i % 2) / d)
        row.append(math.sin(angle) if i % 2 == 0 else math.cos(angle))
    return row


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_absolute_encoding_is_computed_in_the_models_precision(dtype, tol) -> None:  # noqa: ANN001
    # a float64 model gets float64 encodings (computed in float32, positions 300-304 were
    # off by 2.4e-6, and a GPU's float32 sin differs from a CPU's in the last bits)
    d, start, length = 8, 300, 5
    out = SinusoidalPositionalEncoding(d)(torch.zeros(1, length, d, dtype=dtype), start=start)
    assert out.dtype == dtype
    expected = torch.tensor([_formula(start + t, d) for t in range(length)], dtype=torch.float64)
    torch.testing.assert_close(out[0].double(), expected, rtol=0, atol=tol)


def test_relative_distances_in_float64_for_a_float64_model() -> None:
    d = 8
    rows = distance_rows(0, 400, d, 0, torch.zeros(1, dtype=torch.float64))
    assert rows.dtype == torch.float64
    # [sin | cos] layout, distances 399 ... 0
    expected = [_formula(399.0, d)[0::2] + _formula(399.0, d)[1::2]]
    torch.testing.assert_close(rows[:1], torch.tensor(expected, dtype=torch.float64), rtol=0,
                               atol=1e-12)  # fmt: skip
