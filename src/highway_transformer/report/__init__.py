"""Reports: the papers' tables, figures and verdicts from run folders (``highway report``), and
any runs side by side (``highway compare``)."""

from .report import write_report

__all__ = ["write_report"]
