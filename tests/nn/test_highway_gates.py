"""Highway Transformer gates (HT eqs. 21-31) checked by hand against
:mod:`highway_transformer.nn.reference`: SDU, highway and gated sublayer, their biases and
activations."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from highway_transformer.config import Config, GateConfig, ModelConfig
from highway_transformer.errors import ConfigError
from highway_transformer.models.lm import LanguageModel
from highway_transformer.nn import reference
from highway_transformer.nn.connections import build_combiner
from highway_transformer.nn.highway_gates import GatedSublayer, HighwayGate, SelfDependencyUnit
from highway_transformer.validation import validate

D = 5
ATOL = 1e-6
HT_GATES = {"sdu": SelfDependencyUnit, "highway": HighwayGate, "gated": GatedSublayer}


def _inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, 3, D, generator=g), torch.randn(2, 3, D, generator=g)


def _parts(combiner: nn.Module) -> tuple[torch.Tensor, ...]:
    return tuple(w.detach() for w in reference.ht_gate_weights(combiner))


@pytest.mark.parametrize("activation", ["sigmoid", "tanh"])
def test_sdu_matches_eqs_21_24(activation: str, with_gate_biases: Callable[..., nn.Module]) -> None:
    torch.manual_seed(0)
    sdu = with_gate_biases(SelfDependencyUnit(D, activation))
    x, y = _inputs()
    expected = reference.sdu(x, y, *_parts(sdu), activation)  # X + Att(X) + SDU(X)
    with torch.no_grad():
        got = sdu(x, y)
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)
    assert not torch.allclose(got, x + y, atol=1e-3)  # the SDU term is not vanishing


def test_sigmoid_and_tanh_sdu_differ(with_gate_biases: Callable[..., nn.Module]) -> None:
    torch.manual_seed(0)
    sig = with_gate_biases(SelfDependencyUnit(D, "sigmoid"))
    tanh = SelfDependencyUnit(D, "tanh")
    tanh.load_state_dict(sig.state_dict())
    x, y = _inputs()
    with torch.no_grad():
        assert not torch.allclose(sig(x, y), tanh(x, y), atol=1e-3)


def test_highway_gate_matches_eqs_26_29(with_gate_biases: Callable[..., nn.Module]) -> None:
    torch.manual_seed(0)
    gate = with_gate_biases(HighwayGate(D))
    x, y = _inputs()
    expected = reference.highway_gate(x, y, *_parts(gate))  # o(X) + Att(X)
    with torch.no_grad():
        torch.testing.assert_close(gate(x, y), expected, atol=ATOL, rtol=0)


def test_gated_sublayer_matches_eqs_30_31(with_gate_biases: Callable[..., nn.Module]) -> None:
    torch.manual_seed(0)
    gate = with_gate_biases(GatedSublayer(D))
    x, y = _inputs()
    expected = reference.gated_sublayer(x, y, *_parts(gate))  # o(X) + X
    with torch.no_grad():
        torch.testing.assert_close(gate(x, y), expected, atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    ("kind", "activation"),
    [("sdu", "sigmoid"), ("sdu", "tanh"), ("highway", "sigmoid"), ("gated", "sigmoid")],
)
def test_gate_biases_start_at_zero(kind: str, activation: str) -> None:
    torch.manual_seed(0)
    combiner = build_combiner(kind, D, activation)
    assert isinstance(combiner, HT_GATES[kind])
    assert torch.count_nonzero(combiner.proj.bias) == 0
    b1 = combiner.gate_bias()
    assert b1.shape == (D,)
    assert torch.count_nonzero(b1) == 0
    # b1 is the gate half of the shared projection: a view of the learned parameter
    with torch.no_grad():
        combiner.proj.bias[:D].fill_(0.5)
    assert torch.all(combiner.gate_bias() == 0.5)
    # W1, W2 and their biases: 2d(d+1) parameters per gated sublayer (HT §3)
    assert sum(p.numel() for p in combiner.parameters()) == 2 * D * (D + 1)


@pytest.mark.parametrize("kind", ["highway", "gated"])
def test_tanh_highway_and_gated_are_rejected(kind: str) -> None:
    """HT eq. 26 and the authors' code use σ for T (their glu_type 3/4 ignore act_type)."""
    with pytest.raises(ConfigError, match="sigmoid"):
        build_combiner(kind, D, "tanh")
    with pytest.raises(ConfigError, match="sigmoid"):
        validate(Config().replace(**{"model.gate.kind": kind, "model.gate.activation": "tanh"}))


def test_unknown_activation_is_an_error() -> None:
    with pytest.raises(ConfigError, match="sigmoid"):
        SelfDependencyUnit(D, "relu")


# --------------------------------------------------------------------------- one product


class MatrixProducts(TorchDispatchMode):
    """The matrix products aten runs (after ``linear`` and ``matmul`` are decomposed), with
    the shape of their second operand."""

    PRODUCTS = ("mm", "addmm", "bmm", "baddbmm")

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        if func.overloadpacket.__name__ in self.PRODUCTS:
            self.shapes.append(tuple(args[-1].shape))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("kind", HT_GATES)
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_each_gate_is_one_product_of_w1_and_w2_together(kind: str, device: str) -> None:
    """``x W1`` and ``x W2`` are one GEMM of ``[d, 2d]``: ``nn.Linear`` decomposes alike on
    every device (``linear`` is composite), so the meta device stands for the others."""
    combiner = build_combiner(kind, D, "sigmoid").to(device)
    x, y = (t.to(device) for t in _inputs())
    with MatrixProducts() as products:
        combiner(x, y)
    assert products.shapes == [(D, 2 * D)]


@pytest.mark.parametrize("kind", HT_GATES)
def test_a_gated_model_runs_one_more_product_per_gated_sublayer(kind: str) -> None:
    config = ModelConfig(vocab_size=11, d_model=8, d_inner=16, n_layers=2, n_heads=2, dropout=0.0)
    tokens = torch.randint(0, 11, (2, 5), generator=torch.Generator().manual_seed(0))
    counts = []
    for gate in ("none", kind):
        model = LanguageModel(ModelConfig(**{**config.__dict__, "gate": GateConfig(kind=gate)}))
        with torch.no_grad(), MatrixProducts() as products:
            model(tokens)
        counts.append(len(products.shapes))
    assert counts[1] - counts[0] == 2 * 2  # attn and ffn of both layers
