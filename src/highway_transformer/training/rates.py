"""Seconds per step measured on this machine, kept per user whatever ``--out`` a plan names.

A probe (``--plan --probe N``, :mod:`.probe`) trains in a temporary folder that goes with its
rate; the rate is kept here instead, keyed by what the row computes (its config less its
name, seed and the :data:`PLACE_KEYS`) and by the machine it was measured on
(:func:`~highway_transformer.runtime.machine.machine_of`: device, instruction set, threads,
precision, torch). A later ``--plan`` with another ``--out``, and the start line of a
training, find it there. The file is ``rates.json`` in the per-user cache
(:func:`~highway_transformer.data.download.cache_dir`), or ``$HIGHWAY_RATES_FILE``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from ..config import Config
from ..runtime.machine import machine_of
from ..storage.runfolder import flatten

__all__ = ["PLACE_KEYS", "RATES_ENV", "cached_rate", "rate_key", "rates_file", "remember_rate"]

#: Settings that say where a run trains, not what it computes: a run may be resumed with
#: others (each stretch of training records its machine and threads).
PLACE_KEYS = frozenset(
    {"data.path", "train.device", "train.threads", "train.compile", "train.fused_optimizer",
     "train.pin_memory", "train.dist_backend", "train.dist_timeout", "train.wandb_project",
     "train.tensorboard", "train.keep_checkpoints"}
)  # fmt: skip

RATES_ENV = "HIGHWAY_RATES_FILE"
#: Keys that do not change a step's cost: a row's seeds, and its other names, share a rate.
NOT_COMPUTED = PLACE_KEYS | {"name", "source", "train.seed"}


def rates_file() -> Path:
    """``$HIGHWAY_RATES_FILE``, else ``rates.json`` in the per-user cache."""
    if os.environ.get(RATES_ENV):
        return Path(os.environ[RATES_ENV])
    from ..data.download import cache_dir

    return cache_dir() / "rates.json"


def rate_key(config: Config, machine: dict[str, Any]) -> str:
    """SHA-256 (16 hex digits) of what ``config`` computes and of the speed facts of
    ``machine`` (a run's metadata, as :func:`~.estimate.machine_here` gives it)."""
    computed = {k: v for k, v in flatten(config.to_dict()).items() if k not in NOT_COMPUTED}
    data = {"config": computed, "machine": machine_of(machine)}
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _read() -> dict[str, Any]:
    try:
        stored = json.loads(rates_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: rates are only a hint
    return stored if isinstance(stored, dict) else {}


def cached_rate(config: Config, machine: dict[str, Any]) -> float | None:
    """The seconds per step last measured for ``config`` on ``machine``, or None."""
    entry = _read().get(rate_key(config, machine))
    rate = entry.get("seconds_per_step") if isinstance(entry, dict) else None
    return float(rate) if isinstance(rate, int | float) and rate > 0 else None


def remember_rate(
    config: Config, machine: dict[str, Any], seconds_per_step: float, steps: int
) -> None:
    """Keep ``seconds_per_step`` (measured over ``steps`` steps) for ``config`` on
    ``machine``; written whole through a temporary file, so a reader never sees half of it.
    A cache that cannot be written loses the rate, not the plan."""
    rates = _read()
    rates[rate_key(config, machine)] = {
        "seconds_per_step": seconds_per_step,
        "steps": steps,
        "config": config.name,
        "measured": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    path = rates_file()
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps(rates, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        temporary.unlink(missing_ok=True)
