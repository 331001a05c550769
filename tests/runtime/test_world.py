"""The process world (``runtime/world.py``): the backend for a device, rows shared out among
processes, and batches that do not split."""

from __future__ import annotations

import pytest
import torch

from highway_transformer.errors import ConfigError
from highway_transformer.runtime.world import World, backend_for, check_divisible
from highway_transformer.training.launch import without_nproc


def test_backend_choice_and_row_shares():
    assert backend_for(torch.device("cpu"), "auto") == "gloo"
    assert backend_for(torch.device("cuda", 0), "auto") == "nccl"
    with pytest.raises(ConfigError, match="nccl needs CUDA"):
        backend_for(torch.device("cpu"), "nccl")
    with pytest.raises(ConfigError, match="does not divide"):
        check_divisible(6, 4)
    shares = [World(rank=r, size=3).uneven_rows(7) for r in range(3)]
    assert [(s.start, s.stop) for s in shares] == [(0, 2), (2, 4), (4, 7)]
    assert World(rank=1, size=2).rows(8) == slice(4, 8)
    assert without_nproc(["train", "--nproc", "2", "a=1", "--nproc=3", "--out", "o"]) == [
        "train",
        "a=1",
        "--out",
        "o",
    ]
