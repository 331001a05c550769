"""GTrXL gating layers (Parisotto et al., 2019, eqs. 11-14) against hand-written equations."""

from __future__ import annotations

import pytest
import torch

from highway_transformer.errors import ConfigError
from highway_transformer.nn import reference
from highway_transformer.nn.combiner import Combiner
from highway_transformer.nn.gtrxl import (
    DEFAULT_GATE_BIAS,
    GTRXL_COMBINERS,
    GRUGate,
    HighwayGTrXLGate,
    InputGate,
    OutputGate,
    SigmoidTanhGate,
)

D = 6
ATOL = 1e-6


def _inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Stream x and a sublayer output y with mixed signs, batch-first [B, T, D]."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, 3, D, generator=g), torch.randn(2, 3, D, generator=g)


def _seeded(cls: type[Combiner], bias: float | None = None) -> Combiner:
    torch.manual_seed(1)
    return cls(D, bias)


def test_input_gate_matches_eq_11() -> None:
    gate = _seeded(InputGate)
    x, y = _inputs()
    expected = reference.gtrxl_input_gate(x, y, gate.w_g.weight.detach())
    torch.testing.assert_close(gate(x, y), expected, atol=ATOL, rtol=0)


@pytest.mark.parametrize("b_g", [None, 0.5, -1.0])
def test_output_gate_matches_eq_12(b_g: float | None) -> None:
    gate = _seeded(OutputGate, b_g)
    x, y = _inputs()
    b = DEFAULT_GATE_BIAS if b_g is None else b_g
    expected = reference.gtrxl_output_gate(x, y, gate.w_g.weight.detach(), b)
    torch.testing.assert_close(gate(x, y), expected, atol=ATOL, rtol=0)


@pytest.mark.parametrize("b_g", [None, 0.5])
def test_highway_gate_matches_eq_13(b_g: float | None) -> None:
    gate = _seeded(HighwayGTrXLGate, b_g)
    x, y = _inputs()
    b = DEFAULT_GATE_BIAS if b_g is None else b_g
    expected = reference.gtrxl_highway_gate(x, y, gate.w_g.weight.detach(), b)
    torch.testing.assert_close(gate(x, y), expected, atol=ATOL, rtol=0)


@pytest.mark.parametrize("b_g", [None, 0.5])
def test_sigmoid_tanh_gate_matches_equation(b_g: float | None) -> None:
    gate = _seeded(SigmoidTanhGate, b_g)
    x, y = _inputs()
    w_g, u_g = gate.wu_y.weight.detach().split(D, dim=0)
    b = DEFAULT_GATE_BIAS if b_g is None else b_g
    expected = reference.gtrxl_sigmoid_tanh_gate(x, y, w_g, u_g, b)
    torch.testing.assert_close(gate(x, y), expected, atol=ATOL, rtol=0)


@pytest.mark.parametrize("b_g", [None, 0.5, -3.0])
def test_gru_gate_matches_eq_14(b_g: float | None) -> None:
    gate = _seeded(GRUGate, b_g)
    x, y = _inputs()
    w_r, w_z, w_g = gate.w_y.weight.detach().split(D, dim=0)
    u_r, u_z = gate.u_x.weight.detach().split(D, dim=0)
    u_g = gate.u_g.weight.detach()
    b = DEFAULT_GATE_BIAS if b_g is None else b_g
    expected = reference.gtrxl_gru_gate(x, y, w_r, u_r, w_z, u_z, w_g, u_g, b)
    torch.testing.assert_close(gate(x, y), expected, atol=ATOL, rtol=0)


def test_gru_gate_is_not_nn_grucell() -> None:
    """The reset gate multiplies x before U_g (eq. 14), unlike torch.nn.GRUCell."""
    gate = _seeded(GRUGate)
    x, y = _inputs()
    cell = torch.nn.GRUCell(D, D, bias=False)
    with torch.no_grad():
        cell.weight_ih.copy_(gate.w_y.weight)
        cell.weight_hh.copy_(torch.cat([gate.u_x.weight, gate.u_g.weight]))
    # GRUCell has no b_g and uses z for the *old* state; even with b_g removed they differ.
    no_bias = GRUGate(D, 0.0)
    no_bias.load_state_dict(gate.state_dict())
    ours = no_bias(x, y).reshape(-1, D)
    theirs = cell(torch.relu(y).reshape(-1, D), x.reshape(-1, D))
    assert not torch.allclose(ours, theirs, atol=1e-3)


def test_gru_gate_large_bias_is_identity_at_init() -> None:
    torch.manual_seed(0)
    gate = GRUGate(32, bias=20.0)
    x = torch.randn(4, 5, 32)
    y = torch.randn(4, 5, 32)
    torch.testing.assert_close(gate(x, y), x, atol=1e-6, rtol=0)


def test_gru_gate_default_bias_stays_closer_to_stream() -> None:
    torch.manual_seed(0)
    gate = GRUGate(32)
    assert gate.b_g == DEFAULT_GATE_BIAS == 2.0
    x = torch.randn(4, 5, 32)
    y = torch.randn(4, 5, 32).abs()  # ReLU(y) = y, so y is what the gate sees
    out = gate(x, y)
    assert (out - x).norm() < (out - y).norm()
    assert (out - x).norm() < 0.5 * (x - y).norm()


@pytest.mark.parametrize("name", sorted(GTRXL_COMBINERS))
def test_factories_pre_ln_only_and_no_learned_bias(name: str) -> None:
    gate = GTRXL_COMBINERS[name].build(8, "sigmoid", None)
    assert isinstance(gate, Combiner)
    assert gate.pre_ln_only is True
    assert type(gate).pre_ln_only is True
    assert gate.gate_bias() is None
    x, y = torch.randn(2, 3, 8), torch.randn(2, 3, 8)
    assert gate(x, y).shape == (2, 3, 8)


def test_factory_bias_is_b_g() -> None:
    assert GTRXL_COMBINERS["gtrxl-gru"].build(8, "tanh", 5.0).b_g == 5.0
    assert GTRXL_COMBINERS["gtrxl-output"].build(8, "sigmoid", None).b_g == DEFAULT_GATE_BIAS


@pytest.mark.parametrize("name", sorted(GTRXL_COMBINERS))
def test_relu_applied_to_sublayer_output(name: str) -> None:
    """Negative y gives the same output as zero y: the combiner sees ReLU(y)."""
    torch.manual_seed(3)
    gate = GTRXL_COMBINERS[name].build(D, "sigmoid", None)
    x, y = _inputs(seed=4)
    neg = -y.abs() - 0.1
    torch.testing.assert_close(gate(x, neg), gate(x, torch.zeros_like(y)), atol=0, rtol=0)
    # ...and a positive y does change the output.
    assert not torch.allclose(gate(x, y.abs() + 0.1), gate(x, torch.zeros_like(y)))


def test_output_gate_negative_y_returns_stream() -> None:
    gate = _seeded(OutputGate)
    x, y = _inputs()
    torch.testing.assert_close(gate(x, -y.abs()), x, atol=0, rtol=0)


def test_gradients_flow_to_all_parameters() -> None:
    for name, combiner in GTRXL_COMBINERS.items():
        torch.manual_seed(0)
        gate = combiner.build(D, "sigmoid", None)
        x, y = _inputs()
        x.requires_grad_(True)
        y = y.abs().requires_grad_(True)
        gate(x, y).square().sum().backward()
        assert x.grad is not None and y.grad is not None, name
        for pname, p in gate.named_parameters():
            assert p.grad is not None and p.grad.abs().sum() > 0, (name, pname)


def test_bf16_forward_is_close_to_fp32() -> None:
    gate = _seeded(GRUGate)
    x, y = _inputs()
    ref = gate(x, y)
    out = gate.to(torch.bfloat16)(x.bfloat16(), y.bfloat16())
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), ref, atol=5e-2, rtol=5e-2)


def test_non_finite_bias_rejected() -> None:
    with pytest.raises(ConfigError, match="finite"):
        GRUGate(4, float("nan"))
