"""Optional dependencies, each installed through one named extra.

``pip install 'highway-transformer[report]'`` etc.; :func:`import_extra` imports a module of an
extra or raises :class:`~highway_transformer.errors.MissingExtra` naming the install command.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingExtra

#: Top-level module -> the extra (in pyproject.toml) that installs it.
EXTRAS: dict[str, str] = {
    "matplotlib": "report",
    "sklearn": "digits",
    "tokenizers": "subword",
    "tensorboard": "tensorboard",
    "wandb": "wandb",
    "huggingface_hub": "hub",
    "submitit": "slurm",
    "transformers": "hf",
    "peft": "hf",
    "accelerate": "hf",
    "lm_eval": "hf",
    "gymnasium": "rl",
    "minigrid": "rl",
    "popgym": "rl",
}


def import_extra(module: str, purpose: str) -> ModuleType:
    """Import ``module`` (e.g. ``"matplotlib.pyplot"``); if missing, say which extra to install."""
    top = module.split(".")[0]
    if top not in EXTRAS:
        raise KeyError(f"{top} is not an optional dependency listed in EXTRAS")
    try:
        return importlib.import_module(module)
    except ImportError:
        extra = EXTRAS[top]
        raise MissingExtra(
            f"{purpose} needs {top}; install it with pip install 'highway-transformer[{extra}]'"
        ) from None
