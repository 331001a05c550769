"""LocalRNN of the R-Transformer (Wang et al., "R-Transformer", §3.1, eqs. 2-3).

For every position ``t`` a shared recurrent cell reads the window of the ``k`` positions
ending at ``t``, ``x_{t-k+1} … x_t`` (positions before the start are zero padding), from a
zero initial state; its last hidden state is the output ``h_t`` (eq. 2). Applied at every
position this gives ``h_1 … h_N = LocalRNN(x_1 … x_N)`` (eq. 3). Windows are independent and
the layer is causal.

Fast path. The input-to-hidden projection ``x W_ih^T + b_ih`` of a position is the same in
every window that contains it, so it is computed once for the whole (left-padded) sequence;
padded positions are zero inputs, so their projection is just the bias. (The hidden bias
``b_hh`` is folded into it, except GRU's ``b_hn``, which sits inside ``r ⊙ (W_hn h + b_hn)``.)
Step ``j`` of the recurrence, run for all ``B·L`` windows at once, reads the projection of
position ``t - k + 1 + j``: a shifted slice (a view) of the padded projection, never ``k``
copies of the inputs. The first step skips the recurrent product (``h_0 = 0``). The cell
maths (PyTorch gate orders: GRU ``r, z, n``; LSTM ``i, f, g, o``) is written out by hand from
the parameters of the module's own ``nn.RNN`` / ``nn.GRU`` / ``nn.LSTM`` (``self.rnn``),
which remain the single source of truth.

``tanh(u)`` is evaluated as ``2·sigmoid(2u) − 1`` (several times cheaper than ``tanh`` on
CPU, equal to it within ~2e-7): the weight and bias rows that feed a ``tanh`` are doubled
(exactly, and differentiably) before use, so a single ``sigmoid`` covers all gates.

Memory. The ``k`` steps run inside one autograd function with a hand-written backward pass
that keeps per step only what it needs (vanilla RNN: the hidden state; GRU: ``r``, ``z``,
``W_hn h + b_hn``, the candidate ``n`` and the step's input state; LSTM: the four gates, the
cell and the input state) and none of the pointwise temporaries autograd would keep. The
padded projection itself is freed after the forward pass.

Under ``torch.compile`` the same steps run as plain tensor expressions and autograd's backward
(:func:`_traced_recurrence`): the fused forward writes through ``out=`` views and in place,
which the compiler cannot trace, and it would split the compiled graph at every LocalRNN. The
maths is the same, to float rounding; what the backward keeps is then the compiler's choice.

Oracle: :func:`.reference.local_rnn` (eq. 2 as a loop over positions and window steps, also for
:meth:`LocalRNN.step`'s chunks) and :func:`.reference.local_rnn_windows` (the RT code's form).
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import Tensor, nn

from ..errors import ConfigError, unknown_choice

CELLS: dict[str, type[nn.RNNBase]] = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}
_GATES = {"rnn": 1, "gru": 3, "lstm": 4}
_TANH_GATE = {"rnn": 0, "gru": 2, "lstm": 2}  # which d-wide block of the rows feeds a tanh


def _slot(store: Tensor | None, index: int, like: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Slot ``index`` of a preallocated activation store, or a fresh tensor without one."""
    return store[index] if store is not None else like.new_empty(shape)


def _store(like: Tensor, count: int, shape: tuple[int, ...], save: bool) -> Tensor | None:
    return like.new_empty((count, *shape)) if save and count > 0 else None


def _dims(proj: Tensor, length: int, gates: int) -> tuple[int, int, int, int, int]:
    batch, padded, width = proj.shape
    return batch, width // gates, padded - length + 1, batch * length, width


# --- forward passes: proj [B, L+k-1, G·d] (tanh rows doubled) -> h [B, L, d] ---------------


def _rnn_forward(
    proj: Tensor, w_hh: Tensor, b_hn: Tensor | None, length: int, save: bool
) -> tuple[Tensor, list[Tensor | None]]:
    """Vanilla RNN: ``h' = tanh(W_ih x + b_ih + W_hh h + b_hh)``."""
    batch, d, k, rows, _ = _dims(proj, length, 1)
    shape = (batch, length, d)
    states = _store(proj, k - 1, shape, save)  # outputs of steps 0 … k-2
    h: Tensor | None = None
    for j in range(k):
        gi = proj[:, j : j + length]
        a = _slot(states, j, proj, shape) if j < k - 1 else proj.new_empty(shape)
        if h is None:
            torch.sigmoid(gi, out=a)
        else:
            torch.mm(h.view(rows, d), w_hh.t(), out=a.view(rows, d))
            a.add_(gi).sigmoid_()
        h = a.mul_(2.0).sub_(1.0)
    assert h is not None
    return h, [states]


def _gru_forward(
    proj: Tensor, w_hh: Tensor, b_hn: Tensor | None, length: int, save: bool
) -> tuple[Tensor, list[Tensor | None]]:
    """GRU: ``r, z = σ(..)``, ``n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))``,
    ``h' = (1 − z) ⊙ n + z ⊙ h``."""
    batch, d, k, rows, width = _dims(proj, length, 3)
    full, half = (batch, length, width), (batch, length, d)
    gates = _store(proj, k, full, save)  # [r, z, W_hn h + b_hn]
    cands = _store(proj, k, half, save)  # n
    states = _store(proj, k - 1, half, save)  # input state of steps 1 … k-1
    h: Tensor | None = None
    for j in range(k):
        gi = proj[:, j : j + length]
        a = _slot(gates, j, proj, full)
        if h is None:  # h_0 = 0: no recurrent product, the hidden bias stays
            torch.sigmoid(gi[..., : 2 * d], out=a[..., : 2 * d])
            a[..., 2 * d :].copy_(b_hn)
        else:
            torch.mm(h.view(rows, d), w_hh.t(), out=a.view(rows, width))
            a[..., : 2 * d].add_(gi[..., : 2 * d]).sigmoid_()
            a[..., 2 * d :].add_(b_hn)
        r, z, ghn = a[..., :d], a[..., d : 2 * d], a[..., 2 * d :]
        n = torch.addcmul(gi[..., 2 * d :], r, ghn, out=_slot(cands, j, proj, half))
        n.sigmoid_().mul_(2.0).sub_(1.0)
        out = _slot(states, j, proj, half) if j < k - 1 else proj.new_empty(half)
        if h is None:
            h = torch.addcmul(n, z, n, value=-1.0, out=out)
        else:
            h = torch.lerp(n, h, z, out=out)
    assert h is not None
    return h, [gates, cands, states]


def _lstm_forward(
    proj: Tensor, w_hh: Tensor, b_hn: Tensor | None, length: int, save: bool
) -> tuple[Tensor, list[Tensor | None]]:
    """LSTM: ``i, f, o = σ(..)``, ``g = tanh(..)``, ``c' = f ⊙ c + i ⊙ g``,
    ``h' = o ⊙ tanh(c')``."""
    batch, d, k, rows, width = _dims(proj, length, 4)
    full, half = (batch, length, width), (batch, length, d)
    gates = _store(proj, k, full, save)  # [i, f, g, o]
    cells = _store(proj, k, half, save)  # c
    states = _store(proj, k - 1, half, save)  # input state of steps 1 … k-1
    h: Tensor | None = None
    c: Tensor | None = None
    for j in range(k):
        gi = proj[:, j : j + length]
        a = _slot(gates, j, proj, full)
        if h is None:
            torch.sigmoid(gi, out=a)
        else:
            torch.mm(h.view(rows, d), w_hh.t(), out=a.view(rows, width))
            a.add_(gi).sigmoid_()
        i, f, g, o = a[..., :d], a[..., d : 2 * d], a[..., 2 * d : 3 * d], a[..., 3 * d :]
        g.mul_(2.0).sub_(1.0)
        c_new = torch.mul(i, g, out=_slot(cells, j, proj, half))
        if c is not None:
            c_new.addcmul_(f, c)
        c = c_new
        out = _slot(states, j, proj, half) if j < k - 1 else proj.new_empty(half)
        h = torch.mul(c, 2.0, out=out).sigmoid_().mul_(2.0).sub_(1.0).mul_(o)
    assert h is not None
    return h, [gates, cells, states]


_FORWARD = {"rnn": _rnn_forward, "gru": _gru_forward, "lstm": _lstm_forward}


def _traced_recurrence(
    proj: Tensor, w_hh: Tensor, b_hn: Tensor | None, cell: str, length: int
) -> Tensor:
    """The ``k`` steps of :data:`_FORWARD`'s passes as out-of-place expressions, for
    ``torch.compile`` (autograd differentiates them): the same gates, tanh rows doubled."""
    _, d, k, _, _ = _dims(proj, length, _GATES[cell])
    h: Tensor | None = None
    c: Tensor | None = None
    for j in range(k):
        gi = proj[:, j : j + length]
        gh = None if h is None else torch.matmul(h, w_hh.t())
        if cell == "rnn":
            h = torch.sigmoid(gi if gh is None else gi + gh) * 2.0 - 1.0
        elif cell == "gru":
            assert b_hn is not None
            rz = torch.sigmoid(
                gi[..., : 2 * d] if gh is None else gi[..., : 2 * d] + gh[..., : 2 * d]
            )
            r, z = rz[..., :d], rz[..., d:]
            ghn = b_hn if gh is None else gh[..., 2 * d :] + b_hn
            n = torch.sigmoid(gi[..., 2 * d :] + r * ghn) * 2.0 - 1.0
            h = n - z * n if h is None else torch.lerp(n, h, z)
        else:
            a = torch.sigmoid(gi if gh is None else gi + gh)
            i, f, g, o = (
                a[..., :d],
                a[..., d : 2 * d],
                a[..., 2 * d : 3 * d] * 2.0 - 1.0,
                a[..., 3 * d :],
            )
            c = i * g if c is None else i * g + f * c
            h = (torch.sigmoid(c * 2.0) * 2.0 - 1.0) * o
    assert h is not None
    return h


# --- backward passes: gradients w.r.t. proj, w_hh and (GRU) b_hn ---------------------------


def _rnn_backward(
    grad_h: Tensor, saved: list[Tensor], w_hh: Tensor, shape: torch.Size, length: int
) -> tuple[Tensor, Tensor, Tensor | None]:
    states, last = saved
    grad_proj = grad_h.new_zeros(shape)
    batch, d, k, rows, _ = _dims(grad_proj, length, 1)
    grad_w = torch.zeros_like(w_hh)
    half = grad_h.new_tensor(0.5)
    dh = grad_h
    for j in reversed(range(k)):
        h = last if j == k - 1 else states[j]
        da = torch.addcmul(half, h, h, value=-0.5).mul_(dh)  # d/d(2u) of tanh(u): (1 − h²)/2
        grad_proj[:, j : j + length].add_(da)
        if j == 0:
            break
        flat = da.view(rows, d)
        grad_w.addmm_(flat.t(), states[j - 1].view(rows, d))
        dh = torch.mm(flat, w_hh).view(batch, length, d)
    return grad_proj, grad_w, None


def _gru_backward(
    grad_h: Tensor, saved: list[Tensor], w_hh: Tensor, shape: torch.Size, length: int
) -> tuple[Tensor, Tensor, Tensor | None]:
    gates, cands, states = saved
    grad_proj = grad_h.new_zeros(shape)
    batch, d, k, rows, width = _dims(grad_proj, length, 3)
    grad_w = torch.zeros_like(w_hh)
    grad_bn = grad_h.new_zeros(d)
    half = grad_h.new_tensor(0.5)
    da = grad_h.new_empty((batch, length, width))  # d(pre-activations) of one step
    dr, dz, dn = da[..., :d], da[..., d : 2 * d], da[..., 2 * d :]
    dh = grad_h
    for j in reversed(range(k)):
        a, n = gates[j], cands[j]
        r, z, ghn = a[..., :d], a[..., d : 2 * d], a[..., 2 * d :]
        h_prev = states[j - 1] if j > 0 else None
        if h_prev is None:  # dz = dh ⊙ (h − n) ⊙ z(1 − z), h = 0
            torch.mul(n, dh, out=dz).neg_()
        else:
            torch.sub(h_prev, n, out=dz).mul_(dh)
        dz.mul_(z)
        dz.addcmul_(dz, z, value=-1.0)
        # candidate pre-activation (doubled), in dn: dv = dh ⊙ (1 − z) ⊙ (1 − n²)/2
        torch.addcmul(dh, dh, z, value=-1.0, out=dn)
        dn.mul_(torch.addcmul(half, n, n, value=-0.5, out=dr))  # dr as scratch
        torch.mul(dn, ghn, out=dr).mul_(r)  # dr = dv ⊙ (W_hn h + b_hn) ⊙ r(1 − r)
        dr.addcmul_(dr, r, value=-1.0)
        gp = grad_proj[:, j : j + length]
        gp.add_(da)  # gradient of the projection: [dr, dz, dv]
        dn.mul_(r)  # gradient of W_hn h + b_hn: dv ⊙ r
        grad_bn.add_(dn.sum(dim=(0, 1)))
        if h_prev is None:
            break
        flat = da.view(rows, width)
        grad_w.addmm_(flat.t(), h_prev.view(rows, d))
        dh = torch.mul(dh, z).view(rows, d).addmm_(flat, w_hh).view(batch, length, d)
    return grad_proj, grad_w, grad_bn


def _lstm_backward(
    grad_h: Tensor, saved: list[Tensor], w_hh: Tensor, shape: torch.Size, length: int
) -> tuple[Tensor, Tensor, Tensor | None]:
    gates, cells, states = saved
    grad_proj = grad_h.new_zeros(shape)
    batch, d, k, rows, width = _dims(grad_proj, length, 4)
    grad_w = torch.zeros_like(w_hh)
    one, half = grad_h.new_tensor(1.0), grad_h.new_tensor(0.5)
    da = grad_h.new_empty((batch, length, width))
    di, df, dg, do = da[..., :d], da[..., d : 2 * d], da[..., 2 * d : 3 * d], da[..., 3 * d :]
    dh = grad_h
    dc: Tensor | None = None
    for j in reversed(range(k)):
        a, c = gates[j], cells[j]
        i, f, g, o = a[..., :d], a[..., d : 2 * d], a[..., 2 * d : 3 * d], a[..., 3 * d :]
        tc = torch.mul(c, 2.0).sigmoid_().mul_(2.0).sub_(1.0)  # tanh(c)
        torch.mul(dh, tc, out=do).mul_(o)  # do = dh ⊙ tanh(c) ⊙ o(1 − o)
        do.addcmul_(do, o, value=-1.0)
        torch.addcmul(one, tc, tc, value=-1.0, out=dg)  # scratch: 1 − tanh²(c)
        dc_h = torch.mul(dg, o, out=tc).mul_(dh)
        dc = dc_h if dc is None else dc.add_(dc_h)
        torch.mul(dc, g, out=di).mul_(i)  # di = dc ⊙ g ⊙ i(1 − i)
        di.addcmul_(di, i, value=-1.0)
        if j == 0:
            df.zero_()
        else:
            torch.mul(dc, cells[j - 1], out=df).mul_(f)
            df.addcmul_(df, f, value=-1.0)
        torch.addcmul(half, g, g, value=-0.5, out=dg).mul_(i).mul_(dc)  # doubled g pre-act
        dc.mul_(f)
        grad_proj[:, j : j + length].add_(da)
        if j == 0:
            break
        flat = da.view(rows, width)
        grad_w.addmm_(flat.t(), states[j - 1].view(rows, d))
        dh = torch.mm(flat, w_hh).view(batch, length, d)
    return grad_proj, grad_w, None


_BACKWARD = {"rnn": _rnn_backward, "gru": _gru_backward, "lstm": _lstm_backward}


class _LocalRecurrence(torch.autograd.Function):
    """The ``k`` recurrent steps of all windows, with a hand-written backward pass."""

    @staticmethod
    def forward(
        ctx: Any, proj: Tensor, w_hh: Tensor, b_hn: Tensor | None, cell: str, length: int
    ) -> Tensor:
        h, saved = _FORWARD[cell](proj, w_hh, b_hn, length, True)
        if cell == "rnn":
            saved.append(h)
        ctx.cell, ctx.length, ctx.shape = cell, length, proj.shape
        ctx.present = [t is not None for t in saved]
        ctx.save_for_backward(w_hh, *(t for t in saved if t is not None))
        return h

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad_h: Tensor) -> tuple[Tensor | None, ...]:
        w_hh, *kept = ctx.saved_tensors
        saved = [kept.pop(0) if present else None for present in ctx.present]
        grad_proj, grad_w, grad_b = _BACKWARD[ctx.cell](grad_h, saved, w_hh, ctx.shape, ctx.length)
        return grad_proj, grad_w, grad_b, None, None


def _autocast_off(device_type: str) -> contextlib.AbstractContextManager[Any]:
    """Disable autocast inside the fused recurrence (its dtype is set by the projection)."""
    try:
        enabled = torch.is_autocast_enabled(device_type)
    except (TypeError, RuntimeError):
        enabled = torch.is_autocast_enabled()
    return torch.autocast(device_type, enabled=False) if enabled else contextlib.nullcontext()


class LocalRNN(nn.Module):
    """R-Transformer LocalRNN (Wang et al., §3.1, eqs. 2-3): a shared RNN over each window.

    ``h_t = RNN(x_{t-k+1}, …, x_t)`` from a zero state, with zero padding before the start;
    ``[B, L, D] -> [B, L, D]`` for any length ``L``. ``cell`` is ``rnn`` (tanh), ``gru`` or
    ``lstm``; the hidden size is ``d_model``. The parameters are those of ``self.rnn``, a
    standard one-layer batch-first ``nn.RNN`` / ``nn.GRU`` / ``nn.LSTM``.
    """

    def __init__(self, d_model: int, window: int, cell: str = "gru") -> None:
        super().__init__()
        if not isinstance(cell, str) or cell.lower() not in CELLS:
            raise unknown_choice("LocalRNN cell", cell, CELLS)
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ConfigError(f"LocalRNN window must be an integer >= 1, got {window!r}")
        if isinstance(d_model, bool) or not isinstance(d_model, int) or d_model < 1:
            raise ConfigError(f"LocalRNN d_model must be an integer >= 1, got {d_model!r}")
        self.d_model = d_model
        self.window = window
        self.cell = cell.lower()
        self.rnn: nn.RNNBase = CELLS[self.cell](d_model, d_model, num_layers=1, batch_first=True)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, window={self.window}, cell={self.cell}"

    def _check_input(self, x: Tensor) -> None:
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ConfigError(f"LocalRNN expects input [B, T, {self.d_model}], got {list(x.shape)}")

    def _weights(self) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """``W_ih``, the projection bias, ``W_hh`` and (GRU) ``b_hn``, ``tanh`` rows doubled.

        The hidden bias is folded into the projection bias (``b_ih + b_hh``), except GRU's
        ``b_hn``, which sits inside ``r ⊙ (W_hn h + b_hn)``.
        """
        rnn, d = self.rnn, self.d_model
        w_ih = rnn.weight_ih_l0
        scale = torch.ones(w_ih.shape[0], device=w_ih.device, dtype=w_ih.dtype)
        block = _TANH_GATE[self.cell]
        scale[block * d : (block + 1) * d] = 2.0
        params = (rnn.weight_ih_l0, rnn.bias_ih_l0, rnn.weight_hh_l0, rnn.bias_hh_l0)
        w_ih, b_ih, w_hh, b_hh = (p * (scale[:, None] if p.dim() == 2 else scale) for p in params)
        if self.cell == "gru":
            return (
                w_ih,
                torch.cat([b_ih[: 2 * d] + b_hh[: 2 * d], b_ih[2 * d :]]),
                w_hh,
                b_hh[2 * d :],
            )
        return w_ih, b_ih + b_hh, w_hh, None

    def _run(self, x: Tensor, pad: Tensor | None, length: int) -> Tensor:
        """Windows of the last ``length`` positions of ``[pad, x]`` (``pad`` None = zeros)."""
        w_ih, b_ih, w_hh, b_hn = self._weights()
        proj = nn.functional.linear(x, w_ih, b_ih)
        k = self.window
        if k > 1 and pad is None:  # zero inputs project to the input bias alone
            head = b_ih.to(proj.dtype).expand(x.shape[0], k - 1, -1)
            proj = torch.cat([head, proj], dim=1)
        elif k > 1 and pad is not None:
            proj = torch.cat([nn.functional.linear(pad, w_ih, b_ih).to(proj.dtype), proj], 1)
        w_hh = w_hh.to(proj.dtype)
        b_hn = b_hn.to(proj.dtype) if b_hn is not None else None
        with _autocast_off(proj.device.type):
            if torch.compiler.is_compiling():
                return _traced_recurrence(proj, w_hh, b_hn, self.cell, length)
            if torch.is_grad_enabled() and (
                proj.requires_grad
                or w_hh.requires_grad
                or (b_hn is not None and b_hn.requires_grad)
            ):
                return _LocalRecurrence.apply(proj, w_hh, b_hn, self.cell, length)
            return _FORWARD[self.cell](proj, w_hh, b_hn, length, False)[0]

    def forward(self, x: Tensor) -> Tensor:
        """``[B, L, D] -> [B, L, D]``: the last hidden state of each position's window."""
        self._check_input(x)
        return self._run(x, None, x.shape[1])

    def step(self, x: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Incremental decoding: outputs for ``T_new`` new positions and the next state.

        ``x`` is ``[B, T_new, D]``; ``state`` holds the previous ``window - 1`` inputs,
        ``[B, window - 1, D]`` (``None`` = sequence start, i.e. zero padding). Chunked calls
        give exactly the outputs of one :meth:`forward` over the whole sequence.
        """
        self._check_input(x)
        batch, t_new, _ = x.shape
        if t_new < 1:
            raise ConfigError("LocalRNN.step needs at least one new position (T_new >= 1)")
        k = self.window
        expected = (batch, k - 1, self.d_model)
        if state is None:
            state = x.new_zeros(expected)
        elif tuple(state.shape) != expected:
            raise ConfigError(
                f"LocalRNN state must be [B, window - 1, D] = {list(expected)}, "
                f"got {list(state.shape)}"
            )
        out = self._run(x, state if k > 1 else None, t_new)
        new_state = torch.cat([state, x], dim=1)[:, t_new:] if k > 1 else state
        return out, new_state
