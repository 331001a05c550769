"""Language-model evaluation of a token stream: loss in nats, bits per character/byte, perplexity.

Every target token of a split is counted exactly once (see
:mod:`highway_transformer.data.batching`), or with ``data.eval_layout=reference`` the targets
Transformer-XL's data iterator scores; Transformer-XL memory is carried along each row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ..config import DataConfig
from ..data.batching import IGNORE, TensorTokens, TokenReader, row_layout
from ..models.families import memory_policy
from ..models.lm import LanguageModel
from ..nn.memory import MemoryPolicy
from ..runtime.device import autocast_context
from ..runtime.world import World
from .base import EvalProgress, finite_or_none, standard_error


@dataclass
class EvalResult:
    loss: float  # mean NLL per target token, nats
    tokens: int
    loss_se: float = math.nan  # standard error of ``loss`` from the per-token variance

    @property
    def bits(self) -> float:
        """Bits per token: bpc at character level (line ends count as symbols)."""
        return self.loss / math.log(2)

    @property
    def perplexity(self) -> float:
        return math.exp(min(self.loss, 700.0))

    def as_dict(self, prefix: str = "") -> dict[str, float]:
        return {
            f"{prefix}loss": self.loss,
            f"{prefix}bpc": self.bits,
            f"{prefix}ppl": self.perplexity,
            f"{prefix}tokens": self.tokens,
            f"{prefix}loss_se": finite_or_none(self.loss_se),
        }


@torch.no_grad()
def evaluate(
    model: LanguageModel,
    ids: Tensor | TokenReader,
    data: DataConfig,
    device: torch.device | str = "cpu",
    precision: str = "fp32",
    max_tokens: int | None = None,
    world: World | None = None,
    policy: MemoryPolicy | None = None,
    progress: EvalProgress | None = None,
) -> EvalResult:
    """Mean NLL of ``ids`` under ``model`` with the evaluation batching of ``data``.

    ``ids`` is a tensor or any :class:`~highway_transformer.data.batching.TokenReader` (token
    ids in a file): the rows of the layout are read one window at a time, so memory does not
    grow with the stream. With several processes (``world``) each takes its share of the
    evaluation rows and the summed losses and counts are all-reduced: every rank gets the
    single-process figure. A Transformer-XL model runs with ``policy`` (default: the
    evaluation settings of its ``model.memory``), its memory carried from window to window;
    the model itself is left as it was, training mode included. ``progress`` is called with
    the targets scored so far and this process's targets in all (progress displays).
    """
    world = world or World()
    device = torch.device(device)
    tokens = TensorTokens(ids) if isinstance(ids, Tensor) else ids
    length = len(tokens) if not max_tokens else min(len(tokens), max_tokens + 1)
    seq_len = data.eval_seq_len or data.seq_len
    context = data.context if data.eval_context is None else data.eval_context
    layout = row_layout(data.eval_layout, length, data.eval_batch_size)
    # the reference iterator's last segment is shorter, also for a model without memory
    short_last = model.uses_memory or data.eval_layout == "reference"
    mine = world.uneven_rows(layout.rows)
    if policy is None:
        policy = memory_policy(model.config, evaluation=True)
    was_training = model.training
    model.eval()
    total, total_sq, count, memory = 0.0, 0.0, 0, None
    expected = layout.targets(mine) if progress is not None else 0
    try:
        stream = layout.windows(tokens, mine, seq_len, context, short_last)
        for window in stream if len(range(layout.rows)[mine]) else ():
            x = window.inputs.to(device)
            y = window.targets[:, window.loss_start :].to(device)
            with autocast_context(device, precision):
                hidden, memory = model(x, memory=memory, policy=policy)
            # the output layer outside autocast: evaluation scores fp32 logits
            nll = model.token_nll(hidden[:, window.loss_start :], y)
            nll = nll.double()  # float64: sums independent of the sharding
            # one device-to-host copy a window: the sum, the sum of squares (ignored targets
            # give 0) and the number of targets scored
            window_sum, window_sq, scored = torch.stack(
                [nll.sum(), nll.square().sum(), (y != IGNORE).sum().double()]
            ).tolist()
            total, total_sq, scored = total + window_sum, total_sq + window_sq, int(scored)
            count += scored
            if progress is not None:
                progress(count, expected)
    finally:
        model.train(was_training)
    total, total_sq, count = world.all_reduce_sum([total, total_sq, count])
    count = int(count)
    return EvalResult(total / max(count, 1), count, standard_error(total, total_sq, count))
