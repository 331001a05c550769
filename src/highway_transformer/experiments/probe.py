"""A row's seconds per step here, measured by training it for a few steps.

``highway run --plan`` prices the runs left from what the table's own runs measured on this
kind of machine (:mod:`.estimate`); a table never run here has no such rate. ``--plan --probe
N`` trains each such row for ``N`` steps after :data:`WARMUP` unmeasured ones (allocator,
caches, first-call dispatch) in a temporary folder: the row's own model, data, batch,
optimiser and precision, with the threads a run of the plan would get, through the trainer
users run. Nothing is evaluated or checkpointed and the folder is removed. A probe is a
sample of a run's start, taken alone on the machine: a rate over whole runs (periodic
evaluations, machine load, several runs sharing the cores) is what the plan uses once one
exists.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from ..config import Config

__all__ = ["WARMUP", "probe_seconds_per_step"]

#: Steps trained before the probe's clock starts.
WARMUP = 2


class _ProbeDone(Exception):
    """Raised from the trainer's step hook once the probe has its steps."""


def probe_seconds_per_step(config: Config, steps: int, threads: int) -> float | None:
    """Wall seconds per optimiser step of ``config``'s training over ``steps`` steps after
    :data:`WARMUP`, on ``threads`` CPU threads (``train.threads`` when it sets them); None
    when the run is too short to measure that way (it would reach its final evaluation)."""
    import torch

    from ..training.trainer import Trainer  # torch: only when a plan is probed

    measured = min(steps, config.train.max_steps - 1 - WARMUP)
    if measured < 1:
        return None
    quiet = config.replace(
        **{
            "train.threads": config.train.threads or threads,
            "train.eval_interval": config.train.max_steps,  # never reached by the probe
            "train.checkpoint_interval": 0,  # then only evaluations would save
        }
    )
    before = torch.get_num_threads()
    marks: list[float] = []

    def clock(step: int) -> None:
        if step == WARMUP or step == WARMUP + measured:
            if trainer.device.type == "cuda":  # the step's kernels, not only their launches
                torch.cuda.synchronize(trainer.device)
            marks.append(time.perf_counter())
        if len(marks) == 2:
            raise _ProbeDone

    try:
        with tempfile.TemporaryDirectory(prefix="highway-probe-") as folder:
            trainer = Trainer(quiet, Path(folder) / "run", progress=False, log=lambda _: None)
            try:
                trainer.fit(after_step=clock)
            except _ProbeDone:
                pass
            finally:
                trainer.close_writers()
    finally:
        torch.set_num_threads(before)
    return (marks[1] - marks[0]) / measured
