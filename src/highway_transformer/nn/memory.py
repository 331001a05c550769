"""Transformer-XL segment-level recurrence (Dai et al. 2019; HT eqs. 10-12).

Layer n of segment τ attends over ``[SG(h_{τ-1}^{n-1}) ∘ h_τ^{n-1}]``: the memory of a layer
is the last ``mem_len`` hidden states that entered it, kept without gradient.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..errors import ConfigError


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
