"""The progress bar of one evaluation (periodic, final, ``highway eval``): a task's
evaluation reports its progress to it (:data:`~highway_transformer.tasks.base.EvalProgress`).

Bars are drawn only on a terminal (:func:`on_terminal`): their carriage returns and cursor
codes garble a piped log or a ``train.log``, which get plain lines instead.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

#: Seconds between two plain progress lines where no bar is drawn.
PLAIN_EVERY = 60.0


def on_terminal() -> bool:
    """Whether stderr, where bars are drawn, is a terminal."""
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty is not None and isatty())


class EvalBar:
    """A tqdm bar of one evaluation on stderr, which a task's evaluation reports to (its
    :attr:`report` is a :data:`~highway_transformer.tasks.base.EvalProgress`); it opens at
    the first report, when the total is known, and goes when the evaluation ends (the
    metrics are printed or logged after it)."""

    def __init__(self, desc: str, unit: str, enabled: bool, closing_line: bool = True) -> None:
        """``closing_line``: where no bar is drawn, a line when the evaluation ends too (not
        for the trainer's periodic evaluations, whose metrics are logged at once)."""
        self.desc, self.unit, self.enabled, self.closing = desc, unit, enabled, closing_line
        self.bar: Any = None
        self.plain = not on_terminal()  # no bar: a line every PLAIN_EVERY s (and at the end)
        self.started = self.said = time.monotonic()
        self.done = self.total = 0

    @property
    def report(self) -> Callable[[int, int], None] | None:
        """What the task calls with (scored so far, in all); None when not shown."""
        return self._report if self.enabled else None

    def _report(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        if self.plain:
            if time.monotonic() - self.said >= PLAIN_EVERY:
                self._say()
            return
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(
                total=total, desc=self.desc, unit=self.unit, leave=False, dynamic_ncols=True
            )
        self.bar.update(done - self.bar.n)

    def __enter__(self) -> EvalBar:
        return self

    def _say(self) -> None:
        self.said = time.monotonic()
        seconds = self.said - self.started
        line = f"{self.desc}: {self.done:,}/{self.total:,} {self.unit} in {seconds:.0f} s"
        print(line, file=sys.stderr, flush=True)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.plain and self.closing and self.total and exc[0] is None:
            self._say()
