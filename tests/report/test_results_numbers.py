"""Every result number in the per-table sections of ``docs/results/README.md`` is one of its
report's: each number written with a decimal point or a percent sign in a section's prose must
be a value of the ``report.json`` that the section links to, as the report rounds it, or a
setting named in ``CONFIGURATION`` below."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from highway_transformer.report.tables import PERCENT_METRICS

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
PAGE = RESULTS / "README.md"

FIRST = "### HT Table 5 analogue at `cpu-short`"  # the first per-table section
AFTER = "# Earlier: HT Tables 1 and 2 at the `small` scale"  # the heading after the last one

# Numbers with a decimal point or a percent sign that state a setting, not a result.
CONFIGURATION = {
    "2.5e-4": "the paper's Adam learning rate of the HT 5 L6-XL (a setting)",
    "0.25": "the HT 5 analogue's gradient clip (a setting)",
    "4.0": "the char tables' SGD learning rate at the `cpu` scale (a setting)",
    "2.0": "the published SGD learning rate of the char and word tables (a setting)",
    "0.15": "the char tables' gradient clip, and the RT 2 preset's former clip (settings)",
    "95%": "the confidence level of the registered comparison's interval (a setting)",
}

NUMBER = re.compile(r"(?<![\w.])[−+-]?\d[\d,]*(?:\.\d+)?(?:e[−+-]?\d+)?%?")
FENCE = re.compile(r"^```.*?^```[^\n]*$", re.S | re.M)
LINK_TARGET = re.compile(r"\]\([^)]*\)")
REPORT_LINK = re.compile(r"\]\(([a-z0-9-]+)/index\.md\)")


def sections(page: str) -> dict[str, str]:
    """The per-table sections, by heading: from ``FIRST`` up to ``AFTER``."""
    start, end = page.index(FIRST), page.index(AFTER)
    found: dict[str, str] = {}
    for chunk in page[start:end].split("\n### "):
        heading, _, body = chunk.removeprefix("### ").partition("\n")
        found[heading.strip()] = body
    return found


def prose_numbers(body: str) -> list[str]:
    """The numbers with a decimal point or a percent sign in ``body``, outside code blocks and
    link targets, as written (sign, thousands commas and ``%`` kept)."""
    text = LINK_TARGET.sub("]", FENCE.sub("", body))
    return [m for m in NUMBER.findall(text) if "." in m or "%" in m]


def _values(node: object) -> Iterator[float]:
    if isinstance(node, bool):
        return
    if isinstance(node, (int, float)):
        yield float(node)
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _values(value)
            # Runs and baselines store an accuracy as a fraction; the pages print it in percent.
            if key in PERCENT_METRICS and isinstance(value, float) and 0.0 <= value <= 1.0:
                yield 100 * value
    elif isinstance(node, list):
        for value in node:
            yield from _values(value)


def _rounded(value: float, decimals: range) -> set[str]:
    return {f"{abs(value):.{k}f}" for k in decimals}


def report_numbers(report: dict) -> set[str]:
    """Every number of ``report`` as the report rounds it (1–4 decimals, no sign; an accuracy
    stored as a fraction also in percent, as the pages print it), and the table's total run
    time in hours (the sum of its runs' train seconds, 1–2 decimals)."""
    allowed: set[str] = set()
    for value in _values(report):
        allowed |= _rounded(value, range(1, 5))
    seconds = [run.get("metadata", {}).get("train_seconds") or 0.0 for run in report["runs"]]
    allowed |= _rounded(sum(seconds) / 3600, range(1, 3))
    return allowed


def normalised(number: str) -> str:
    return number.replace("−", "-").lstrip("+-").replace(",", "").removesuffix("%")


PER_TABLE = sections(PAGE.read_text(encoding="utf-8")) if PAGE.exists() else {}


def test_the_per_table_sections_are_found() -> None:
    assert len(PER_TABLE) == 12, sorted(PER_TABLE)
    for heading, body in PER_TABLE.items():
        linked = set(REPORT_LINK.findall(body))
        assert len(linked) == 1, f"section {heading!r} links {sorted(linked)}, not one report"
        assert (RESULTS / linked.pop() / "report.json").exists(), heading


@pytest.mark.parametrize("heading", sorted(PER_TABLE))
def test_each_number_in_a_section_is_its_reports_or_a_setting(heading: str) -> None:
    body = PER_TABLE[heading]
    (name,) = set(REPORT_LINK.findall(body))
    path = RESULTS / name / "report.json"
    allowed = report_numbers(json.loads(path.read_text(encoding="utf-8")))
    missing = [
        number
        for number in prose_numbers(body)
        if number not in CONFIGURATION
        and normalised(number) not in CONFIGURATION
        and normalised(number) not in allowed
    ]
    assert not missing, (
        f"section {heading!r}: {missing} not in {path.relative_to(ROOT)} (rounded to 1-4 "
        "decimals, sign dropped) nor in CONFIGURATION"
    )


def test_the_check_finds_numbers_and_refuses_strangers() -> None:
    body = "```bash\nrun 9.99\n```\nbpc 1.92 (−3.1%) at [link](x/index.md), lr 2.5e-4, 3 seeds."
    assert prose_numbers(body) == ["1.92", "−3.1%", "2.5e-4"]
    allowed = report_numbers({"runs": [{"metadata": {"train_seconds": 7200.0}}], "x": -3.0534})
    assert {"3.1", "3.05", "2.0", "2.00"} <= allowed and "1.92" not in allowed
    fractions = report_numbers({"runs": [], "valid": {"accuracy": 0.9404, "loss": 0.2267}})
    assert {"94.04", "0.9404", "0.2267"} <= fractions and "22.67" not in fractions
    assert normalised("−1,757.3%") == "1757.3"


def test_the_readme_results_section_numbers_are_the_reports() -> None:
    """The README's verdict bullets (up to its hand-measured cost figures) quote reports only."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("## What has been measured, and how far to trust it")
    body = readme[start : readme.index("- **Cost.**", start)]
    allowed: set[str] = set()
    for path in RESULTS.glob("*/report.json"):
        allowed |= report_numbers(json.loads(path.read_text(encoding="utf-8")))
    missing = [
        n for n in prose_numbers(body) if n not in CONFIGURATION and normalised(n) not in allowed
    ]
    assert not missing, f"README results section: {missing} are in no docs/results report.json"
