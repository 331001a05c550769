"""Which machines a report's runs trained on: their seconds compare only within one kind.

A run records every uninterrupted stretch of its training with the machine it ran on
(``results.json["stretches"]``, from :func:`highway_transformer.hardware.run_metadata`). A
table trained over several sessions can mix machines (one row on an AVX2 CPU, the next on an
AVX512 one, 1.6x faster per step), and then a row's seconds measure the machine as much as the
model. The report compares training time (seconds to a target, Δ time, "less time") only when
every stretch of every run it holds ran on one kind of machine.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: Stretch facts that say where or when a stretch ran, not how fast: not part of a machine.
PLACE_AND_TIME = frozenset({"from_step", "to_step", "seconds", "host", "recorded"})
NOT_RECORDED = "not recorded"


def machine_signature(facts: dict[str, Any]) -> str:
    """One line naming a machine by every fact that decides speed (device, CPU, instruction
    set, threads, precision, torch), in a fixed order."""
    if facts.get("recorded") is False:
        return NOT_RECORDED
    items = sorted((key, value) for key, value in facts.items() if key not in PLACE_AND_TIME)
    return ", ".join(f"{key} {value}" for key, value in items) or NOT_RECORDED


def run_machines(results: dict[str, Any] | None) -> set[str]:
    """The machines one run trained on: its stretches', else its metadata's (older runs)."""
    results = results or {}
    stretches = results.get("stretches")
    if isinstance(stretches, list) and stretches:
        found = {machine_signature(s) for s in stretches if isinstance(s, dict)}
        return found or {NOT_RECORDED}
    metadata = results.get("metadata")
    return {machine_signature(metadata)} if isinstance(metadata, dict) else {NOT_RECORDED}


def runs_by_machine(runs: Iterable[tuple[str, dict[str, Any] | None]]) -> dict[str, list[str]]:
    """``{machine: [run label, ...]}`` for ``(label, results.json)`` pairs; a run resumed on
    another machine is listed under each."""
    machines: dict[str, list[str]] = {}
    for label, results in runs:
        for machine in sorted(run_machines(results)):
            machines.setdefault(machine, []).append(label)
    return machines


def time_comparable(machines: dict[str, list[str]]) -> bool:
    """Whether the runs' seconds compare: all of them trained on one kind of machine (runs
    that recorded none all read as one, as reports of older runs always did)."""
    return len(machines) <= 1


def machines_markdown(machines: dict[str, list[str]]) -> list[str]:
    """The warning at the top of a report whose runs trained on several kinds of machine."""
    if time_comparable(machines):
        return []
    kinds = "; ".join(f"*{machine}*: {', '.join(runs)}" for machine, runs in machines.items())
    return [
        f"**Training time is not compared: the runs trained on {len(machines)} kinds of "
        f"machine** ({kinds}). Seconds would measure the machine as much as the model, so "
        "the seconds-to-target, *less time* and Δ time columns are left empty, and the "
        "convergence-vs-time figure mixes machines. Steps, losses and metrics are unaffected.",
        "",
    ]
