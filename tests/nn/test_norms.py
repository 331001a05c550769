"""Layer normalisations (``nn/norms.py``): the registry, the R-Transformer code's LayerNorm
(unbiased std, ε on the deviation) in float64 with its hand-written backward checked
numerically, and its place among LayerNorms; RMSNorm against its oracle; no biases."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from highway_transformer.errors import ConfigError
from highway_transformer.nn import reference
from highway_transformer.nn.norms import NORMS, RTLayerNorm, build_norm


def test_the_registry_builds_each_norm_fresh() -> None:
    assert set(NORMS) == {"torch", "rt", "rmsnorm"}
    torch_norm, rt_norm = build_norm("torch", 8), build_norm("rt", 8)
    assert type(torch_norm) is nn.LayerNorm and torch_norm.eps == 1e-5
    assert type(rt_norm) is RTLayerNorm and rt_norm.eps == 1e-6
    assert isinstance(rt_norm, nn.LayerNorm)  # initialised and decayed as any LayerNorm
    assert build_norm("rt", 8) is not rt_norm
    with pytest.raises(ConfigError) as info:
        build_norm("bach", 8)
    assert str(info.value) == "unknown layer norm 'bach'; choose one of: rmsnorm, rt, torch."


def _rt(d: int = 6) -> RTLayerNorm:
    torch.manual_seed(0)
    norm = RTLayerNorm(d).double()
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)
    return norm


def test_rt_norm_is_the_formula_and_its_backward_checks_numerically() -> None:
    norm = _rt()
    x = torch.randn(3, 4, 6, dtype=torch.float64, requires_grad=True)
    expected = reference.rt_layer_norm(x, norm.weight, norm.bias, norm.eps)
    torch.testing.assert_close(norm(x), expected, atol=1e-12, rtol=0)

    def call(v: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(norm, {"weight": w, "bias": b}, (v,))

    assert torch.autograd.gradcheck(call, (x, norm.weight, norm.bias))


def test_rt_norm_of_unit_rows_uses_the_unbiased_deviation() -> None:
    norm = RTLayerNorm(4)
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    std = torch.tensor(5.0 / 3).sqrt()  # unbiased: Σ(x - 2.5)² / 3
    expected = (x - 2.5) / (std + 1e-6)
    torch.testing.assert_close(norm(x), expected)
    assert not torch.allclose(norm(x), nn.LayerNorm(4)(x), atol=1e-2)


@pytest.mark.parametrize(("dtype", "tolerance"), [(torch.float32, 1e-5), (torch.float64, 1e-12)])
def test_rms_norm_is_torchs_rmsnorm_and_the_formula(dtype: torch.dtype, tolerance: float) -> None:
    torch.manual_seed(1)
    norm = build_norm("rmsnorm", 16).to(dtype)
    assert type(norm) is nn.RMSNorm and norm.eps == 1e-6
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = 3 * torch.randn(2, 5, 16, dtype=dtype) + 1
    expected = reference.rms_norm(x.double(), norm.weight.double(), 1e-6)
    torch.testing.assert_close(norm(x).double(), expected, atol=tolerance, rtol=tolerance)
    # no centring: a constant row keeps its sign and is not a LayerNorm's zero
    assert torch.all(norm(torch.ones(1, 16, dtype=dtype)) > 0.4)


def test_without_bias_the_layer_norms_have_no_b_and_the_rt_backward_still_checks() -> None:
    assert build_norm("torch", 8, bias=False).bias is None
    rt = build_norm("rt", 8, bias=False).double()
    assert rt.bias is None
    x = torch.randn(3, 8, dtype=torch.float64, requires_grad=True)
    with torch.no_grad():
        rt.weight.uniform_(0.5, 1.5)
    expected = reference.rt_layer_norm(x, rt.weight, torch.zeros(8, dtype=torch.float64), rt.eps)
    torch.testing.assert_close(rt(x), expected, atol=1e-12, rtol=0)

    def call(v: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(rt, {"weight": w}, (v,))

    assert torch.autograd.gradcheck(call, (x, rt.weight))
