from .report import write_report

__all__ = ["write_report"]
