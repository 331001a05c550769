"""Sequence models beyond language modelling (RT §4: pixel MNIST, polyphonic music; TCN tasks).

The same gated blocks as the language model
(:func:`~highway_transformer.models.builders.build_block`: Transformer ``[attn, ffn]``, HT
eqs. 4-9; R-Transformer ``[rnn] * n + [attn, ffn]``, RT eqs. 2-8; any gate of HT §3 per
layer), between a task-specific input and output:

* input: ``Linear(n_in, d)`` for real-valued or multi-hot steps ``[B, T, F]`` (88-key music
  rolls, one pixel, the adding problem's two channels), or ``Embedding(n_in, d)`` for token
  steps ``[B, T]`` (copy memory); sinusoidal position encodings (HT eq. 4) for the
  Transformer family only (the R-Transformer has none, RT §3);
* head: ``per_step`` (a Linear to ``n_out`` at every position: 88 note logits, copy-memory
  symbol logits) or ``pooled`` (the last real position, as the RT code does for MNIST, or the
  mean over real positions, then a Linear to ``n_out``: 10 digit classes, 1 regression value).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..config import Config, ModelConfig
from ..errors import ConfigError, DataError, unknown_choice
from ..nn.block import collect_gate_biases
from ..nn.dropout import Dropout
from ..nn.positional import SinusoidalPositionalEncoding
from .builders import build_blocks, final_norm, uses_absolute_positions
from .families import uses_memory
from .init import initialize
from .pretrained import PretrainedMixin

HEADS = ("per_step", "pooled")


def _pool_last(hidden: Tensor, mask: Tensor | None) -> Tensor:
    """The last real position (the RT code's MNIST head)."""
    if mask is None:
        return hidden[:, -1]
    last = (mask.long().sum(1) - 1).clamp_min(0)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


def _pool_mean(hidden: Tensor, mask: Tensor | None) -> Tensor:
    """The mean over real positions."""
    if mask is None:
        return hidden.mean(dim=1)
    weights = mask.to(hidden.dtype)[..., None]
    return (hidden * weights).sum(1) / weights.sum(1).clamp_min(1.0)


#: ``task.pooling`` name -> ``pool(hidden [B, T, D], mask [B, T] | None) -> [B, D]``.
POOLINGS = {"last": _pool_last, "mean": _pool_mean}


class SequenceModel(PretrainedMixin, nn.Module):
    """Input projection, (PE), N gated blocks, (final norm), per-step or pooled output head.

    ``forward(x, mask=None)``: ``x`` is ``[B, T, n_in]`` floats (``token_input=False``) or
    ``[B, T]`` ids; ``mask [B, T]`` bool marks real steps (True) of right-padded batches.
    Returns ``[B, T, n_out]`` (``per_step``) or ``[B, n_out]`` (``pooled``).
    """

    def __init__(
        self,
        config: ModelConfig,
        n_in: int,
        n_out: int,
        head: str = "per_step",
        token_input: bool = False,
        pooling: str = "last",
        causal: bool = True,
        max_len: int = 0,
    ) -> None:
        super().__init__()
        if head not in HEADS:
            raise unknown_choice("head", head, HEADS)
        if pooling not in POOLINGS:
            raise unknown_choice("task.pooling", pooling, POOLINGS)
        if n_in < 1 or n_out < 1:
            raise ConfigError(f"n_in and n_out must be >= 1, got {n_in} and {n_out}")
        if uses_memory(config) or config.attention not in (None, "dot"):
            raise ConfigError(
                "sequence tasks use model.family=transformer or rtransformer with dot-product "
                f"attention (got {config.family}, {config.attention}); set model.family"
            )
        self.config = config
        self.n_in, self.n_out = n_in, n_out
        self.head, self.pooling, self.token_input = head, pooling, token_input
        self.causal, self.max_len = causal, max_len
        d = config.d_model
        self.input: nn.Module = nn.Embedding(n_in, d) if token_input else nn.Linear(n_in, d)
        uses_pe = uses_absolute_positions(config)
        self.positional = SinusoidalPositionalEncoding(d) if uses_pe else None
        self.input_dropout = Dropout(config.embedding_dropout)
        self.blocks = build_blocks(config, causal=causal)
        self.final_norm = final_norm(config)
        self.output = nn.Linear(d, n_out, bias=config.bias)
        initialize(self, config)

    def init_arguments(self) -> dict:
        return {
            "n_in": self.n_in,
            "n_out": self.n_out,
            "head": self.head,
            "token_input": self.token_input,
            "pooling": self.pooling,
            "causal": self.causal,
            "max_len": self.max_len,
        }

    def check_length(self, length: int) -> None:
        """Raise :class:`DataError` when ``length`` exceeds ``max_len`` (0: no limit)."""
        if self.max_len and length > self.max_len:
            raise DataError(
                f"a sequence of {length} steps exceeds task.max_len={self.max_len}; "
                "raise task.max_len or shorten the input"
            )

    def features(self, x: Tensor) -> Tensor:
        """Hidden states ``[B, T, D]`` after the last block (and the final norm)."""
        if self.token_input:
            if x.dim() != 2:
                raise DataError(f"token input must be [B, T] ids, got shape {list(x.shape)}")
        elif x.dim() != 3 or x.shape[-1] != self.n_in:
            raise DataError(f"input must be [B, T, {self.n_in}], got shape {list(x.shape)}")
        self.check_length(x.shape[1])
        h = self.input(x)
        if self.positional is not None:
            h = self.positional(h)
        h = self.input_dropout(h)
        for block in self.blocks:
            h = block(h)
        return self.final_norm(h)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        hidden = self.features(x)
        if mask is not None and tuple(mask.shape) != tuple(hidden.shape[:2]):
            raise DataError(
                f"mask must be [B, T] = {list(hidden.shape[:2])}, got {list(mask.shape)}"
            )
        if self.head == "per_step":
            return self.output(hidden)
        return self.output(POOLINGS[self.pooling](hidden, mask))

    def gate_biases(self) -> dict[str, Tensor]:
        """Learned gate biases b1 by ``layer{N}.{kind}`` (1-based layers; HT Figs. 13-14)."""
        return collect_gate_biases(self.blocks)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)


def build_sequence_model(
    config: Config,
    n_in: int,
    n_out: int,
    head: str = "per_step",
    token_input: bool = False,
    causal: bool = True,
) -> SequenceModel:
    """A :class:`SequenceModel` from a full :class:`Config` (``model`` and ``task`` sections)."""
    return SequenceModel(
        config.model,
        n_in,
        n_out,
        head=head,
        token_input=token_input,
        pooling=config.task.pooling,
        causal=causal,
        max_len=config.task.max_len,
    )
