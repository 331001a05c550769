"""Model-holding strategies (``runtime/strategies.py``): the registry, and a single process's
``Replicated`` strategy: the identity wrap, no gradient sync to skip, the model itself on rank
0, verified weights loaded, and the optimizer state round trip."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import nn

from highway_transformer.errors import CheckpointError, ConfigError
from highway_transformer.runtime.strategies import STRATEGIES, Replicated, Sharded, strategy
from highway_transformer.runtime.world import World
from highway_transformer.storage.folder import CONFIG_FILE, MODEL_FILE, write_atomically
from highway_transformer.storage.weights import save_weights


def _model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


def test_the_registry_names_each_strategy_once() -> None:
    assert {"ddp": Replicated, "fsdp": Sharded} == STRATEGIES
    assert type(strategy("ddp")) is Replicated and type(strategy("fsdp")) is Sharded
    with pytest.raises(ConfigError, match="train.strategy") as info:
        strategy("fdsp")
    assert "Did you mean 'fsdp'" in str(info.value) and "\n" not in str(info.value)


def test_a_single_process_wraps_nothing_and_syncs_nothing() -> None:
    model, plain = _model(0), Replicated()
    assert plain.wrap(model, World()) is model
    x = torch.randn(5, 3)
    with plain.gradient_sync_off(model):  # no DDP: gradients accumulate as they would anyway
        model(x).sum().backward()
    once = [p.grad.clone() for p in model.parameters()]
    model(x).sum().backward()
    for p, g in zip(model.parameters(), once, strict=True):
        torch.testing.assert_close(p.grad, 2 * g)
    assert plain.full_model(model, World(), lambda: _model(1)) is model
    assert plain.full_model(model, World(rank=1, size=2), lambda: _model(1)) is None


def test_replicated_loads_verified_weights(tmp_path: Path) -> None:
    saved = _model(0)

    def write(folder: Path) -> None:
        save_weights(saved, folder / MODEL_FILE)
        (folder / CONFIG_FILE).write_text(json.dumps({}), encoding="utf-8")

    write_atomically(tmp_path / "ck", write)
    loaded = _model(1)
    Replicated().load_weights(loaded, tmp_path / "ck", lambda: _model(2))
    for a, b in zip(saved.state_dict().values(), loaded.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    data = bytearray((tmp_path / "ck" / MODEL_FILE).read_bytes())
    data[-1] ^= 0x01
    (tmp_path / "ck" / MODEL_FILE).write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="SHA-256"):
        Replicated().load_weights(loaded, tmp_path / "ck", lambda: _model(2))


def test_the_optimizer_state_round_trips() -> None:
    plain = Replicated()
    a, b = _model(0), _model(0)
    opt_a = torch.optim.Adam(a.parameters(), lr=0.1)
    opt_b = torch.optim.Adam(b.parameters(), lr=0.1)
    x = torch.randn(6, 3)
    for _ in range(2):
        opt_a.zero_grad()
        a(x).pow(2).sum().backward()
        opt_a.step()
    b.load_state_dict(a.state_dict())
    state = copy.deepcopy(plain.optimizer_state(a, opt_a))  # as saved: no shared tensors
    plain.load_optimizer_state(b, opt_b, state)
    for opt, model in ((opt_a, a), (opt_b, b)):  # one more step from the same state
        opt.zero_grad()
        model(x).pow(2).sum().backward()
        opt.step()
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q)
    assert opt_b.state_dict()["state"][0]["step"] == 3


class _Shardable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[bool] = []

    def set_requires_gradient_sync(self, sync: bool) -> None:
        self.calls.append(sync)


def test_sharded_gradient_sync_off_turns_sync_back_on_even_after_an_error() -> None:
    wrapped = _Shardable()
    with Sharded().gradient_sync_off(wrapped):
        assert wrapped.calls == [False]
    assert wrapped.calls == [False, True]

    def failing() -> Iterator[None]:
        with Sharded().gradient_sync_off(wrapped):
            raise RuntimeError("backward failed")

    with pytest.raises(RuntimeError, match="backward failed"):
        failing()
    assert wrapped.calls == [False, True, False, True]
