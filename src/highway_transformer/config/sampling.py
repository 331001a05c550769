"""The ranges of the sampling settings of ``generate`` (torch-free, so the command line checks
them before it loads a model)."""

from __future__ import annotations

import math

from ..errors import ConfigError


def check_sampling(
    n_tokens: int, temperature: float, top_k: int, top_p: float, seed: int | None
) -> None:
    """Raise :class:`ConfigError` for a sampling setting outside its meaningful range."""
    if n_tokens < 0:
        raise ConfigError(f"--tokens must be >= 0, got {n_tokens}")
    if not math.isfinite(temperature) or temperature < 0:
        raise ConfigError(
            f"--temperature must be a finite number >= 0 (0 is greedy), got {temperature}"
        )
    if top_k < 0:
        raise ConfigError(f"--top-k must be >= 0 (0 keeps every symbol), got {top_k}")
    if not 0 < top_p <= 1:  # also refuses NaN
        raise ConfigError(f"--top-p must be in (0, 1] (1 keeps every symbol), got {top_p}")
    if seed is not None and not 0 <= seed < 2**63:
        raise ConfigError(f"--seed must be >= 0, got {seed}")
