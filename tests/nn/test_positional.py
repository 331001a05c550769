"""Sinusoidal encodings against the formula of HT eqs. 5-6 and the XL code's ``[sin | cos]``
(:mod:`highway_transformer.nn.reference`)."""

from __future__ import annotations

import pytest
import torch

from highway_transformer.nn import reference
from highway_transformer.nn.positional import SinusoidalPositionalEncoding
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
