"""The progress bar of one evaluation (periodic, final, ``highway eval``): a task's
evaluation reports its progress to it (:data:`~highway_transformer.tasks.base.EvalProgress`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class EvalBar:
    """A tqdm bar of one evaluation on stderr, which a task's evaluation reports to (its
    :attr:`report` is a :data:`~highway_transformer.tasks.base.EvalProgress`); it opens at
    the first report, when the total is known, and goes when the evaluation ends (the
    metrics are printed or logged after it)."""

    def __init__(self, desc: str, unit: str, enabled: bool) -> None:
        self.desc, self.unit, self.enabled = desc, unit, enabled
        self.bar: Any = None

    @property
    def report(self) -> Callable[[int, int], None] | None:
        """What the task calls with (scored so far, in all); None when not shown."""
        return self._report if self.enabled else None

    def _report(self, done: int, total: int) -> None:
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(
                total=total, desc=self.desc, unit=self.unit, leave=False, dynamic_ncols=True
            )
        self.bar.update(done - self.bar.n)

    def __enter__(self) -> EvalBar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()
