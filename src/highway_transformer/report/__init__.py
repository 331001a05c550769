"""Reports: the papers' tables, figures and verdicts from run folders (``highway report``), and
any runs side by side (``highway compare``): views of run folders read by one reader
(:mod:`.runs`) and computed by one statistics layer (:mod:`.stats`).

:func:`write_report` is imported on first use, so the torch-free parts (finding and reading
run folders) answer a mistyped path before torch is imported.
"""

from __future__ import annotations

from typing import Any

__all__ = ["write_report"]


def __getattr__(name: str) -> Any:
    if name == "write_report":
        from .report import write_report

        return write_report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
