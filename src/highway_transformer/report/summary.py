"""The verdicts of several reports in one Markdown table, from their ``report.json`` files.

``docs/results/README.md`` holds this table between the markers :data:`START` and :data:`END`;
a test regenerates it from the committed reports and requires it to match, so every verdict
and number there is a report's. Regenerate it with::

    python -m highway_transformer.report.summary $(grep -l '"primary"' docs/results/*/report.json)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .markdown import format_difference
from .stats import higher_is_better

START = "<!-- verdicts: generated from the reports' report.json; do not edit by hand -->"
END = "<!-- end of generated verdicts -->"


def read_report(path: str | Path) -> dict[str, Any]:
    """One ``report.json``; ConfigError when it is unreadable or holds no verdicts."""
    try:
        report = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ConfigError(f"cannot read {path} ({error}); write it with `highway report`") from None
    if not isinstance(report, dict) or "primary" not in report:
        raise ConfigError(
            f"{path} has no registered comparison (written by an older `highway report`); "
            "write it again"
        )
    return report


def _digits(metric: str) -> int:
    return 4 if metric == "bpc" else 2


def _seeds_better(row: dict[str, Any], metric: str) -> str:
    paired = row["paired"]
    if paired is None:
        return "—"
    sign = 1 if higher_is_better(metric) else -1
    better = sum(1 for d in paired["per_seed"].values() if d * sign > 0)
    return f"{better}/{paired['n']}"


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1f}%"


def _published(row: dict[str, Any], split: str) -> str:
    """The paper's change, naming its split when it is not the registered one."""
    text = _percent(row["published_change_pct"])
    other = row.get("published_split")
    return f"{text} ({other})" if other and other != split else text


def summary_rows(report: dict[str, Any], label: str) -> list[str]:
    """The Markdown rows of one report's verdicts (``label`` names its table)."""
    primary, metric = report["primary"], report["metric"]
    if primary["comparison"] is None:
        return [f"| {label} | — | — | — | — | — | no verdict: {primary['note']} |"]
    digits = _digits(metric)
    out = []
    for index, row in enumerate(primary["rows"]):
        cells = [
            label if index == 0 else "",
            row["claim"],
            _published(row, report["primary"]["comparison"]["split"]),
            f"{_percent(row['change_pct'])} "
            f"({format_difference(row['paired'], digits, verdict=False)} {metric})",
            _seeds_better(row, metric),
            "; ".join(row["sources"]),
            row["verdict"],
        ]
        out.append("| " + " | ".join(cells) + " |")
    return out


def summary_markdown(paths: list[str | Path]) -> str:
    """The verdicts of the reports at ``paths`` (each report's folder names its table), folder
    by folder (``ht-table1-cpu`` before ``ht-table1-cpu-modern``, whatever order they come in)."""
    lines = [
        START,
        "| report (registration) | claim | paper Δ | measured Δ (row − against, mean [95% t]) "
        "| seeds better | scored | verdict |",
        "| --- | --- | ---: | --- | ---: | --- | --- |",
    ]
    for path in sorted(Path(path) for path in paths):
        report = read_report(path)
        folder = path.parent.name
        label = f"[{folder}]({folder}/index.md) ({report['primary']['status']})"
        lines += summary_rows(report, label)
    lines.append(END)
    return "\n".join(lines)


def generated_block(text: str) -> str:
    """The generated table inside ``text`` (markers included); ConfigError without one."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ConfigError("no generated verdicts table (its start and end markers) in the text")
    return text[start : end + len(END)]


def main(argv: list[str] | None = None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print("usage: python -m highway_transformer.report.summary REPORT.json ...")
        return 2
    try:
        print(summary_markdown(paths))
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
