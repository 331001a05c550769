"""A machine, as the facts that decide how fast a run trains there.

Every run records each uninterrupted stretch of its training with the machine it ran on
(:func:`~highway_transformer.runtime.hardware.run_metadata`); two stretches compare in
seconds only when they ran on one kind of machine. Reading those facts back needs no torch.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .provenance import CODE_FACTS

#: Stretch facts that say where or when a stretch ran, not how fast: not part of a machine.
PLACE_AND_TIME = frozenset({"from_step", "to_step", "seconds", "started_at", "host", "recorded"})
#: Nor is the code that ran (a run resumed after a code change ran on the same machine).
NOT_MACHINE = PLACE_AND_TIME | frozenset(CODE_FACTS)

Machine = tuple[tuple[str, str], ...]  # (fact, value) pairs, sorted; () when not recorded


def machine_of(facts: dict[str, Any]) -> Machine:
    """A machine, read back from what :func:`run_metadata` recorded: every fact that decides
    speed (device, CPU, instruction set, threads, precision, torch, a compiled step), in a
    fixed order."""
    if facts.get("recorded") is False:
        return ()
    return tuple(sorted((k, str(v)) for k, v in facts.items() if k not in NOT_MACHINE))


def ran_here(stretch: dict[str, Any], here: dict[str, Any]) -> bool:
    """Whether a stretch ran on a machine like ``here``: every speed fact it records agrees
    (stretches written before a fact was recorded are judged on the ones they hold)."""
    facts, mine = machine_of(stretch), dict(machine_of(here))
    return bool(facts) and all(mine.get(k) == v for k, v in facts)


def stretches_rate(stretches: Iterable[dict[str, Any]], here: dict[str, Any]) -> float | None:
    """Mean seconds per step over those of ``stretches`` that ran here (None: none did)."""
    steps = seconds = 0.0
    for stretch in stretches:
        span = stretch.get("to_step", 0) - stretch.get("from_step", 0)
        if ran_here(stretch, here) and span > 0 and stretch.get("seconds"):
            steps += span
            seconds += float(stretch["seconds"])
    return seconds / steps if steps else None


def duration(seconds: float) -> str:
    """A span of seconds as it is read: ``40 s``, ``12 min``, ``3.5 h``."""
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"
