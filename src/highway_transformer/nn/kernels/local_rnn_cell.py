"""LocalRNN's fused recurrence with a hand-written backward (RT §3.1, eq. 2).

Computes exactly :func:`..reference.local_rnn` (its readable form: :class:`..local_rnn.LocalRNN`'s
forward). Where it gains: the input projection of a position is the same in every window that
holds it, so it is made once for the padded sequence and step ``j`` of all ``B·L`` windows reads
a shifted view of it; the first step skips the recurrent product (``h_0 = 0``); the gate maths
(PyTorch gate orders: GRU ``r, z, n``; LSTM ``i, f, g, o``) runs in place through ``out=``
views; ``tanh(u)`` is ``2·sigmoid(2u) − 1`` (cheaper on a CPU, equal within ~2e-7) with the
rows that feed a ``tanh`` doubled, so one ``sigmoid`` covers all gates; the backward keeps per
step only what it needs. Under ``torch.compile`` the same steps run as out-of-place
expressions (:func:`_traced_recurrence`): the compiler cannot trace ``out=`` writes.

Shapes: ``x [B, L, D]``, ``history [B, k−1, D]`` or None (zeros), output ``[B, L, d]``.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

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


def _doubled(
    cell: str, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor, b_hh: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """``W_ih``, the projection bias, ``W_hh`` and (GRU) ``b_hn``, ``tanh`` rows doubled.

    The hidden bias is folded into the projection bias (``b_ih + b_hh``), except GRU's
    ``b_hn``, which sits inside ``r ⊙ (W_hn h + b_hn)``.
    """
    d = w_hh.shape[1]
    scale = torch.ones(w_ih.shape[0], device=w_ih.device, dtype=w_ih.dtype)
    block = _TANH_GATE[cell]
    scale[block * d : (block + 1) * d] = 2.0
    w_ih, w_hh = w_ih * scale[:, None], w_hh * scale[:, None]
    b_ih, b_hh = b_ih * scale, b_hh * scale
    if cell == "gru":
        return w_ih, torch.cat([b_ih[: 2 * d] + b_hh[: 2 * d], b_ih[2 * d :]]), w_hh, b_hh[2 * d :]
    return w_ih, b_ih + b_hh, w_hh, None


def local_rnn(  # noqa: PLR0913 - the cell's weights
    x: Tensor,
    history: Tensor | None,
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor,
    b_hh: Tensor,
    cell: str,
    window: int,
) -> Tensor:
    """The last hidden state of every window of ``[history ∘ x]``, ``[B, L, d]``."""
    length = x.shape[1]
    w_ih, b_ih, w_hh, b_hn = _doubled(cell, w_ih, w_hh, b_ih, b_hh)
    proj = F.linear(x, w_ih, b_ih)
    if window > 1 and history is None:  # zero inputs project to the input bias alone
        head = b_ih.to(proj.dtype).expand(x.shape[0], window - 1, -1)
        proj = torch.cat([head, proj], dim=1)
    elif window > 1 and history is not None:
        proj = torch.cat([F.linear(history, w_ih, b_ih).to(proj.dtype), proj], 1)
    w_hh = w_hh.to(proj.dtype)
    b_hn = b_hn.to(proj.dtype) if b_hn is not None else None
    with _autocast_off(proj.device.type):
        if torch.compiler.is_compiling():
            return _traced_recurrence(proj, w_hh, b_hn, cell, length)
        if torch.is_grad_enabled() and (
            proj.requires_grad or w_hh.requires_grad or (b_hn is not None and b_hn.requires_grad)
        ):
            return _LocalRecurrence.apply(proj, w_hh, b_hn, cell, length)
        return _FORWARD[cell](proj, w_hh, b_hn, length, False)[0]
