"""The combiner interface (``nn/combiner.py``): the plain residual, its class flags, and what a
new combiner inherits."""

from __future__ import annotations

import torch

from highway_transformer.nn.combiner import ACTIVATIONS, Combiner, Residual


def test_the_residual_is_x_plus_y_with_no_gate_and_no_settings() -> None:
    x, y = torch.randn(2, 3, 4), torch.randn(2, 3, 4)
    residual = Residual.build(4, "tanh", bias=3.0)  # gate settings do not apply
    assert isinstance(residual, Residual) and list(residual.parameters()) == []
    assert torch.equal(residual(x, y), x + y) and residual.gate_bias() is None
    assert (Residual.pre_ln_only, Residual.matmuls) == (False, 0)
    assert Residual.activations == ("sigmoid", "tanh") == tuple(ACTIVATIONS)


def test_the_activations_are_sigmoid_and_tanh() -> None:
    x = torch.linspace(-3, 3, 7)
    assert torch.equal(ACTIVATIONS["sigmoid"](x), torch.sigmoid(x))
    assert torch.equal(ACTIVATIONS["tanh"](x), torch.tanh(x))


def test_a_new_combiner_inherits_the_residual_and_no_gate() -> None:
    class Halfway(Combiner):
        pass

    x, y = torch.randn(3), torch.randn(3)
    made = Halfway.build(3)
    assert type(made) is Halfway and torch.equal(made(x, y), x + y)
    assert made.gate_bias() is None
