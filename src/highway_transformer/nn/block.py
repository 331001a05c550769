"""A block is an ordered list of (sublayer, connection) pairs.

Vanilla Transformer: ``[attn, ffn]`` (HT eqs. 7-9); R-Transformer: ``[rnn] * n + [attn, ffn]``
(RT eqs. 2-8); Transformer-XL: ``[attn (relative, with memory), ffn]``; an encoder-decoder's
decoder layer: ``[attn, cross, ffn]``; ``models.builders`` builds every block. Every sublayer
rejoins the stream through its :class:`~highway_transformer.nn.connections.Connection`, so the
gate of each sublayer is chosen independently when the model is built.

Sublayers share one call signature, ``sublayer(h, context=None, *, state=None, **options)``:
``context`` is the Transformer-XL memory (attention only), ``state`` a per-sublayer dict for
incremental decoding (KV cache, LocalRNN window), ``options`` run-time attention knobs and
the encoder-decoder's padding masks and encoder output (sublayers ignore what they do not use).

Oracle of the R-Transformer block: :func:`.reference.r_transformer_block`.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Any

from torch import Tensor, nn

from ..errors import ConfigError
from .attention import KVCache, MultiHeadAttention
from .connections import Connection
from .feedforward import FeedForward, SwiGLU
from .relative import RelativeMultiHeadAttention


class AttentionSublayer(nn.Module):
    """Adapts an attention module (dot, relative or Shaw) to the sublayer signature."""

    def __init__(self, attention: nn.Module) -> None:
        super().__init__()
        self.attention = attention
        self.kind = type(attention).__name__

    @property
    def supports_cache(self) -> bool:
        return isinstance(self.attention, MultiHeadAttention | RelativeMultiHeadAttention)

    @property
    def uses_memory(self) -> bool:
        return isinstance(self.attention, RelativeMultiHeadAttention)

    def forward(
        self, h: Tensor, context: Tensor | None = None, *, state: dict | None = None, **options: Any
    ) -> Tensor:
        if isinstance(self.attention, MultiHeadAttention):
            if context is not None:
                raise ConfigError(
                    "segment memory needs model.family=xl (relative attention with memory)"
                )
            cache = None if state is None else state.setdefault("kv", KVCache())
            return self.attention(h, cache=cache)
        if self.uses_memory:
            return self.attention(h, context, cache=state, **options)
        if state is not None:
            raise ConfigError(f"{self.kind} has no incremental cache; decode by recomputation")
        return self.attention(h)


class FeedForwardSublayer(FeedForward):
    """The position-wise FFN with the sublayer signature (context and state are unused)."""

    def forward(  # type: ignore[override]
        self, h: Tensor, context: Tensor | None = None, *, state: dict | None = None, **options: Any
    ) -> Tensor:
        return super().forward(h)


class SwiGLUSublayer(SwiGLU):
    """The SwiGLU FFN with the sublayer signature (context and state are unused)."""

    def forward(  # type: ignore[override]
        self, h: Tensor, context: Tensor | None = None, *, state: dict | None = None, **options: Any
    ) -> Tensor:
        return super().forward(h)


#: ``model.ffn`` name -> its sublayer class (:data:`.feedforward.FFNS` with the signature).
FFN_SUBLAYERS: dict[str, type[FeedForwardSublayer | SwiGLUSublayer]] = {
    "relu": FeedForwardSublayer,
    "swiglu": SwiGLUSublayer,
}


class LocalRNNSublayer(nn.Module):
    """The R-Transformer LocalRNN (RT §3.1), optionally followed by Linear+ReLU (RT code)."""

    def __init__(self, local_rnn: nn.Module, d_model: int, linear_relu: bool = False) -> None:
        super().__init__()
        self.local_rnn = local_rnn
        self.output = nn.Sequential(nn.Linear(d_model, d_model), nn.ReLU()) if linear_relu else None

    def forward(
        self, h: Tensor, context: Tensor | None = None, *, state: dict | None = None, **options: Any
    ) -> Tensor:
        if state is None:
            y = self.local_rnn(h)
        else:
            y, state["window"] = self.local_rnn.step(h, state.get("window"))
        return y if self.output is None else self.output(y)


#: Sublayer kinds that act on each position alone (the rest mix positions).
POSITIONWISE = frozenset({"ffn"})


class Block(nn.Module):
    """Applies its sublayers in order, each through its own connection."""

    def __init__(self, kinds: list[str], sublayers: list[nn.Module], connections: list[Connection]):
        super().__init__()
        if not len(kinds) == len(sublayers) == len(connections):
            raise ValueError("kinds, sublayers and connections must have the same length")
        self.kinds = list(kinds)
        self.sublayers = nn.ModuleList(sublayers)
        self.connections = nn.ModuleList(connections)
        mixing = [i for i, kind in enumerate(self.kinds) if kind not in POSITIONWISE]
        #: Where the position-wise tail starts: from here a position needs no other.
        self.tail = mixing[-1] + 1 if mixing else 0

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None = None,
        state: list[dict] | None = None,
        keep_last: int | None = None,
        **options: Any,
    ) -> Tensor:
        """``keep_last``: only the last positions' outputs are wanted; the position-wise
        sublayers after the last mixing one run on those alone (the same values, less work:
        a language model scoring the end of its window)."""
        for i, (kind, sublayer, connection) in enumerate(
            zip(self.kinds, self.sublayers, self.connections, strict=True)
        ):
            if i == self.tail:
                x = _last(x, keep_last)
            call = partial(sublayer, state=None if state is None else state[i], **options)
            x = connection(x, call, context=memory if kind == "attn" else None)
        return _last(x, keep_last)


def _last(x: Tensor, keep: int | None) -> Tensor:
    """The last ``keep`` positions of ``x [B, L, D]`` (all of them for None)."""
    return x if keep is None or keep >= x.shape[1] else x[:, x.shape[1] - keep :]


def collect_gate_biases(blocks: Iterable[Block], prefix: str = "") -> dict[str, Tensor]:
    """Learned gate biases b1 by stable name ``{prefix}layer{N}.{kind}[i]`` (1-based layers;
    a kind repeated within a block, like the R-Transformer's LocalRNNs, gets an index)."""
    out: dict[str, Tensor] = {}
    for i, block in enumerate(blocks):
        seen: dict[str, int] = {}
        for kind, connection in zip(block.kinds, block.connections, strict=True):
            seen[kind] = seen.get(kind, 0) + 1
            bias = connection.combiner.gate_bias()
            if bias is None:
                continue
            suffix = "" if block.kinds.count(kind) == 1 else str(seen[kind])
            out[f"{prefix}layer{i + 1}.{kind}{suffix}"] = bias
    return out
