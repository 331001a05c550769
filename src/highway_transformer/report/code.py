"""Which code a report's runs were trained by: comparisons pair runs of one code only.

Every run records the code it trained with (:func:`~highway_transformer.runtime.provenance.
code_facts`: version, source SHA-256, commit, uncommitted changes), once per stretch of
training. A row set against another, seed by seed, measures the gate only when both ran the
same code; so a report whose runs differ in code, or did not record it (runs older than the
record), is refused unless ``allow_mixed_code`` says to write it anyway, and then it says so
at its top.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

NOT_RECORDED = "code not recorded"
#: Groups of more runs than this are counted, not named, in the report's warning.
NAMED_RUNS = 4


def _code_of(facts: dict[str, Any]) -> str:
    sha = facts.get("code_sha256")
    if not isinstance(sha, str) or not sha:
        return NOT_RECORDED
    commit = facts.get("commit")
    where = f"commit {str(commit)[:10]}" if commit else "no git checkout"
    changed = " with uncommitted changes" if facts.get("dirty") else ""
    return f"source {sha[:12]} (version {facts.get('code_version')}, {where}{changed})"


def run_code(results: dict[str, Any] | None) -> set[str]:
    """The code versions one run trained with: its stretches', else its metadata's."""
    results = results or {}
    stretches = results.get("stretches")
    if isinstance(stretches, list) and stretches:
        found = {_code_of(s) for s in stretches if isinstance(s, dict)}
        return found or {NOT_RECORDED}
    metadata = results.get("metadata")
    return {_code_of(metadata)} if isinstance(metadata, dict) else {NOT_RECORDED}


def runs_by_code(runs: Iterable[tuple[str, dict[str, Any] | None]]) -> dict[str, Any]:
    """``{"one_code": bool, "runs_by_code": {code: [label, ...]}}`` of ``(label,
    results.json)`` runs; ``one_code`` only when every run recorded one and the same code."""
    groups: dict[str, list[str]] = {}
    for label, results in runs:
        for code in sorted(run_code(results)):
            groups.setdefault(code, []).append(label)
    one = len(groups) == 1 and NOT_RECORDED not in groups
    return {"one_code": one, "runs_by_code": groups}


def describe_groups(code: dict[str, Any]) -> str:
    """The code groups on one line: ``*code*: run, run; *code*: 12 runs``."""
    return "; ".join(
        f"*{version}*: " + (", ".join(runs) if len(runs) <= NAMED_RUNS else f"{len(runs)} runs")
        for version, runs in code["runs_by_code"].items()
    )


def code_markdown(code: dict[str, Any]) -> list[str]:
    """The warning at the top of a report whose runs did not all run one recorded code."""
    if code["one_code"]:
        return []
    return [
        "**The runs were not all trained by one recorded version of the code** "
        f"({describe_groups(code)}). The report was written with `--allow-mixed-code`: a "
        "difference between rows may include a change of the code, not only of the model.",
        "",
    ]
