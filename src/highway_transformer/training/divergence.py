"""The divergence policy: a NaN or infinite loss stops training, and nothing non-finite is
ever saved, so the last good checkpoint always survives a run that blew up."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

import torch
from torch import Tensor

from ..errors import TrainingDiverged
from ..storage.folder import CONFIG_FILE

#: What to try when a run diverges.
ADVICE = "lower train.lr, set train.clip, or use precision=fp32"
#: What a divergence leaves behind, where a checkpoint was written before it (:func:`kept_message`).
KEPT = "the last good checkpoint is intact"


def kept_message(folder: Path) -> str:
    """What a divergence leaves of the checkpoint ``folder``: intact, or none was written."""
    return KEPT if (folder / CONFIG_FILE).is_file() else "no checkpoint was written before it"


def diverged(what: str, step: int | None, kept: str = KEPT) -> str:
    """The one-line message of a divergence: what became non-finite, where, what was kept."""
    at = f" at step {step}" if step is not None else ""
    return f"{what}{at}; training stopped and {kept} ({ADVICE})"


def check_finite_loss(valid_loss: float, step: int | None = None, kept: str = KEPT) -> None:
    """Raise :class:`TrainingDiverged` for a NaN or infinite validation loss."""
    if not math.isfinite(valid_loss):
        raise TrainingDiverged(diverged(f"the validation loss became {valid_loss}", step, kept))


def check_finite_tensors(
    named: Iterable[tuple[str, Tensor]], step: int | None, kept: str = KEPT
) -> None:
    """Raise :class:`TrainingDiverged` if any floating tensor about to be saved is NaN or
    infinite (its name is in the message)."""
    for name, tensor in named:
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise TrainingDiverged(diverged(f"{name} holds NaN or infinite values", step, kept))
