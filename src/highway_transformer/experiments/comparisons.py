"""Each table's primary comparison, registered before its runs train.

A table's verdicts come from one rule fixed in advance, the same for every row: the metric,
the split, which checkpoint of each run is scored, at which step, and which rows are set
against which. ``highway run`` freezes the table's :class:`Comparison` into every new run's
``experiment.json`` (with the code that registered it) before the run trains, and refuses to
add a run to a table whose earlier runs froze another one. ``highway report`` decides its
verdicts from the frozen comparison only; every other view it shows (the best checkpoint,
curves before annealing, steps to fractions of an improvement) is exploratory.

The rule for every table here: the **last** checkpoint (the end of the scale's
``train.max_steps``, the same step for every row) scored on the **whole validation split**,
each row minus the row it is set against paired by seed, a 95% Student-t interval of the mean
difference. The best checkpoint is not used: at the ``cpu`` scales it is chosen on a subset of
the validation split, at a step that differs from row to row. The pairs: every row against the
table's baseline, every row gated on all layers against the parameter-matched plain row (the
gate, or its parameters?), and the table's row-against-row claims (``CONTRASTS``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import ConfigError
from .registry import CONTRASTS, METRIC_OF, TABLES, table_experiments

#: Which checkpoint of a run a comparison scores: the one at the end of training, or the
#: best one by validation (only when that validation read the whole split).
CHECKPOINTS = ("last", "best")


@dataclass(frozen=True)
class Pair:
    """One claim: ``row`` against ``against``, paired by seed."""

    claim: str
    row: str
    against: str


@dataclass(frozen=True)
class Comparison:
    """A table's primary comparison: what decides its verdicts."""

    table: str
    metric: str
    split: str
    checkpoint: str
    step: str  # "end": the run's train.max_steps
    pairs: tuple[Pair, ...]
    confidence: float = 0.95

    def to_json(self) -> dict[str, Any]:
        """The comparison as JSON values, with its ``fingerprint``."""
        data = asdict(self)
        data["pairs"] = [asdict(p) for p in self.pairs]
        return {**data, "fingerprint": fingerprint(data)}

    def describe(self) -> str:
        """The rule in one sentence."""
        checkpoint = (
            "last checkpoint (step = train.max_steps)"
            if self.checkpoint == "last"
            else ("best checkpoint by whole-split validation")
        )
        return (
            f"{self.metric} on the whole {self.split} split of each run's {checkpoint}; each "
            f"row minus the row it is set against, paired by seed; "
            f"{self.confidence:.0%} Student-t interval of the mean difference"
        )


def fingerprint(data: dict[str, Any]) -> str:
    """SHA-256 (first 16 hex digits) of a comparison's JSON values, ``fingerprint`` left out."""
    kept = {k: v for k, v in data.items() if k != "fingerprint"}
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _pairs(table: str) -> tuple[Pair, ...]:
    rows = [e for e in table_experiments(table) if e.table == table]
    pairs = [
        Pair(f"{e.row} against {e.baseline.split('/', 1)[1]}", e.name, e.baseline)
        for e in rows
        if not e.is_baseline
    ]
    pairs += [Pair(c.claim, c.row, c.other) for c in CONTRASTS.get(table, ())]
    return tuple(pairs)


def registered_comparison(table: str) -> Comparison:
    """The primary comparison registered for ``table``."""
    if table not in TABLES:
        raise ConfigError(f"unknown table {table!r}: no comparison is registered for it")
    return Comparison(table, METRIC_OF[table], "valid", "last", "end", _pairs(table))


def comparison_from_json(data: Any) -> Comparison:
    """A :class:`Comparison` from what ``experiment.json`` froze; ConfigError if malformed."""
    try:
        pairs = tuple(Pair(**p) for p in data["pairs"])
        comparison = Comparison(
            str(data["table"]), str(data["metric"]), str(data["split"]),
            str(data["checkpoint"]), str(data["step"]), pairs, float(data["confidence"]),
        )  # fmt: skip
    except (KeyError, TypeError, ValueError) as error:
        raise ConfigError(
            f"a frozen comparison is malformed ({error}); restore the run's experiment.json"
        ) from None
    if comparison.checkpoint not in CHECKPOINTS:
        raise ConfigError(
            f"a frozen comparison scores checkpoint {comparison.checkpoint!r}; "
            f"expected one of {', '.join(CHECKPOINTS)}"
        )
    return comparison
