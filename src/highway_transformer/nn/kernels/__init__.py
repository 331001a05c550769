"""The fast kernels, behind one boundary: each computes exactly a function of
:mod:`highway_transformer.nn.reference` and is tested against it, and each is chosen here
alone. The modules that the config builds (:mod:`..relative`, :mod:`..local_rnn`) show the
paper's computation in their ``forward`` (the readable branch) and call in behind one
``if fast_path():``; nothing here knows about configs or layers.

- :func:`relative_attention`: Transformer-XL's ``softmax(scale · (AC + shift(BD)), masked) V``
  (oracle :func:`..reference.rel_attention`), by ``model.attention_kernel``: the core with a
  hand-written backward (:mod:`.relative_core`) or the fused Triton kernel
  (:mod:`.relative_triton`).
- :func:`fused_local_rnn`: the R-Transformer's LocalRNN (oracle :func:`..reference.local_rnn`),
  one shared projection and a hand-written backward (:mod:`.local_rnn_cell`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor

from ...errors import ConfigError
from . import local_rnn_cell, relative_core
from .relative_core import zero_rows

#: The dtypes ``auto`` gives the fused kernel (float64 stays on the core).
_FUSED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)

__all__ = [
    "attention_function",
    "fast_path",
    "fused_local_rnn",
    "readable",
    "relative_attention",
]

#: Set by :func:`readable`: the modules run their readable branch instead of these kernels.
_READABLE = False


def fast_path() -> bool:
    """Whether a module runs its fast kernel (the default) or its readable branch, the
    paper's computation as written (inside :func:`readable`); the one place this is chosen."""
    return not _READABLE


@contextmanager
def readable() -> Iterator[None]:
    """Run every module's readable branch instead of its kernel (to read or step through the
    computation, and for the tests that hold the two equal)."""
    global _READABLE  # noqa: PLW0603 - one process-wide switch, read by fast_path
    before, _READABLE = _READABLE, True
    try:
        yield
    finally:
        _READABLE = before


def fused_local_rnn(  # noqa: PLR0913 - the cell's weights
    x: Tensor,
    history: Tensor | None,
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor,
    b_hh: Tensor,
    cell: str,
    window: int,
) -> Tensor:
    """RT eq. 2 for every position: the last hidden state of the ``window`` inputs ending at
    ``t`` of ``[history ∘ x]`` from a zero state (``history [B, k−1, D]``, None: zeros).
    ``x [B, L, D] -> [B, L, d]``; ``cell`` is ``rnn`` | ``gru`` | ``lstm`` with the weights
    of ``nn.RNN`` / ``nn.GRU`` / ``nn.LSTM`` (PyTorch's gate order). The hand-written backward
    runs where a gradient is wanted; under ``torch.compile``, plain expressions."""
    return local_rnn_cell.local_rnn(x, history, w_ih, w_hh, b_ih, b_hh, cell, window)


def attention_function(kernel: str, q_u: Tensor) -> Callable[..., Tensor]:
    """What computes relative attention for ``kernel`` (``model.attention_kernel``) and
    operands like ``q_u``: :func:`.relative_core.relative_attention` or the Triton kernel's
    :func:`.relative_triton.relative_attention` (the same signature).

    ``auto``: the core until the kernel has been checked on a GPU
    (:data:`.relative_triton.VERIFIED_ON_GPU`); then the fused kernel on CUDA when triton
    imports, for float16/bfloat16/float32 and more than one query (a decoding step stays on
    the core), outside ``torch.compile`` (which compiles the core itself; the kernel would be
    a graph break), else the core. ``fused`` where it cannot run is a :class:`ConfigError`
    saying what to do. Triton is imported here, on first use, never when this module is.
    """
    core = relative_core.relative_attention
    if kernel == "core" or (kernel == "auto" and q_u.device.type != "cuda"):
        return core
    if kernel == "auto" and torch.compiler.is_compiling():
        return core
    from . import relative_triton

    if kernel == "fused":
        reason = relative_triton.unavailable_reason(q_u.device)
        if reason is not None:
            raise ConfigError(reason)
        return relative_triton.relative_attention
    usable = relative_triton.VERIFIED_ON_GPU and relative_triton.available()
    usable = usable and q_u.dtype in _FUSED_DTYPES and q_u.shape[1] > 1
    return relative_triton.relative_attention if usable else core


def relative_attention(
    kernel: str,
    *,
    ac_query: Tensor,
    bd_query: Tensor,
    k: Tensor,
    values: Tensor,
    position_keys: Tensor,
    mask: Tensor | None,
    scale: float,
    dropout: float,
) -> Tensor:
    """``softmax(scale · (AC + shift(BD)), masked) V`` of every head, ``[B, L, H·dh]``.

    ``ac_query = q + u`` and ``bd_query = q + v`` are ``[H, B, L, dh]``; ``k`` and ``values``
    ``[B, H, K, dh]``; ``position_keys`` is ``W_kR R`` for the distances ``K-1 … 0``,
    ``[K, H·dh]``; ``mask [L, K]`` is True where a key is hidden (None: none is). The layout
    the kernels take (head-major ``H·B`` matrices, zero rows before the position keys for
    the shift) is made here.
    """
    n_h, bsz, q_len, d_h = ac_query.shape
    k_len = k.shape[2]
    dtype = ac_query.dtype
    # Zero rows before W_kR R: the padding column of rel_shift (more on a GPU, for aligned
    # rows); one query needs no shift.
    pad = 0 if q_len == 1 else zero_rows(k_len, ac_query.device)
    rows = F.pad(position_keys, (0, 0, pad, 0)) if pad else position_keys
    rows = rows.view(-1, n_h, d_h).transpose(0, 1)  # [H, K(+p), dh]
    q_u = ac_query.reshape(n_h * bsz, q_len, d_h)
    out = attention_function(kernel, q_u)(
        q_u,
        bd_query.reshape(n_h, bsz * q_len, d_h),
        k.transpose(0, 1).reshape(n_h * bsz, k_len, d_h).to(dtype),
        values.transpose(0, 1).reshape(n_h * bsz, k_len, d_h).to(dtype),
        rows.to(dtype),
        mask,
        scale,
        dropout,
    )  # [H·B, L, dh]
    return out.view(n_h, bsz, q_len, d_h).permute(1, 2, 0, 3).reshape(bsz, q_len, n_h * d_h)
