"""Blocks (``nn/block.py``): sublayers applied in order through their own connections, the
memory given to attention alone, one state per sublayer, the sublayer adapters, and the
names :func:`collect_gate_biases` gives the learned gate biases."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import Tensor, nn

from highway_transformer.errors import ConfigError
from highway_transformer.nn.attention import MultiHeadAttention
from highway_transformer.nn.block import (
    AttentionSublayer,
    Block,
    FeedForwardSublayer,
    LocalRNNSublayer,
    collect_gate_biases,
)
from highway_transformer.nn.combiner import Residual
from highway_transformer.nn.connections import Connection, build_combiner
from highway_transformer.nn.decoding import KVCache
from highway_transformer.nn.local_rnn import LocalRNN

D = 4


class Recording(nn.Module):
    """A sublayer ``h -> scale·h + offset (+ context)`` that records how it was called."""

    def __init__(self, name: str, scale: float, log: list[tuple]) -> None:
        super().__init__()
        self.name, self.scale, self.log = name, scale, log
        self.offset = torch.linspace(-1.0, 1.0, D) * scale

    def forward(
        self, h: Tensor, context: Tensor | None = None, *, state: dict | None = None, **options: Any
    ) -> Tensor:
        self.log.append((self.name, context, state, options))
        y = self.scale * h + self.offset
        return y if context is None else y + context


def _block(kinds: list[str], log: list[tuple], norm: str = "post") -> Block:
    sublayers = [Recording(kind, 1.0 + i, log) for i, kind in enumerate(kinds)]
    connections = [Connection(D, Residual(), norm) for _ in kinds]
    return Block(kinds, sublayers, connections)


def _x(seed: int = 0) -> Tensor:
    return torch.randn(2, 3, D, generator=torch.Generator().manual_seed(seed))


def test_sublayers_run_in_order_each_through_its_connection() -> None:
    log: list[tuple] = []
    block = _block(["rnn", "attn", "ffn"], log)
    x = _x()
    expected = x
    for sublayer, connection in zip(block.sublayers, block.connections, strict=True):
        expected = connection(expected, lambda h, s=sublayer: s.scale * h + s.offset)  # by hand
    torch.testing.assert_close(block(x), expected)
    assert [name for name, *_ in log] == ["rnn", "attn", "ffn"]
    swapped = Block(["ffn", "attn", "rnn"], list(block.sublayers)[::-1], list(block.connections))
    assert not torch.allclose(swapped(x), expected)  # the order matters


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_the_memory_goes_to_attention_alone(norm: str) -> None:
    log: list[tuple] = []
    block = _block(["rnn", "attn", "ffn"], log, norm)
    memory = _x(1)
    block(_x(), memory=memory)
    contexts = {name: context for name, context, _, _ in log}
    assert contexts["rnn"] is None and contexts["ffn"] is None
    attn = block.connections[1]
    expected = memory if norm == "post" else attn.norm(memory)  # pre-LN: normalised too
    torch.testing.assert_close(contexts["attn"], expected)


def test_each_sublayer_gets_its_own_state_and_every_option() -> None:
    log: list[tuple] = []
    block = _block(["rnn", "rnn", "attn", "ffn"], log)
    states: list[dict] = [{"i": i} for i in range(4)]
    block(_x(), state=states, same_length=True)
    assert [state for _, _, state, _ in log] == states
    assert all(s is states[i] for i, (_, _, s, _) in enumerate(log))  # the very dicts
    assert all(options == {"same_length": True} for *_, options in log)
    log.clear()
    block(_x())
    assert all(state is None for _, _, state, _ in log)


def test_kinds_sublayers_and_connections_must_pair_up() -> None:
    with pytest.raises(ValueError, match="same length"):
        Block(["attn", "ffn"], [nn.Identity()], [Connection(D, Residual())] * 2)


def test_gate_biases_are_named_by_layer_and_kind() -> None:
    def block(kinds: list[str], gated: set[int]) -> Block:
        combiners = [build_combiner("sdu" if i in gated else "none", D) for i in range(len(kinds))]
        connections = [Connection(D, c) for c in combiners]
        return Block(kinds, [nn.Identity() for _ in kinds], connections)

    blocks = [block(["rnn", "rnn", "attn", "ffn"], {0, 1, 2}), block(["attn", "ffn"], {1})]
    biases = collect_gate_biases(blocks)
    assert list(biases) == ["layer1.rnn1", "layer1.rnn2", "layer1.attn", "layer2.ffn"]
    gate = blocks[1].connections[1].combiner
    assert biases["layer2.ffn"].data_ptr() == gate.proj.bias.data_ptr()  # b1: a view
    assert list(collect_gate_biases(blocks[1:], prefix="decoder.")) == ["decoder.layer1.ffn"]
    assert collect_gate_biases([block(["attn", "ffn"], set())]) == {}


def test_dot_attention_keeps_a_kv_cache_and_refuses_a_memory() -> None:
    torch.manual_seed(0)
    sublayer = AttentionSublayer(MultiHeadAttention(D, 2))
    assert sublayer.supports_cache and not sublayer.uses_memory
    x = _x()
    state: dict = {}
    steps = [sublayer(x[:, i : i + 1], state=state) for i in range(3)]
    assert isinstance(state["kv"], KVCache) and state["kv"].length == 3
    torch.testing.assert_close(torch.cat(steps, 1), sublayer(x), atol=1e-6, rtol=0)
    with pytest.raises(ConfigError, match="segment memory needs model.family=xl"):
        sublayer(x, _x(1))


def test_ffn_and_local_rnn_sublayers_ignore_what_they_do_not_use() -> None:
    torch.manual_seed(0)
    ffn = FeedForwardSublayer(D, 8)
    x = _x()
    torch.testing.assert_close(
        ffn(x, _x(1), state={}, same_length=True), ffn.fc2(ffn.fc1(x).relu())
    )
    rnn = LocalRNNSublayer(LocalRNN(D, 2, "gru"), D, linear_relu=True)
    full = rnn(x)
    torch.testing.assert_close(full, rnn.output(rnn.local_rnn(x)))
    assert torch.all(full >= 0)  # Linear + ReLU after the LocalRNN (RT code)
    state: dict = {}
    steps = [rnn(x[:, i : i + 1], state=state) for i in range(3)]  # window carried in state
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-6, rtol=0)
    assert "window" in state
