"""Resource sanity before work starts: will one training step fit the device?

:func:`estimate_memory` adds the parameters (counted on the ``meta`` device: nothing is
allocated), their gradients, the optimizer's state and the activations one training step
keeps for the backward pass. The activation figure counts the large tensors only, so it is a
lower bound: :func:`check_resources` refuses a configuration only when even that bound
exceeds the device's memory, with the estimate in the message, instead of letting an
impossible setting allocate for minutes and crash.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ..config import Config
from ..errors import ConfigError
from .families import block_layout, uses_memory
from .lm import LanguageModel

GiB = 1024**3
#: Optimizer state in parameter-sized copies (SGD keeps a momentum buffer only if asked).
OPTIMIZER_COPIES = {"sgd": 0, "adam": 2, "adamw": 2}


@dataclass(frozen=True)
class MemoryEstimate:
    parameters: int  # number of parameters
    weights: int  # bytes, here and below
    gradients: int
    optimizer: int
    activations: int
    tokens: tuple[int, int]  # (rows, positions) of one training step

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.activations

    def describe(self) -> str:
        rows, length = self.tokens
        return (
            f"~{self.total / GiB:.1f} GiB (weights {self.weights / GiB:.2f}, gradients "
            f"{self.gradients / GiB:.2f}, optimizer {self.optimizer / GiB:.2f}, activations "
            f"{self.activations / GiB:.2f} GiB for {rows}x{length} tokens)"
        )


class _SkipMetaInit(TorchFunctionMode):
    """In-place operations on ``meta`` tensors return the tensor untouched.

    They change no shape, and initialising a ``meta`` tensor runs torch's reference
    implementations, whose first call imports ``torch._dynamo``: about 70 MiB of resident
    memory and seconds of import for a count (``highway eval`` read 244 MiB at its peak
    without it, 319 MiB with it).
    """

    def __torch_function__(
        self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name.endswith("_") and not name.endswith("__"):
            for value in (*args, *kwargs.values()):
                if isinstance(value, torch.Tensor) and value.is_meta:
                    return value
        return func(*args, **kwargs)


def count_parameters(config: Config) -> int:
    """Parameters of the configured language model, built on the meta device without
    initialising them (no memory, no import of the compiler stack)."""
    with torch.device("meta"), _SkipMetaInit():
        model = LanguageModel(config.model)
    unique = {id(p): p.numel() for p in model.parameters()}  # tied weights once
    return sum(unique.values())


def _activation_bytes(config: Config, rows: int, length: int) -> int:
    m = config.model
    itemsize = 4 if config.train.precision == "fp32" else 2
    tokens = rows * length
    keys = length + (m.memory.mem_len if uses_memory(m) else 0)
    inner = m.n_heads * m.head_dim
    per_layer = tokens * (6 * m.d_model + 3 * inner + 2 * m.d_inner)  # norms, qkv, ffn, residual
    per_layer += 2 * rows * m.n_heads * length * keys  # attention scores and their softmax
    local_rnns = block_layout(m).count("rnn")  # each keeps its windows of k inputs
    per_layer += tokens * m.local_rnn.window * m.d_model * local_rnns
    logits = 2 * tokens * max(m.vocab_size, 1)  # logits and their log-softmax
    return itemsize * (m.n_layers * per_layer + logits + 2 * tokens * m.d_model)


def estimate_memory(config: Config, rows: int, length: int) -> MemoryEstimate:
    """Memory for one training step on ``rows`` windows of ``length`` tokens."""
    n = count_parameters(config)
    t = config.train
    copies = OPTIMIZER_COPIES.get(t.optimizer, 2) + (t.optimizer == "sgd" and t.momentum > 0)
    return MemoryEstimate(
        parameters=n,
        weights=4 * n,
        gradients=4 * n,
        optimizer=4 * n * copies,
        activations=_activation_bytes(config, rows, length),
        tokens=(rows, length),
    )


def device_memory(device: torch.device) -> int | None:
    """Total memory of ``device`` in bytes, or None where it cannot be asked."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[1]
    if device.type == "cpu" and hasattr(os, "sysconf"):
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            return None
    return None


def check_resources(config: Config, train_tokens: int, device: torch.device) -> MemoryEstimate:
    """Refuse, in seconds, a configuration whose training step cannot fit ``device``.

    The window a step trains on is ``data.seq_len`` clipped to the length of the
    ``batch_size`` rows the ``train_tokens`` of the corpus are cut into.
    """
    d = config.data
    row_length = max((train_tokens - 1) // d.batch_size, 1)
    estimate = estimate_memory(config, d.batch_size, min(d.seq_len, row_length))
    available = device_memory(device)
    if available is not None and estimate.total > available:
        raise ConfigError(
            f"this configuration needs {estimate.describe()} but the {device.type} device has "
            f"{available / GiB:.1f} GiB; lower data.seq_len, data.batch_size or the model size"
        )
    return estimate
