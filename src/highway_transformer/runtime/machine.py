"""A machine, as the facts that decide how fast a run trains there.

Every run records each uninterrupted stretch of its training with the machine it ran on
(:func:`~highway_transformer.runtime.hardware.run_metadata`); two stretches compare in
seconds only when they ran on one kind of machine. Reading those facts back needs no torch.
"""

from __future__ import annotations

from typing import Any

from .provenance import CODE_FACTS

#: Stretch facts that say where or when a stretch ran, not how fast: not part of a machine.
PLACE_AND_TIME = frozenset({"from_step", "to_step", "seconds", "host", "recorded"})
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
