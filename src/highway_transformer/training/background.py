"""Checkpoints written in the background (``train.async_checkpoint=true``): training goes on
while the last checkpoint is written.

The state is copied first, at the step boundary (weights through a deep copy, so tied weights
stay tied, every tensor on the host); one writer thread then writes it with the same atomic
save as ever, so a write killed at any point leaves the previous checkpoint as the newest
whole one. One write at a time: the next save, a stop and the end of training wait for the
one in flight, and a failed write (a full disk) is raised there.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable

import torch
from torch import nn


def host_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model`` on the host that later steps do not change."""
    return copy.deepcopy(model).to("cpu")


def host_tensors(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Copies of ``tensors`` on the host that later steps do not change."""
    return {name: t.detach().to("cpu", copy=True) for name, t in tensors.items()}


class CheckpointWriter:
    """One background write at a time; its error is raised by the next :meth:`wait`."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, write: Callable[[], None]) -> None:
        """Wait for the write in flight, then start ``write`` in the background."""
        self.wait()

        def run() -> None:
            try:
                write()
            except BaseException as error:  # noqa: BLE001 - raised in the training thread
                self._error = error

        # not a daemon: an exiting interpreter finishes the write instead of cutting it
        self._thread = threading.Thread(target=run, name="checkpoint-writer")
        self._thread.start()

    @property
    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait(self) -> None:
        """Return once no write is in flight; raise the error of the last one, if it failed."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise error
