"""The verdicts of a report: the table's registered comparison applied to its runs.

Each run's ``experiment.json`` holds the comparison frozen before it trained
(:mod:`highway_transformer.experiments.comparisons`). The report decides a verdict only from
that comparison:

* *pre-registered*: every run froze the same one;
* *registered after the runs* (``retrospective``): none did (runs that trained before
  comparisons were registered); the registry's comparison is applied, saying so;
* *partly pre-registered*: some runs froze it, the others froze none;
* *conflicting*: runs froze different comparisons: no verdict at all;
* *unregistered*: none did, and no comparison is registered for their table: no verdict.

A run's value is its registered checkpoint's score on the registered split: for the last
checkpoint the whole-split score ``results.json`` records as ``final``; a run that trained
before ``final`` existed offers its periodic validation at its last step instead, which may
have read part of the split (the report says how many tokens).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..errors import ConfigError
from ..experiments.comparisons import Comparison, comparison_from_json, registered_comparison
from ..runtime.provenance import code_facts
from .runs import RunRecord
from .stats import (
    PERCENT_METRICS,
    higher_is_better,
    mean,
    paired_difference,
    relative_change,
    shared_seeds,
)

PRE_REGISTERED = "pre-registered"
RETROSPECTIVE = "registered after the runs"
PARTLY = "partly pre-registered"
CONFLICTING = "conflicting"
UNREGISTERED = "unregistered"


def frozen_status(runs: list[RunRecord], table: str) -> dict[str, Any]:
    """Which comparison decides the report's verdicts, and how it was registered."""
    frozen = [r.experiment.get("comparison") for r in runs]
    prints = Counter(str(f.get("fingerprint")) for f in frozen if isinstance(f, dict))
    if len(prints) > 1:
        listed = ", ".join(f"{p} ({n} runs)" for p, n in sorted(prints.items()))
        return {"status": CONFLICTING, "comparison": None, "registered_with": None,
                "note": f"the runs froze different comparisons ({listed}): no verdict"}  # fmt: skip
    if prints:
        first = next(f for f in frozen if isinstance(f, dict))
        comparison = comparison_from_json(first)
        status = PRE_REGISTERED if all(isinstance(f, dict) for f in frozen) else PARTLY
        codes = [f.get("registered_with") for f in frozen if isinstance(f, dict)]
        return {"status": status, "comparison": comparison.to_json(),
                "registered_with": first.get("registered_with"),
                "note": _registered_note(status, codes)}  # fmt: skip
    try:
        comparison = registered_comparison(table)
    except ConfigError:
        note = (
            f"no run froze a comparison and none is registered for table {table!r} (`highway "
            "ab` freezes one into every run before it trains): no verdict"
        )
        return {"status": UNREGISTERED, "comparison": None, "registered_with": None, "note": note}
    return {
        "status": RETROSPECTIVE,
        "comparison": comparison.to_json(),
        "registered_with": dict(code_facts()),
        "note": "these runs trained before comparisons were registered: the comparison "
        "registered now is applied to them, so its verdicts are not pre-registered",
    }


def _runs(count: int) -> str:
    return f"{count} run" if count == 1 else f"{count} runs"


def _registered_note(status: str, codes: list[Any]) -> str:
    """Where the frozen comparison was registered: every commit the runs froze it at (the
    same comparison, fingerprint for fingerprint, can be frozen by several commits)."""
    commits = Counter(c.get("commit") if isinstance(c, dict) else None for c in codes)
    named = sorted(commit for commit in commits if commit)
    if len(named) > 1:
        listed = ", ".join(f"{commit} ({_runs(commits[commit])})" for commit in named)
        where = f"registered by {len(named)} commits, the same comparison at each: {listed}"
    elif named:
        where = f"registered by commit {named[0]}"
    else:
        where = "registered by an installed package"
    if None in commits and named:
        where += f" and by an installed package ({_runs(commits[None])})"
    if status == PARTLY:
        return f"{where}; some runs trained before it was registered and froze none"
    return f"{where}, frozen into every run before it trained"


def scored_value(run: RunRecord, comparison: Comparison) -> tuple[float | None, str]:
    """The run's value under ``comparison`` and where it comes from."""
    results = run.results or {}
    train = run.config.get("train", {})
    metric, split = comparison.metric, comparison.split
    scale = 100.0 if metric in PERCENT_METRICS else 1.0
    if comparison.checkpoint == "best":
        if train.get("eval_max_tokens") is not None or train.get("final_weights") == "last":
            return None, "no best checkpoint chosen on the whole split"
        return _scaled(results.get(split, {}).get(metric), scale), "best, whole split"
    final = results.get("final")
    if isinstance(final, dict) and isinstance(final.get(split), dict):
        return _scaled(final[split].get(metric), scale), "last, whole split"
    if train.get("final_weights") == "last" and results:
        return _scaled(results.get(split, {}).get(metric), scale), "last, whole split"
    return _last_periodic(run, split, metric, scale, train)


def _last_periodic(
    run: RunRecord, split: str, metric: str, scale: float, train: dict[str, Any]
) -> tuple[float | None, str]:
    """The periodic validation at the run's last step (older runs record no ``final``)."""
    last = max((int(r["step"]) for r in run.records), default=None)
    found = [
        r for r in run.records if r.get("split") == split and r["step"] == last and metric in r
    ]
    if not found:
        return None, f"no {split} score of the last checkpoint recorded"
    record = found[-1]
    cap = train.get("eval_max_tokens")
    tokens = record.get("tokens")
    part = (
        "whole split" if cap is None else
        f"first {int(tokens):,} tokens" if tokens is not None else f"at most {int(cap):,} tokens"
    )  # fmt: skip
    return float(record[metric]) * scale, f"last, periodic validation ({part})"


def _scaled(value: Any, scale: float) -> float | None:
    return None if value is None else float(value) * scale


def verdict_rows(
    groups: dict[str, list[RunRecord]], comparison: Comparison
) -> list[dict[str, Any]]:
    """Each registered pair whose rows both ran: values per seed, the paired difference with
    its interval, the relative change, the published change and the verdict."""
    values = {
        name: {run.seed: scored_value(run, comparison) for run in runs}
        for name, runs in groups.items()
    }
    out = []
    for pair in comparison.pairs:
        if pair.row not in values or pair.against not in values:
            continue
        row = {s: v for s, (v, _) in values[pair.row].items()}
        against = {s: v for s, (v, _) in values[pair.against].items()}
        paired = paired_difference(row, against, comparison.confidence)
        seeds = shared_seeds(row, against)
        mine = mean([row[s] for s in seeds])
        theirs = mean([against[s] for s in seeds])
        published, published_split = _published_change(groups, pair.row, pair.against, comparison)
        sources = sorted({src for name in (pair.row, pair.against)
                          for _, src in values[name].values()})  # fmt: skip
        out.append({
            "claim": pair.claim, "row": pair.row, "against": pair.against,
            "row_per_seed": {str(s): v for s, v in row.items()},
            "against_per_seed": {str(s): v for s, v in against.items()},
            "paired": paired, "change_pct": relative_change(mine, theirs),
            "published_change_pct": published, "published_split": published_split,
            "sources": sources,
            "verdict": verdict(paired, published, comparison.metric),
        })  # fmt: skip
    return out


def _published_change(
    groups: dict[str, list[RunRecord]], row: str, against: str, comparison: Comparison
) -> tuple[float | None, str | None]:
    """The published relative change of the registered split, else of the test split (the
    RT paper publishes test figures only), and which split it is."""
    mine = groups[row][0].experiment.get("published", {})
    theirs = groups[against][0].experiment.get("published", {})
    own = "eval" if comparison.split == "valid" else comparison.split
    for split in dict.fromkeys((own, "test")):
        key = f"{split}_{comparison.metric}"
        change = relative_change(mine.get(key), theirs.get(key))
        if change is not None:
            return change, "valid" if split == "eval" else split
    return None, None


def verdict(paired: dict[str, Any] | None, published: float | None, metric: str) -> str:
    """``better`` / ``worse`` when the interval excludes 0, ``no detectable difference``
    when it does not, ``no verdict`` below two paired seeds; with the paper's direction
    where it published both rows."""
    if paired is None or paired["verdict"] is None:
        return "no verdict (fewer than two paired seeds)"
    if paired["verdict"] == "unresolved":
        word = "no detectable difference"
    else:
        word = "better" if (paired["verdict"] == "higher") == higher_is_better(metric) else "worse"
    if published is None or published == 0:
        return word
    paper = "better" if (published > 0) == higher_is_better(metric) else "worse"
    if word == "no detectable difference":
        return f"{word} (the paper: {paper})"
    return f"{word}: " + ("the paper's direction" if word == paper else "opposite to the paper")


def primary_comparison(groups: dict[str, list[RunRecord]], table: str) -> dict[str, Any]:
    """``report.json["primary"]``: the comparison, how it was registered, and the verdicts."""
    runs = [run for group in groups.values() for run in group]
    status = frozen_status(runs, table)
    if status["comparison"] is None:
        return {**status, "rule": None, "rows": []}
    try:
        comparison = comparison_from_json(status["comparison"])
    except ConfigError as error:
        return {**status, "status": CONFLICTING, "note": str(error), "rule": None, "rows": []}
    rows = verdict_rows(groups, comparison)
    return {**status, "rule": comparison.describe(), "rows": rows}
