"""The rl task's training-side scores: last-N success and return, and steps to a success rate.

For a table whose metric is ``success`` the registered comparison scores the greedy
evaluation at the last step; this section adds what the training itself logged
(``metrics.jsonl``'s train records, each the mean over the last ``task.rl.stats_episodes``
finished episodes):

* the success rate and episodic return at the last logged step, per seed;
* the environment steps a run needed to reach :data:`SUCCESS_TARGET` training success. The
  rate counts only once its window is full (``env_steps / episode_length`` at least
  ``stats_episodes``), so a lucky handful of first episodes does not count. A run that never
  reaches it is *censored at its budget*: its value is its last logged ``env_steps`` and it is
  marked so; the paired difference reads that value, so a censored row is credited with no
  fewer steps than it trained, an underestimate of its true cost.

Every row is paired by seed with the table's baseline (:func:`~.stats.paired_difference`).
All of it is exploratory: the verdicts stay the registered comparison's.
"""

from __future__ import annotations

from typing import Any

from .runs import RunRecord, number
from .stats import paired_difference, summary

#: The training success rate whose first crossing is counted in environment steps.
SUCCESS_TARGET = 0.9
#: The per-seed scores of a row, each paired by seed with the baseline.
SCORES = ("last_success", "last_return", "steps_to_target")


def _train_records(run: RunRecord) -> list[dict[str, Any]]:
    return [
        r
        for r in run.records
        if r.get("split") == "train" and number(r.get("success_rate")) is not None
    ]


def _window_full(record: dict[str, Any], episodes: int) -> bool:
    """Whether the training window held ``episodes`` finished episodes at ``record``."""
    steps, length = number(record.get("env_steps")), number(record.get("episode_length"))
    return steps is not None and bool(length) and steps / length >= episodes


def run_scores(run: RunRecord, target: float = SUCCESS_TARGET) -> dict[str, Any] | None:
    """One run's last logged training success and return, and the environment steps to
    ``target`` success (censored at its last ``env_steps`` when never reached); None for a
    run that logged no training success."""
    records = _train_records(run)
    if not records:
        return None
    episodes = int(run.flat.get("task.rl.stats_episodes", 1) or 1)
    last = records[-1]
    reached = next(
        (r for r in records if float(r["success_rate"]) >= target and _window_full(r, episodes)),
        None,
    )
    budget = number(last.get("env_steps"))
    steps = number(reached.get("env_steps")) if reached is not None else budget
    return {
        "step": int(last["step"]),
        "env_steps": budget,
        "last_success": float(last["success_rate"]),
        "last_return": number(last.get("episodic_return")),
        "steps_to_target": steps,
        "censored": reached is None,
    }


def _by_seed(runs: list[RunRecord], target: float) -> dict[int, dict[str, Any]]:
    return {run.seed: scores for run in runs if (scores := run_scores(run, target))}


def _paired(by_seed: dict[int, dict[str, Any]], base: dict[int, dict[str, Any]]) -> dict[str, Any]:
    return {
        key: paired_difference(
            {s: v[key] for s, v in by_seed.items()}, {s: v[key] for s, v in base.items()}
        )
        for key in SCORES
    }


def success_rows(
    groups: dict[str, list[RunRecord]], baseline: str | None, target: float = SUCCESS_TARGET
) -> dict[str, Any]:
    """The section's values: every row's per-seed scores, their mean ± std (``censored``:
    how many seeds never reached ``target``), and each row minus ``baseline`` paired by seed
    with its 95% t-interval."""
    scores = {name: _by_seed(runs, target) for name, runs in groups.items()}
    base = scores.get(baseline or "")
    rows = []
    for name, by_seed in scores.items():
        rows.append({
            "name": name,
            "is_baseline": name == baseline,
            "per_seed": {str(seed): by_seed[seed] for seed in sorted(by_seed)},
            **{key: summary(s[key] for s in by_seed.values()) for key in SCORES},
            "censored": sum(bool(s["censored"]) for s in by_seed.values()),
            "paired": _paired(by_seed, base) if base is not None and name != baseline else {},
        })  # fmt: skip
    episodes = sorted({int(r.flat.get("task.rl.stats_episodes", 0)) for g in groups.values()
                       for r in g})  # fmt: skip
    return {"target": target, "stats_episodes": episodes, "baseline": baseline, "rows": rows}
