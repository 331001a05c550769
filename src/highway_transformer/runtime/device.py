"""Where a process computes: the device, its threads, its seeds and its autocast precision.

Every layer that runs a model picks its device, seeds and precision here, so ``train``,
``eval``, ``generate`` and the experiment runner agree on what ``train.device=auto`` and
``train.precision=bf16`` mean.
"""

from __future__ import annotations

import random
from contextlib import AbstractContextManager, nullcontext

import numpy as np
import torch

from ..config import TrainConfig
from ..errors import ConfigError
from .hardware import check_precision

#: The autocast dtype of each reduced ``train.precision`` (fp32 runs without autocast).
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_device(name: str) -> torch.device:
    """``auto`` (CUDA, then MPS, then the CPU), ``cpu``, ``cuda``, ``cuda:N`` or ``mps``."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"unknown device {name!r}; use auto, cpu, cuda, cuda:N or mps") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device=cuda but no CUDA device is available; use device=auto")
    return device


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's generators."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def setup_runtime(train: TrainConfig) -> torch.device:
    """Apply ``train.threads``, pick the device, refuse emulated reduced precision and seed
    every generator; return the device."""
    if train.threads:
        torch.set_num_threads(train.threads)
    device = resolve_device(train.device)
    check_precision(device, train.precision)
    seed_everything(train.seed)
    return device


def autocast_context(device: torch.device, precision: str) -> AbstractContextManager[object]:
    """``torch.autocast`` for bf16/fp16, a no-op for fp32."""
    if precision == "fp32":
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=AUTOCAST_DTYPES[precision])
