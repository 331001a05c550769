"""Which machines a report's runs trained on: their seconds compare only within one kind.

A run records every uninterrupted stretch of its training with the machine it ran on
(``results.json["stretches"]``, from :func:`highway_transformer.runtime.hardware.run_metadata`). A
table trained over several sessions can mix machines (one row on an AVX2 CPU, the next on an
AVX512 one, 1.6x faster per step; a stretch with two threads beside other runs), and then a
row's seconds measure the machine as much as the model. The report compares training time
(seconds to a target, Δ time, "less time") only when every stretch of every run it holds ran
on one kind of machine.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..runtime.machine import Machine, machine_of

NOT_RECORDED = "not recorded"
#: Groups of more runs than this are counted, not named, in the report's warning.
NAMED_RUNS = 4


def run_machines(results: dict[str, Any] | None) -> set[Machine]:
    """The machines one run trained on: its stretches', else its metadata's (older runs)."""
    results = results or {}
    stretches = results.get("stretches")
    if isinstance(stretches, list) and stretches:
        found = {machine_of(s) for s in stretches if isinstance(s, dict)}
        return found or {()}
    metadata = results.get("metadata")
    return {machine_of(metadata)} if isinstance(metadata, dict) else {()}


def _describe(machine: Machine, keys: set[str]) -> str:
    if not machine:
        return NOT_RECORDED
    return ", ".join(f"{k} {v}" for k, v in machine if k in keys) or NOT_RECORDED


def _merge_partial(groups: dict[Machine, list[str]]) -> dict[Machine, list[str]]:
    """A machine recorded before a fact was (no ``cpu_model``, say) joins the one machine
    that records that fact and agrees on every other: the same kind, less said of it."""
    merged = dict(groups)
    for machine in sorted(groups, key=len):
        known = dict(machine)
        fuller = [
            other for other in merged
            if machine and len(other) > len(machine)
            and all(dict(other).get(k) == v for k, v in known.items())
        ]  # fmt: skip
        if len(fuller) == 1:
            labels = merged.pop(machine)
            merged[fuller[0]] += [label for label in labels if label not in merged[fuller[0]]]
    return merged


def runs_by_machine(runs: Iterable[tuple[str, dict[str, Any] | None]]) -> dict[str, Any]:
    """Where ``(label, results.json)`` runs trained: ``{"time_comparable": bool, "common":
    the facts all machines share, "runs_by_machine": {what differs: [label, ...]}}``. A run
    resumed on another machine is listed under each; runs that recorded no machine all read
    as one, as reports of older runs always did."""
    groups: dict[Machine, list[str]] = {}
    for label, results in runs:
        for machine in sorted(run_machines(results)):
            groups.setdefault(machine, []).append(label)
    groups = _merge_partial(groups)
    facts = [dict(m) for m in groups]
    keys = set().union(*facts) if facts else set()
    differ = {k for k in keys if len({f.get(k) for f in facts}) > 1}
    common = [(k, v) for k, v in sorted(facts[0].items()) if k not in differ] if facts else []
    return {
        "time_comparable": len(groups) <= 1,
        "common": ", ".join(f"{k} {v}" for k, v in common),
        "runs_by_machine": {_describe(m, differ or keys): names for m, names in groups.items()},
    }


def one_kind_of_machine(results: Iterable[dict[str, Any] | None]) -> bool:
    """Whether these runs (``results.json`` each) all trained on one kind of machine."""
    return bool(runs_by_machine(("", r) for r in results)["time_comparable"])


def machines_markdown(machines: dict[str, Any]) -> list[str]:
    """The warning at the top of a report whose runs trained on several kinds of machine."""
    if machines["time_comparable"]:
        return []
    groups = machines["runs_by_machine"]
    kinds = "; ".join(
        f"*{machine}*: " + (", ".join(runs) if len(runs) <= NAMED_RUNS else f"{len(runs)} runs")
        for machine, runs in groups.items()
    )
    return [
        f"**Training time is not compared: the runs trained on {len(groups)} kinds of machine** "
        f"({kinds}; all: {machines['common'] or '—'}). Seconds would measure the machine as "
        "much as the model, so the seconds-to-target, *less time* and Δ time columns are left "
        "empty, a row whose own runs trained on several has no mean seconds, and no "
        "convergence-vs-time figure is drawn. Steps, losses and metrics are unaffected.",
        "",
    ]
