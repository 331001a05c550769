"""The lines a training says about its budget: the steps it plans and the time they take.

A run's log can be piped to a file (``highway run --jobs N`` writes ``train.log``; a user
tees it), where no progress bar is drawn: the first line says how many steps the run trains
and, where a rate is known for this machine (its own earlier stretches here, or a probe's
in the per-user cache: :mod:`~highway_transformer.training.rates`), how long they take;
where none is, the rate measured over the first log interval follows once.
"""

from __future__ import annotations

from ..runtime.machine import duration


def start_line(name: str, step: int, max_steps: int, rate: float | None, interval: int) -> str:
    """What the run plans (``rate``: seconds per step here, None when unknown;
    ``interval``: ``train.log_interval``, after which an unknown rate is measured)."""
    left = max_steps - step
    where = f"from step {step:,} " if step else ""
    line = f"{name}: {left:,} steps to train {where}(train.max_steps={max_steps:,})"
    if rate is None:
        return (
            f"{line}; no rate measured on this kind of machine yet: the rate and the time "
            f"left follow after the first {min(interval, left):,} steps"
        )
    return f"{line}; ≈ {duration(left * rate)} at {rate:.3g} s/step measured here"


def rate_line(name: str, seconds_per_step: float, measured: int, left: int) -> str:
    """The rate over the first ``measured`` steps and the training time of the ``left``
    steps at it (periodic evaluations not counted)."""
    return (
        f"{name}: {seconds_per_step:.3g} s/step over the first {measured:,} steps here: "
        f"≈ {duration(left * seconds_per_step)} of training left ({left:,} steps)"
    )
