"""LocalRNN's fused recurrence (``nn/kernels/local_rnn_cell.py``, :func:`kernels.fused_local_rnn`)
and the module's readable branch (:class:`LocalRNN` inside :func:`kernels.readable`) against
the loop of :func:`highway_transformer.nn.reference.local_rnn` (RT eq. 2): outputs and
gradients in float32 (1e-5) and float64 (1e-10), and the two branches against each other."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from highway_transformer.nn import kernels, reference
from highway_transformer.nn.local_rnn import LocalRNN

CELLS = ("rnn", "gru", "lstm")
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-10}


def _module(cell: str, d: int, window: int, dtype: torch.dtype) -> LocalRNN:
    torch.manual_seed(0)
    module = LocalRNN(d, window, cell).to(dtype)
    with torch.no_grad():  # non-zero biases so every bias path is exercised
        for p in module.parameters():
            p.uniform_(-0.5, 0.5)
    return module


def _weights(module: LocalRNN) -> list[Tensor]:
    rnn = module.rnn
    return [rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0]


def _inputs(window: int, dtype: torch.dtype, history: bool) -> tuple[Tensor, Tensor | None]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 5, 4, generator=g, dtype=dtype, requires_grad=True)
    before = torch.randn(2, window - 1, 4, generator=g, dtype=dtype, requires_grad=True)
    return x, before if history else None


def _oracle(module: LocalRNN, x: Tensor, history: Tensor | None) -> Tensor:
    weights = reference.RNNWeights(*_weights(module))
    return reference.local_rnn(x, module.cell, weights, module.window, history)


def _close_with_gradients(
    got: Tensor, want: Tensor, wrt: list[Tensor], tol: float, vanishing: tuple[int, ...] = ()
) -> None:
    """Outputs and gradients close; every gradient non-zero but those ``vanishing`` (W_hh's
    with one window step: h_0 = 0)."""
    torch.testing.assert_close(got, want, atol=tol, rtol=tol)
    upstream = torch.randn(got.shape, generator=torch.Generator().manual_seed(7), dtype=got.dtype)
    g_got = torch.autograd.grad((got * upstream).sum(), wrt)
    g_want = torch.autograd.grad((want * upstream).sum(), wrt)
    for i, (a, b) in enumerate(zip(g_got, g_want, strict=True)):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol, msg=lambda s, i=i: f"operand {i}: {s}")
        assert i in vanishing or b.abs().max() > 0, i  # the gradient is really exercised


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize(("window", "history"), [(1, False), (3, False), (3, True), (7, True)])
def test_the_kernel_is_the_oracle(
    cell: str, window: int, history: bool, dtype: torch.dtype
) -> None:
    module = _module(cell, 4, window, dtype)
    x, before = _inputs(window, dtype, history)
    got = kernels.fused_local_rnn(x, before, *_weights(module), cell, window)
    wrt = [x, *([before] if before is not None and window > 1 else []), *_weights(module)]
    vanishing = (len(wrt) - 3,) if window == 1 else ()  # W_hh
    _close_with_gradients(got, _oracle(module, x, before), wrt, TOLERANCE[dtype], vanishing)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("window", [1, 4])
def test_the_readable_branch_is_the_oracle(cell: str, window: int, dtype: torch.dtype) -> None:
    module = _module(cell, 4, window, dtype)
    x, _ = _inputs(window, dtype, False)
    with kernels.readable():
        got = module(x)
    wrt = [x, *_weights(module)]
    vanishing = (2,) if window == 1 else ()  # W_hh
    _close_with_gradients(got, _oracle(module, x, None), wrt, TOLERANCE[dtype], vanishing)


@pytest.mark.parametrize("cell", CELLS)
def test_fast_is_readable_forward_gradients_and_steps(cell: str) -> None:
    module = _module(cell, 4, 3, torch.float64)
    x, _ = _inputs(3, torch.float64, False)
    with kernels.readable():
        slow = module(x)
        slow_step, slow_state = module.step(x[:, :2])
    _close_with_gradients(module(x), slow, [x, *_weights(module)], 1e-10)
    fast_step, fast_state = module.step(x[:, :2])
    torch.testing.assert_close(fast_step, slow_step, atol=1e-10, rtol=0)
    torch.testing.assert_close(fast_state, slow_state, atol=0, rtol=0)


@pytest.mark.parametrize("cell", CELLS)
def test_the_kernels_no_grad_and_compiled_forms_are_the_oracle(
    cell: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _module(cell, 4, 3, torch.float32)
    x, before = _inputs(3, torch.float32, True)
    want = _oracle(module, x, before)
    with torch.no_grad():
        untracked = kernels.fused_local_rnn(x, before, *_weights(module), cell, 3)
    torch.testing.assert_close(untracked, want.detach(), atol=1e-5, rtol=1e-5)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    traced = kernels.fused_local_rnn(x, before, *_weights(module), cell, 3)
    _close_with_gradients(traced, want, [x, before, *_weights(module)], 1e-5)


@pytest.mark.parametrize("cell", CELLS)
def test_the_hand_written_backward_by_gradcheck(cell: str) -> None:
    module = _module(cell, 3, 3, torch.float64)
    weights = [w.detach().clone().requires_grad_() for w in _weights(module)]
    x, before = _inputs(3, torch.float64, True)
    x, before = x[..., :3].detach().requires_grad_(), before[..., :3].detach().requires_grad_()

    def run(inp: Tensor, hist: Tensor, *w: Tensor) -> Tensor:
        return kernels.fused_local_rnn(inp, hist, *w, cell, 3)

    assert torch.autograd.gradcheck(run, (x, before, *weights))


def test_readable_is_a_scoped_switch() -> None:
    assert kernels.fast_path()
    with kernels.readable():
        assert not kernels.fast_path()
        with kernels.readable():
            assert not kernels.fast_path()
        assert not kernels.fast_path()
    assert kernels.fast_path()
    with pytest.raises(RuntimeError), kernels.readable():
        raise RuntimeError("inside")
    assert kernels.fast_path()
