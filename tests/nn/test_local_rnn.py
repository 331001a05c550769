"""LocalRNN (R-Transformer, Wang et al., §3.1, eqs. 2-3) against a window-materialising oracle
(:func:`highway_transformer.nn.reference.local_rnn_windows`)."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from highway_transformer.errors import ConfigError
from highway_transformer.nn.local_rnn import LocalRNN
from highway_transformer.nn.reference import local_rnn_windows as local_rnn_oracle

CELLS = ("rnn", "gru", "lstm")


def _module(cell: str, d: int, window: int, seed: int = 0) -> LocalRNN:
    torch.manual_seed(seed)
    module = LocalRNN(d, window, cell)
    with torch.no_grad():  # non-zero biases so every bias path is exercised
        for p in module.parameters():
            p.uniform_(-0.5, 0.5)
    return module


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize(("window", "length"), [(1, 6), (3, 7), (4, 2), (9, 5)])
def test_matches_oracle_outputs_and_gradients(cell: str, window: int, length: int) -> None:
    d, batch = 6, 3
    module = _module(cell, d, window)
    torch.manual_seed(1)
    x = torch.randn(batch, length, d, requires_grad=True)
    weight = torch.randn(batch, length, d)  # a non-trivial upstream gradient

    out = module(x)
    assert out.shape == (batch, length, d)
    (out * weight).sum().backward()
    grads = {name: p.grad.clone() for name, p in module.named_parameters()}
    grad_x = x.grad.clone()

    module.zero_grad()
    x.grad = None
    ref = local_rnn_oracle(module.rnn, x, window)
    (ref * weight).sum().backward()

    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grad_x, x.grad, atol=1e-5, rtol=1e-5)
    assert set(grads) == {n for n, _ in module.named_parameters()} and len(grads) == 4
    for name, p in module.named_parameters():
        torch.testing.assert_close(grads[name], p.grad, atol=1e-5, rtol=1e-5, msg=name)


@pytest.mark.parametrize("cell", CELLS)
def test_the_compiled_steps_match_the_oracle(cell: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under torch.compile the steps run as plain expressions (the fused pass writes through
    ``out=`` views, which cannot be traced): the oracle's outputs and gradients."""
    module = _module(cell, 5, 3)
    x = torch.randn(2, 6, 5, requires_grad=True)
    weight = torch.randn(2, 6, 5)
    ref = local_rnn_oracle(module.rnn, x, 3)
    want = torch.autograd.grad((ref * weight).sum(), (x, *module.parameters()))
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    out = module(x)
    got = torch.autograd.grad((out * weight).sum(), (x, *module.parameters()))
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("cell", CELLS)
def test_gradcheck_float64(cell: str) -> None:
    """The hand-written backward against finite differences, for the input and all weights."""
    module = _module(cell, 3, 3).double()
    names = [f"rnn.{n}" for n, _ in module.rnn.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_() for p in module.rnn.parameters())
    x = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)

    def run(inp: Tensor, *weights: Tensor) -> Tensor:
        return torch.func.functional_call(module, dict(zip(names, weights, strict=True)), inp)

    assert torch.autograd.gradcheck(run, (x, *params))


@pytest.mark.parametrize("cell", CELLS)
def test_no_grad_path_matches_oracle(cell: str) -> None:
    module = _module(cell, 5, 4)
    x = torch.randn(2, 9, 5)
    with torch.no_grad():
        torch.testing.assert_close(module(x), local_rnn_oracle(module.rnn, x, 4), atol=1e-5, rtol=0)


def test_window_one_is_a_single_cell_step() -> None:
    module = _module("gru", 4, 1)
    x = torch.randn(2, 5, 4)
    cell = nn.GRUCell(4, 4)
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(cell, name).copy_(getattr(module.rnn, f"{name}_l0"))
        expected = cell(x.reshape(10, 4)).reshape(2, 5, 4)
        torch.testing.assert_close(module(x), expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("cell", CELLS)
def test_causal_and_local(cell: str) -> None:
    window, length = 3, 10
    module = _module(cell, 4, window)
    x = torch.randn(2, length, 4)
    t = 5
    x2 = x.clone()
    x2[:, t + 1] += 1.0
    with torch.no_grad():
        a, b = module(x), module(x2)
    torch.testing.assert_close(a[:, : t + 1], b[:, : t + 1], atol=0, rtol=0)
    assert (a[:, t + 1] - b[:, t + 1]).abs().max() > 1e-3  # the changed position matters
    # positions whose window no longer contains t + 1 are unchanged too (locality)
    torch.testing.assert_close(a[:, t + 1 + window :], b[:, t + 1 + window :], atol=0, rtol=0)


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("window", [1, 4])
def test_step_token_by_token_and_chunks(cell: str, window: int) -> None:
    module = _module(cell, 5, window)
    x = torch.randn(2, 11, 5)
    with torch.no_grad():
        full = module(x)
        state = None
        outs = []
        for t in range(x.shape[1]):
            y, state = module.step(x[:, t : t + 1], state)
            outs.append(y)
        assert state is not None and state.shape == (2, window - 1, 5)
        torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-6, rtol=0)

        state, outs = None, []
        for lo, hi in [(0, 2), (2, 3), (3, 8), (8, 11)]:
            y, state = module.step(x[:, lo:hi], state)
            assert y.shape == (2, hi - lo, 5)
            outs.append(y)
        torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-6, rtol=0)


def test_step_gradients_flow() -> None:
    module = _module("lstm", 4, 3)
    x = torch.randn(1, 6, 4, requires_grad=True)
    y1, state = module.step(x[:, :2])
    y2, _ = module.step(x[:, 2:], state)
    torch.cat([y1, y2], 1).sum().backward()
    grad = x.grad.clone()
    x.grad = None
    module(x).sum().backward()
    torch.testing.assert_close(grad, x.grad, atol=1e-5, rtol=0)


@pytest.mark.parametrize("cell", CELLS)
def test_length_one(cell: str) -> None:
    module = _module(cell, 3, 4)
    x = torch.randn(2, 1, 3, requires_grad=True)
    out = module(x)
    ref = local_rnn_oracle(module.rnn, x, 4)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)
    (g,) = torch.autograd.grad(out.sum(), x)
    (g_ref,) = torch.autograd.grad(ref.sum(), x)
    torch.testing.assert_close(g, g_ref, atol=1e-5, rtol=0)


def test_parameters_are_the_rnn_modules() -> None:
    module = LocalRNN(8, 3, "lstm")
    assert isinstance(module.rnn, nn.LSTM)
    assert module.rnn.batch_first and module.rnn.num_layers == 1 and module.rnn.bias
    assert module.rnn.hidden_size == 8 and module.rnn.input_size == 8
    assert {id(p) for p in module.parameters()} == {id(p) for p in module.rnn.parameters()}
    assert isinstance(LocalRNN(8, 3, "rnn").rnn, nn.RNN)
    assert isinstance(LocalRNN(8, 3).rnn, nn.GRU)


@pytest.mark.parametrize("window", [0, -2])
def test_bad_window(window: int) -> None:
    with pytest.raises(ConfigError, match="window"):
        LocalRNN(8, window)


def test_bad_cell_names_the_choices() -> None:
    with pytest.raises(ConfigError, match="gru, lstm, rnn"):
        LocalRNN(8, 3, "transformer")


def test_bad_input_shapes() -> None:
    module = LocalRNN(4, 3)
    with pytest.raises(ConfigError):
        module(torch.randn(2, 5, 3))
    with pytest.raises(ConfigError):
        module.step(torch.randn(2, 1, 4), torch.zeros(2, 3, 4))
