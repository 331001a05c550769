"""Metrics writers: small pluggable sinks for the trainer's records.

Each record is a flat dict with ``step`` and ``split`` (train | valid) and numbers. The JSONL
and CSV files are written live (a crash loses nothing logged); TensorBoard only with
``train.tensorboard=true``, Weights & Biases only when ``train.wandb_project`` names a project
(each refused up front when its package is not installed: what a run folder holds never
depends on what happens to be installed).
"""

from __future__ import annotations

import csv
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ..extras import import_extra
from ..runtime.machine import duration
from ..storage import runfolder
from ..tasks.progress import PLAIN_EVERY, on_terminal

Record = dict[str, Any]


class MetricsWriter(Protocol):
    def write(self, record: Record) -> None: ...

    def close(self) -> None: ...


class JsonlWriter:
    """``metrics.jsonl``: one JSON record a line, flushed at once."""

    def __init__(self, run_dir: Path) -> None:
        self.handle = open(run_dir / runfolder.METRICS_FILE, "a", encoding="utf-8")  # noqa: SIM115

    def write(self, record: Record) -> None:
        self.handle.write(json.dumps(record) + "\n")
        self.handle.flush()

    def close(self) -> None:
        self.handle.close()


def _column_order(key: str) -> tuple[bool, bool, str]:
    return key != "step", key != "split", key


class CsvWriter:
    """``metrics.csv``: rows appended live; rewritten whole only when a new column appears."""

    def __init__(self, run_dir: Path, records: list[Record]) -> None:
        self.path = run_dir / runfolder.METRICS_CSV
        self.records = list(records)  # the kept records of a resumed run
        self.columns: list[str] = []
        self._rewrite()

    def write(self, record: Record) -> None:
        self.records.append(record)
        if not set(record) <= set(self.columns):
            self._rewrite()
            return
        with open(self.path, "a", newline="", encoding="utf-8") as handle:
            csv.DictWriter(handle, fieldnames=self.columns).writerow(record)

    def _rewrite(self) -> None:
        self.columns = sorted({k for r in self.records for k in r}, key=_column_order)
        with open(self.path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=self.columns)
            writer.writeheader()
            writer.writerows(self.records)

    def close(self) -> None:
        """Rows are written as they come: nothing is pending."""


def _numbers(record: Record) -> dict[str, float]:
    return {
        k: float(v)
        for k, v in record.items()
        if k not in ("step", "split") and isinstance(v, int | float) and not isinstance(v, bool)
    }


class TensorBoardWriter:
    """Scalars as ``split/name`` in ``tensorboard/``."""

    def __init__(self, run_dir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter  # installed: see check_sinks

        self.writer = SummaryWriter(str(run_dir / runfolder.TENSORBOARD_DIR))

    def write(self, record: Record) -> None:
        for key, value in _numbers(record).items():
            self.writer.add_scalar(f"{record['split']}/{key}", value, record["step"])

    def close(self) -> None:
        self.writer.close()


class WandbWriter:
    """Weights & Biases: one run named after the config, resumed with the run folder."""

    def __init__(self, run_dir: Path, project: str, name: str, config: dict[str, Any]) -> None:
        wandb = import_extra("wandb", f"train.wandb_project={project!r} (Weights & Biases)")
        self.run = wandb.init(
            project=project, name=name, config=config, dir=str(run_dir), resume="allow"
        )

    def write(self, record: Record) -> None:
        split = record["split"]
        self.run.log({f"{split}/{k}": v for k, v in _numbers(record).items()}, step=record["step"])

    def close(self) -> None:
        self.run.finish()


def check_sinks(tensorboard: bool, wandb_project: str) -> None:
    """Refuse the optional sinks a run asks for whose package is not installed, before
    anything is written (``train.tensorboard``, ``train.wandb_project``)."""
    if tensorboard:
        import_extra("tensorboard", "train.tensorboard=true")
    if wandb_project:
        import_extra("wandb", f"train.wandb_project={wandb_project!r} (Weights & Biases)")


class Progress:
    """A tqdm progress bar on a terminal; log lines go through ``tqdm.write`` so they never
    share its line. Elsewhere (a pipe, a file) no bar, whose carriage returns and cursor codes
    would garble the log: a plain line in ``log`` at a log step every
    :data:`~highway_transformer.tasks.progress.PLAIN_EVERY` seconds instead."""

    def __init__(
        self,
        total: int,
        initial: int,
        desc: str,
        enabled: bool,
        log: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.bar = None
        self.plain = enabled and not on_terminal()
        self.total, self.step, self.desc, self.log = total, initial, desc, log
        self.started = self.said = time.monotonic()
        self.first = initial
        if enabled and not self.plain:
            from tqdm.auto import tqdm

            self.bar = tqdm(
                total=total, initial=initial, desc=desc, unit="step", dynamic_ncols=True
            )

    def logger(self, log: Callable[[str], None]) -> Callable[[str], None]:
        """``log`` routed around the bar while it is shown."""
        if self.bar is None:
            return log

        bar = self.bar

        def write(message: str) -> None:
            with bar.external_write_mode(file=sys.stderr):  # what tqdm.write does
                log(message)

        return write

    def update(self, record: Record | None) -> None:
        self.step += 1
        if self.plain and record is not None:
            self._plain_line(record)
        if self.bar is None:
            return
        if record is not None:
            self.bar.set_postfix(
                loss=f"{record['loss']:.4f}",
                lr=f"{record['lr']:.3g}",
                items_s=f"{record['rate']:,.0f}",
            )
        self.bar.update(1)

    def _plain_line(self, record: Record) -> None:
        """What the bar shows, as one line, once every PLAIN_EVERY seconds."""
        now = time.monotonic()
        if now - self.said < PLAIN_EVERY:
            return
        self.said = now
        per_step = (now - self.started) / max(self.step - self.first, 1)  # evaluations too
        left = duration(per_step * (self.total - self.step))
        self.log(
            f"{self.desc}: step {self.step:,}/{self.total:,}, loss {record['loss']:.4f}, "
            f"lr {record['lr']:.3g}, {record['rate']:,.0f} items/s, ≈ {left} left"
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
