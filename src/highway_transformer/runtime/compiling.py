"""``torch.compile`` of the training step: whether a run compiles (``train.compile``), and
the compiled forward the trainer calls.

``train.compile=auto`` compiles on CUDA and not elsewhere: on a CPU compiling has not been
shown to pay (it has not been measured here, and each new shape costs a compilation), on
MPS it is not tested. ``true`` compiles on any device, ``false`` never.

Every family's training forward (the model's ``forward`` with targets, as the trainer calls
it) traces into one graph, without graph breaks: ``tests/training/test_compile.py`` checks
it with ``fullgraph=True`` for the vanilla Transformer (dot and Shaw attention), the
R-Transformer and Transformer-XL with its memory. What that took: dropout draws torch's own
random numbers while compiling (:mod:`highway_transformer.nn.dropout`), the relative shift
is a view taken without reading a storage offset and its gradient is laid back without a
write through it (:mod:`highway_transformer.nn.kernels.relative_core`), the LocalRNN
kernel runs its steps as plain tensor expressions
(:mod:`highway_transformer.nn.kernels.local_rnn_cell`), and the call below lets the compiler
read the parameters of the ``nn.GRU`` / ``nn.LSTM`` / ``nn.RNN`` a LocalRNN keeps them in
(it never runs that module; the compiler refuses any RNN module by default).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..config import TrainConfig
from ..errors import ConfigError


def compiles(setting: str | bool, device: torch.device) -> bool:
    """Whether ``train.compile`` (``auto`` | ``true`` | ``false``; a config of an earlier
    version holds a boolean) compiles on ``device``: ``auto`` on CUDA only."""
    text = str(setting).lower()
    return device.type == "cuda" if text == "auto" else text == "true"


def check_compile(train: TrainConfig, device: torch.device) -> bool:
    """Whether this run compiles on ``device``; refuses a ``train.compile_mode`` that would
    not apply (``auto`` on a device it does not compile on)."""
    compiled = compiles(train.compile, device)
    if not compiled and train.compile_mode != "default":
        raise ConfigError(
            f"train.compile_mode={train.compile_mode} applies to a compiled model, and "
            f"train.compile={str(train.compile).lower()} does not compile on {device.type} "
            "(auto compiles on CUDA only); set train.compile=true or drop compile_mode"
        )
    return compiled


class CompiledModule(nn.Module):
    """``torch.compile(module)`` (``mode``: ``default`` or another of torch's modes), called
    so that the compiler may read the parameters of the RNN modules inside (a LocalRNN's).
    Its parameters are ``module``'s."""

    def __init__(
        self,
        module: nn.Module,
        mode: str = "default",
        fullgraph: bool = False,
        backend: str | Callable[..., Any] = "inductor",
    ) -> None:
        super().__init__()
        options: dict[str, Any] = {"fullgraph": fullgraph, "backend": backend}
        if mode != "default":
            options["mode"] = mode
        self.compiled = torch.compile(module, **options)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        # Dynamo refuses to wrap any RNN module unless allowed: a LocalRNN reads its weights
        # from one (and never calls it). Set for this call only, not for the process.
        with torch._dynamo.config.patch(allow_rnn=True):
            return self.compiled(*args, **kwargs)
