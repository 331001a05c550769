"""The process world (``runtime/world.py``): the backend for a device, rows shared out among
processes, and batches that do not split."""

from __future__ import annotations

import pytest
import torch

from highway_transformer.errors import ConfigError, PeerFailed
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


def test_a_failed_collective_says_whether_a_rank_ended_or_stayed_silent():
    """A peer's death (its connections closed) is not reported as a timeout that never
    happened; a real timeout names train.dist_timeout. Both are a lost peer (PeerFailed),
    which ``highway train --nproc`` does not take for the failure itself."""
    world = World(rank=0, size=2, timeout=600.0)
    closed = world.peer_failed("[gloo/transport/tcp/pair.cc:534] Connection closed by peer\nmore")
    assert isinstance(closed, PeerFailed) and not closed.timed_out
    assert str(closed) == (
        "rank 0: another of the 2 ranks ended or was killed ([gloo/transport/tcp/pair.cc:534] "
        "Connection closed by peer); the last checkpoint is intact, resume with --resume"
    )
    silent = World(rank=1, size=4, timeout=5.0).peer_failed(
        "[gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 5000ms for recv operation"
    )
    assert silent.timed_out and str(silent).startswith(
        "rank 1: no answer from another of the 4 ranks within train.dist_timeout=5s (it hangs"
    )
    with pytest.raises(PeerFailed, match="ended or was killed"), world.guard():
        raise RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc] Read error")
    with pytest.raises(RuntimeError, match="^something else$"), world.guard():
        raise RuntimeError("something else")  # not a collective's failure: left alone
