"""The position-wise FFN (``nn/feedforward.py``, HT eq. 8) against
:func:`highway_transformer.nn.reference.position_wise_ff` in float64, gradients included, and
its dropout: between the ReLU and the second layer, in training only; SwiGLU against
:func:`~highway_transformer.nn.reference.swiglu_ff` and its 2/3 width rule."""

from __future__ import annotations

import pytest
import torch

from highway_transformer.nn import reference
from highway_transformer.nn.dropout import Dropout
from highway_transformer.nn.feedforward import FeedForward, SwiGLU, swiglu_hidden

D, INNER = 6, 20


def _ffn(dropout: float = 0.0) -> FeedForward:
    torch.manual_seed(0)
    ffn = FeedForward(D, INNER, dropout).double()
    with torch.no_grad():  # biases that matter (nn.Linear's are small)
        ffn.fc1.bias.uniform_(-1, 1)
        ffn.fc2.bias.uniform_(-1, 1)
    return ffn


def _x() -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    return torch.randn(2, 5, D, generator=g, dtype=torch.float64, requires_grad=True)


def test_the_ffn_is_the_formula_with_its_gradients() -> None:
    ffn, x = _ffn(), _x()
    weights = (ffn.fc1.weight, ffn.fc1.bias, ffn.fc2.weight, ffn.fc2.bias)
    got = ffn(x)
    expected = reference.position_wise_ff(x, *weights)
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)
    assert got.shape == (2, 5, D)
    upstream = torch.randn(
        got.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(2)
    )
    leaves = (x, *weights)
    for a, b in zip(
        torch.autograd.grad((got * upstream).sum(), leaves),
        torch.autograd.grad((expected * upstream).sum(), leaves),
        strict=True,
    ):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
    assert (ffn.fc1(x) < 0).any()  # the ReLU really cut something


def test_dropout_acts_between_the_relu_and_the_second_layer_in_training_only() -> None:
    ffn, x = _ffn(0.5), _x().detach()
    weights = (ffn.fc1.weight, ffn.fc1.bias, ffn.fc2.weight, ffn.fc2.bias)
    with torch.no_grad():
        torch.testing.assert_close(
            ffn.eval()(x), reference.position_wise_ff(x, *weights), atol=1e-12, rtol=0
        )
        ffn.train()
        torch.manual_seed(5)
        got = ffn(x)
        torch.manual_seed(5)
        hidden = Dropout(0.5).train()(ffn.fc1(x).relu())
        torch.testing.assert_close(got, ffn.fc2(hidden), atol=1e-12, rtol=0)
        assert not torch.allclose(got, reference.position_wise_ff(x, *weights))


def test_swiglu_hidden_width_is_two_thirds_rounded_up_to_eights() -> None:
    assert [swiglu_hidden(n) for n in (512, 2048, 64, 12, 3)] == [344, 1368, 48, 8, 8]
    for d_inner in (64, 100, 512, 2048):  # about the ReLU FFN's parameters, never fewer
        relu, swiglu = FeedForward(32, d_inner, bias=False), SwiGLU(32, d_inner, bias=False)
        n_relu, n_swiglu = (sum(p.numel() for p in m.parameters()) for m in (relu, swiglu))
        assert n_relu <= n_swiglu <= n_relu * 1.15


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float64, 1e-12), (torch.float32, 1e-5)])
@pytest.mark.parametrize("bias", [True, False])
def test_swiglu_is_the_formula_with_its_gradients(
    dtype: torch.dtype, tol: float, bias: bool
) -> None:
    torch.manual_seed(0)
    ffn = SwiGLU(D, INNER, bias=bias).to(dtype)
    x = _x().detach().to(dtype).requires_grad_()
    layers = (ffn.fc1, ffn.fc3, ffn.fc2)
    biases = tuple(layer.bias for layer in layers)
    assert all((b is not None) == bias for b in biases)
    expected = reference.swiglu_ff(x, ffn.fc1.weight, ffn.fc3.weight, ffn.fc2.weight, biases)
    got = ffn(x)
    torch.testing.assert_close(got, expected, atol=tol, rtol=tol)
    grads = torch.autograd.grad(got.sum(), (x, ffn.fc1.weight))
    oracle = torch.autograd.grad(expected.sum(), (x, ffn.fc1.weight))
    for a, b in zip(grads, oracle, strict=True):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)
