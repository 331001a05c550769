"""Transformer-XL memory (``nn/memory.py``): the policy's checks, the update that keeps the last
``mem_len`` layer inputs without gradient, and one-line errors for a memory of another model."""

from __future__ import annotations

import pytest
import torch

from highway_transformer.errors import ConfigError
from highway_transformer.nn.memory import MemoryPolicy, check_memory, update_memory


def test_a_policy_holds_integers_and_a_non_negative_memory() -> None:
    assert MemoryPolicy() == MemoryPolicy(mem_len=0, clamp_len=0, same_length=False)
    assert MemoryPolicy(mem_len=4, clamp_len=-1).clamp_len == -1  # <= 0: no clamping
    with pytest.raises(ConfigError, match="mem_len must be >= 0, got -1"):
        MemoryPolicy(mem_len=-1)
    for bad in (True, 2.0, "4"):
        with pytest.raises(ConfigError, match="clamp_len must be an integer"):
            MemoryPolicy(clamp_len=bad)  # type: ignore[arg-type]


def test_the_update_keeps_the_last_mem_len_inputs_without_gradient() -> None:
    inputs = [torch.arange(12.0).view(1, 4, 3).requires_grad_() for _ in range(2)]
    first = update_memory(None, inputs, mem_len=3)
    assert first is not None and all(m.shape == (1, 3, 3) for m in first)
    assert torch.equal(first[0], inputs[0][:, 1:].detach())
    assert not any(m.requires_grad for m in first)
    later = [100 + torch.arange(6.0).view(1, 2, 3) for _ in range(2)]
    second = update_memory(first, later, mem_len=3)
    expected = torch.cat([inputs[1][:, 3:], later[1]], 1).detach()  # old memory's last + new
    assert torch.equal(second[1], expected)
    longer = update_memory(first, later, mem_len=10)  # shorter than mem_len: all of it
    assert longer[0].shape == (1, 5, 3)
    assert update_memory(first, later, mem_len=0) is None


def test_a_memory_of_another_model_or_batch_is_a_one_line_error() -> None:
    memory = [torch.zeros(2, 3, 8) for _ in range(2)]
    check_memory(memory, n_layers=2, batch=2, d_model=8)
    with pytest.raises(ConfigError, match="^memory holds 2 layers but the model has 3$"):
        check_memory(memory, n_layers=3, batch=2, d_model=8)
    with pytest.raises(ConfigError) as info:
        check_memory(memory, n_layers=2, batch=4, d_model=8)
    assert str(info.value) == (
        "memory of layer 1 has shape (2, 3, 8); expected [batch=4, M, d_model=8] (was it made "
        "by another model or batch size?)"
    )
    with pytest.raises(ConfigError, match="layer 2 has shape \\(2, 3\\)"):
        check_memory([memory[0], torch.zeros(2, 3)], n_layers=2, batch=2, d_model=8)
