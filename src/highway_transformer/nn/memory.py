"""Transformer-XL segment-level recurrence (Dai et al. 2019; HT eqs. 10-12).

Layer n of segment τ attends over ``[SG(h_{τ-1}^{n-1}) ∘ h_τ^{n-1}]``: the memory of a layer
is the last ``mem_len`` hidden states that entered it, kept without gradient.

How much memory is kept and how it is attended to are run-time settings, passed to the
model's ``forward`` as a :class:`MemoryPolicy` value (training and evaluation differ: HT A.3
evaluates with a longer memory, clamped distances and ``same_length``); a config's policies
come from :func:`highway_transformer.models.families.memory_policy`. Oracle of the update:
:func:`.reference.xl_update_memory`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..errors import ConfigError


@dataclass(frozen=True)
class MemoryPolicy:
    """Transformer-XL memory settings for one forward pass (Dai et al. §3; HT A.3).

    Attributes:
        mem_len: memory length ``M`` kept for the next segment; also the window of
            ``same_length`` (the reference code builds that mask from the configured ``M``,
            not from the memory held, so it applies while the memory is still filling).
        clamp_len: distances beyond it use the encoding of ``clamp_len``; ``<= 0``: no
            clamping (the reference code clamps only when ``clamp_len > 0``).
        same_length: every query attends to the same number ``M`` of most recent keys.
    """

    mem_len: int = 0
    clamp_len: int = 0
    same_length: bool = False

    def __post_init__(self) -> None:
        for name in ("mem_len", "clamp_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"memory policy {name} must be an integer, got {value!r}")
        if self.mem_len < 0:
            raise ConfigError(f"memory policy mem_len must be >= 0, got {self.mem_len}")


def update_memory(
    memory: list[Tensor] | None, layer_inputs: list[Tensor], mem_len: int
) -> list[Tensor] | None:
    """New memory: per layer, the last ``mem_len`` states of ``[old memory ∘ new inputs]``.

    Runs under ``no_grad`` and detaches: the stop-gradient SG(·) of HT eq. 10.
    """
    if mem_len <= 0:
        return None
    with torch.no_grad():
        updated = []
        for i, inputs in enumerate(layer_inputs):
            cat = inputs if memory is None else torch.cat([memory[i], inputs], dim=1)
            updated.append(cat[:, -mem_len:].detach())
    return updated


def check_memory(memory: list[Tensor], n_layers: int, batch: int, d_model: int) -> None:
    """Raise a clear error for memory of the wrong layer count, batch or width."""
    if len(memory) != n_layers:
        raise ConfigError(f"memory holds {len(memory)} layers but the model has {n_layers}")
    for layer, mem in enumerate(memory):
        if mem.dim() != 3 or mem.shape[0] != batch or mem.shape[2] != d_model:
            raise ConfigError(
                f"memory of layer {layer + 1} has shape {tuple(mem.shape)}; expected "
                f"[batch={batch}, M, d_model={d_model}]"
                " (was it made by another model or batch size?)"
            )
