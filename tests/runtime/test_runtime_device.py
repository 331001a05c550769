"""Where a process computes (``runtime/device.py``): device names resolved or refused in one
line, every generator seeded, the runtime set up from the train config, and autocast only
for reduced precision. (``tests/test_device.py`` runs the library on an accelerator.)"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from highway_transformer.config import TrainConfig
from highway_transformer.errors import ConfigError
from highway_transformer.runtime import device as device_module
from highway_transformer.runtime.device import (
    autocast_context,
    resolve_device,
    seed_everything,
    setup_runtime,
)


def test_device_names_resolve_or_are_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ConfigError, match=r"^unknown device 'gpu'; use auto, cpu, cuda, cuda:N"):
        resolve_device("gpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(ConfigError, match="train.device=cuda but no CUDA device is available"):
        resolve_device("cuda:0")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("mps")  # before the CPU
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")  # first
    assert resolve_device("cuda:1") == torch.device("cuda", 1)


def test_seed_everything_repeats_pythons_numpys_and_torchs_draws() -> None:
    def draws() -> tuple:
        return random.random(), np.random.rand(), torch.rand(1).item()

    seed_everything(3)
    first = draws()
    seed_everything(3)
    assert draws() == first
    seed_everything(2**40 + 3)  # NumPy takes 32 bits: reduced, not refused
    seed_everything(4)
    assert draws() != first


def test_setup_runtime_sets_threads_device_and_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[tuple[str, str]] = []
    monkeypatch.setattr(device_module, "check_precision", lambda d, p: checked.append((d.type, p)))
    device = setup_runtime(TrainConfig(device="cpu", threads=1, seed=9, precision="bf16"))
    assert device == torch.device("cpu") and torch.get_num_threads() == 1
    assert checked == [("cpu", "bf16")]
    after = torch.rand(1)
    seed_everything(9)
    assert torch.equal(torch.rand(1), after)


def test_autocast_only_for_reduced_precision() -> None:
    cpu = torch.device("cpu")
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with autocast_context(cpu, "fp32"):
        assert (a @ b).dtype == torch.float32
    with autocast_context(cpu, "bf16"):
        assert (a @ b).dtype == torch.bfloat16
