"""Convergence measures: the papers' claim is "gated models reach a given loss in fewer steps"."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


def curve(
    records: Iterable[dict[str, Any]], split: str, key: str = "loss"
) -> list[tuple[int, float]]:
    """``(step, value)`` pairs of one split from metric records, in step order."""
    points = {
        int(r["step"]): float(r[key]) for r in records if r.get("split") == split and key in r
    }
    return sorted(points.items())


def best_value(points: list[tuple[int, float]]) -> float:
    return min((v for _, v in points), default=math.inf)


def steps_to_reach(points: list[tuple[int, float]], target: float) -> int | None:
    """The first step whose value is at or below ``target``; None if never reached."""
    for step, value in points:
        if value <= target:
            return step
    return None


def time_to_reach(records: Iterable[dict[str, Any]], split: str, target: float) -> float | None:
    """Training seconds at the first evaluation at or below ``target``."""
    for r in sorted((r for r in records if r.get("split") == split), key=lambda r: r["step"]):
        if float(r["loss"]) <= target:
            return float(r.get("time", math.nan))
    return None
