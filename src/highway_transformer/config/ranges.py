"""The allowed values of a numeric config key (declared with its key, ``config/schema.py``)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Range:
    """Allowed values of a numeric field: ``low <= value`` (``<`` when ``open_low``), likewise
    ``high``; ``fix`` says what to write instead."""

    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    fix: str = ""

    def describe(self) -> str:
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.open_low else '>='} {self.low:g}")
        if self.high is not None:
            parts.append(f"{'<' if self.open_high else '<='} {self.high:g}")
        return " and ".join(parts) or "a finite number"

    def admits(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.low is not None and (value < self.low or (self.open_low and value == self.low)):
            return False
        return not (
            self.high is not None and (value > self.high or (self.open_high and value == self.high))
        )


AT_LEAST_1 = Range(1)
NON_NEGATIVE = Range(0)
PROBABILITY = Range(0, 1, open_high=True, fix="a dropout of 0.1 drops 10%")
