"""Resource sanity before work starts: will the model, and one training step, fit the device?

:func:`check_model_size` runs before any model is built, for every task: a lower bound of the
parameters computed from the sizes alone (:func:`parameter_floor`: no module is built, so a
billion layers or a width whose weight would overflow cannot hang or crash it), then the exact
count on the ``meta`` device (nothing allocated), each with its weights, gradients and
optimizer state against the device's memory. :func:`estimate_memory` adds the activations one
training step of a language model keeps for the backward pass. The activation figure counts
the large tensors only, so it is a lower bound: :func:`check_resources` refuses a
configuration only when even that bound exceeds the device's memory, with the estimate in the
message, instead of letting an impossible setting allocate for minutes and crash.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from ..config import Config, ModelConfig
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


Build = Callable[[Config], nn.Module]


def _language_model(config: Config) -> nn.Module:
    return LanguageModel(config.model)


def parameter_floor(model: ModelConfig) -> int:
    """At least this many parameters, from the sizes alone (nothing is built): each block's
    feed-forward layers and attention output projections, and the embedding; every task's
    model has at least these."""
    inner = model.n_heads * model.head_dim
    per_block = 0
    for kind in block_layout(model):
        if kind == "ffn":
            per_block += 2 * model.d_model * model.d_inner
        elif kind in ("attn", "cross"):
            per_block += model.d_model * inner
    return model.n_layers * per_block + model.vocab_size * model.d_model


def count_parameters(config: Config, build: Build | None = None) -> int:
    """Parameters of ``build(config)`` (default: the configured language model), built on the
    meta device without initialising them (no memory, no import of the compiler stack); a size
    no tensor can have is a one-line ConfigError."""
    try:
        with torch.device("meta"), _SkipMetaInit():
            model = (build or _language_model)(config)
    except RuntimeError as exc:  # torch: "Storage size calculation overflowed"
        if "overflow" not in str(exc):
            raise
        m = config.model
        raise ConfigError(
            f"this model cannot be built: a weight would exceed 2^63 bytes (model.d_model="
            f"{m.d_model}, model.d_inner={m.d_inner}, model.n_heads={m.n_heads}, "
            f"model.vocab_size={m.vocab_size}); lower the model size"
        ) from None
    unique = {id(p): p.numel() for p in model.parameters()}  # tied weights once
    return sum(unique.values())


def _state_copies(config: Config, training: bool) -> int:
    """fp32 parameter-sized copies: the weights, and when training their gradients and the
    optimizer's state."""
    if not training:
        return 1
    t = config.train
    return 2 + OPTIMIZER_COPIES.get(t.optimizer, 2) + (t.optimizer == "sgd" and t.momentum > 0)


def check_model_size(
    config: Config, device: torch.device, build: Build | None = None, training: bool = True
) -> int:
    """Refuse, before anything is allocated, a model whose weights (with their gradients and
    optimizer state when ``training``) cannot fit ``device``; return its parameter count.

    The floor of :func:`parameter_floor` is checked first, so an absurd size is refused in
    microseconds, before the meta-device count would build it module by module.
    """
    available = device_memory(device)
    what = "weights, gradients and optimizer state" if training else "weights"
    copies = _state_copies(config, training)

    def refuse_beyond(n: int, least: str) -> None:
        if available is not None and 4 * n * copies > available:
            raise ConfigError(
                f"this model needs {least}{4 * n * copies / GiB:,.1f} GiB ({what} of {least}"
                f"{n:,} parameters) but the {device.type} device has {available / GiB:.1f} GiB;"
                " lower model.d_model, model.d_inner, model.n_layers or model.vocab_size"
            )

    refuse_beyond(parameter_floor(config.model), "at least ")
    n = count_parameters(config, build)
    refuse_beyond(n, "")
    return n


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


def estimate_memory(
    config: Config, rows: int, length: int, parameters: int | None = None
) -> MemoryEstimate:
    """Memory for one training step on ``rows`` windows of ``length`` tokens (``parameters``:
    the model's count, where already known)."""
    n = count_parameters(config) if parameters is None else parameters
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
    parameters = check_model_size(config, device)  # the model alone, before its activations
    estimate = estimate_memory(config, d.batch_size, min(d.seq_len, row_length), parameters)
    available = device_memory(device)
    if available is not None and estimate.total > available:
        raise ConfigError(
            f"this configuration needs {estimate.describe()} but the {device.type} device has "
            f"{available / GiB:.1f} GiB; lower data.seq_len, data.batch_size or the model size"
        )
    return estimate
