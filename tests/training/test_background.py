"""Background checkpoint writes (``training/background.py``): the copies taken at the step do
not change with later steps (tied weights stay tied), one write at a time, and a failed write
is raised by the next wait."""

from __future__ import annotations

import threading

import pytest
import torch
from torch import nn

from highway_transformer.training.background import CheckpointWriter, host_copy, host_tensors


def test_copies_do_not_change_with_later_steps_and_ties_stay_tied() -> None:
    model = nn.Sequential(nn.Embedding(5, 4), nn.Linear(4, 5, bias=False))
    model[1].weight = model[0].weight  # tied, as the language models' embeddings
    copy = host_copy(model)
    tensors = {"optim.0.exp_avg": torch.ones(3)}
    copied = host_tensors(tensors)
    with torch.no_grad():
        model[0].weight.add_(1.0)
        tensors["optim.0.exp_avg"].mul_(7.0)  # Adam updates its state in place
    assert not torch.equal(copy[0].weight, model[0].weight)
    assert copy[0].weight is copy[1].weight
    assert torch.equal(copied["optim.0.exp_avg"], torch.ones(3))


def test_one_write_at_a_time_and_a_failed_one_is_raised_by_the_next_wait() -> None:
    writer = CheckpointWriter()
    release, order = threading.Event(), []

    def slow() -> None:
        release.wait(10)
        order.append("first")

    writer.submit(slow)
    assert writer.busy
    release.set()
    writer.submit(lambda: order.append("second"))  # waits for the first
    writer.wait()
    assert order == ["first", "second"] and not writer.busy

    def full_disk() -> None:
        raise OSError(28, "No space left on device")

    writer.submit(full_disk)
    with pytest.raises(OSError, match="No space left"):
        writer.wait()
    writer.wait()  # told once
