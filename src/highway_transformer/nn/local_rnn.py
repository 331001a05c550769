"""LocalRNN of the R-Transformer (Wang et al., "R-Transformer", §3.1, eqs. 2-3).

``h_t = RNN(x_{t-k+1}, …, x_t)`` from a zero state (eq. 2), zeros before the start, at every
position: ``h_1 … h_N = LocalRNN(x_1 … x_N)`` (eq. 3). Reference code: ``models/RTransformer.py``
``LocalRNN.get_K`` and ``forward``. Shapes ``[B, L, D] -> [B, L, D]``.

Oracles: :func:`.reference.local_rnn` and :func:`.reference.local_rnn_windows`; the fast
kernel is :func:`.kernels.fused_local_rnn`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..errors import ConfigError, unknown_choice
from . import kernels

CELLS: dict[str, type[nn.RNNBase]] = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}


class LocalRNN(nn.Module):
    """R-Transformer LocalRNN (Wang et al., §3.1, eqs. 2-3): a shared RNN over each window.

    ``cell`` is ``rnn`` (tanh), ``gru`` or ``lstm``, hidden size ``d_model``; the parameters are
    those of ``self.rnn``, a one-layer batch-first ``nn.RNN`` / ``nn.GRU`` / ``nn.LSTM``.
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

    def _weights(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``W_ih, W_hh, b_ih, b_hh`` of ``self.rnn`` (PyTorch's gate order)."""
        rnn = self.rnn
        return rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0

    def _cell(self, x: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        """One step of ``self.rnn``'s cell: ``h' = cell(x, h)`` (LSTM: and its cell state)."""
        if self.cell == "lstm":
            h, c = torch.lstm_cell(x, (h, c), *self._weights())
            return h, c
        step = torch.gru_cell if self.cell == "gru" else torch.rnn_tanh_cell
        return step(x, h, *self._weights()), c

    def forward(self, x: Tensor, history: Tensor | None = None) -> Tensor:
        """``[B, L, D] -> [B, L, D]``: the last hidden state of the window ending at each
        position; ``history [B, k-1, D]`` holds the inputs before ``x`` (None: zeros, the
        sequence start)."""
        self._check_input(x)
        if kernels.fast_path():
            return kernels.fused_local_rnn(x, history, *self._weights(), self.cell, self.window)
        batch, length, d = x.shape
        k = self.window
        before = x.new_zeros(batch, k - 1, d) if history is None else history.to(x.dtype)
        padded = torch.cat([before, x], dim=1)  # [B, k-1+L, D]: x_t is padded[:, t+k-1]
        h = x.new_zeros(batch * length, d)  # every window starts from h_0 = 0 (eq. 2)
        c = torch.zeros_like(h)  # the LSTM's cell state
        for j in range(k):  # h_j = cell(x_{t-k+1+j}, h_{j-1}), all windows t at once
            x_j = padded[:, j : j + length].reshape(batch * length, d)
            h, c = self._cell(x_j, h, c)
        return h.view(batch, length, d)

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
        out = self(x, state if k > 1 else None)
        new_state = torch.cat([state, x], dim=1)[:, t_new:] if k > 1 else state
        return out, new_state
