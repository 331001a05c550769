"""A researcher's own A/B (``highway ab``): a baseline and variants over seeds, pre-registered.

Each row is a preset or a config file, with ``key=value`` overrides of its own; the first row
is the baseline. Every row trains over the same seeds with the same data order (seed ``N``:
``train.seed + N - 1`` for every row), by the runner of the papers' tables (jobs, resume, stop
signals, ``--plan``, submitted jobs), into ``OUT/ab/<scale>/<row>/seed<N>`` (scale ``none``:
each row trained as configured).

The request is registered like a table before anything trains: its :class:`Comparison` (each
variant minus the baseline, the metric of the task on the whole validation split of each
run's last checkpoint, paired by seed, 95% Student-t interval) is frozen into every run's
``experiment.json`` before the run trains, and ``highway report`` decides its verdicts from
it alone. Rows that would compare different things are refused before anything trains: a
task or data that differs between rows, a variant identical to another row, different
training seeds.

    plan = plan_ab(["plain=ht-table1/t-l3", "tanh=ht-table1/t-l3+tanh"], "runs/ab", "tiny")
    run_planned(plan.specs, "runs/ab")
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Config
from ..data.levels import corpus_level, headline_key
from ..errors import ConfigError, unknown_choice
from ..presets import PRESETS
from ..storage import runfolder
from .comparisons import Comparison, Pair
from .plan import RunSpec, experiment_config, plan_runs
from .registry import Experiment
from .scale import AS_CONFIGURED, SCALES

#: The table name of every A/B's runs (``OUT/ab/<scale>/...``); no paper's table has it.
AB_TABLE = "ab"

#: A row name: it names the row's folder.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}\Z")

#: Settings that fix what a row's scores are measured on: rows differing in any of them
#: would compare different tasks or data, not models.
DATA_KEYS = (
    "task.name", "task.dataset", "task.permute", "task.length", "data.corpus", "data.path",
    "data.level", "data.subword_vocab_size", "data.vocab_splits", "data.max_eval_tokens",
)  # fmt: skip

#: Config keys that say nothing about what a run computes.
_LABELS = ("name", "source")


class SameConfiguration(ConfigError):
    """Two rows of an A/B train the same configuration; ``row`` is the later of the two."""

    def __init__(self, message: str, row: AbRow) -> None:
        super().__init__(message)
        self.row = row


@dataclass(frozen=True)
class AbRow:
    """One ``--row NAME=SPEC``: a preset (or a config file, or the default config) and the
    row's own overrides."""

    name: str
    preset: str  # "" for a config file or the default config
    config_file: str | None
    overrides: tuple[str, ...]
    spec: str

    def experiment(self, baseline: str, metric: str) -> Experiment:
        """The row as an :class:`Experiment` of the ``ab`` table."""
        return Experiment(
            f"{AB_TABLE}/{self.name}", AB_TABLE, self.preset, {}, metric,
            f"{AB_TABLE}/{baseline}", self.spec, config_file=self.config_file,
            overrides=self.overrides,
        )  # fmt: skip


def parse_row(text: str) -> AbRow:
    """``NAME=SPEC``: SPEC is a preset name or a config file, then ``key=value`` overrides
    (SPEC of overrides only: the default config, as ``highway train`` without ``--preset``)."""
    name, sep, spec = text.partition("=")
    name = name.strip()
    if not sep or not spec.strip() or not name:
        raise ConfigError(
            f'--row {text!r}: give NAME=SPEC, e.g. --row "plain=ht-table1/t-l3" (SPEC: a '
            "preset or a config file, then the row's key=value overrides)"
        )
    if not _NAME.match(name):
        raise ConfigError(
            f"--row {text!r}: the row name {name!r} names its folder: up to 64 letters, digits, "
            "'.', '_', '+' or '-', starting with a letter or digit"
        )
    try:
        parts = shlex.split(spec)
    except ValueError as error:
        raise ConfigError(f"--row {name}: cannot read {spec!r} ({error})") from None
    source, rest = ("", parts) if "=" in parts[0] else (parts[0], parts[1:])
    for item in rest:
        if "=" not in item:
            raise ConfigError(
                f"--row {name}: {item!r} is not a key=value override (one preset or config "
                "file first, then overrides)"
            )
    if not source or source in PRESETS:
        return AbRow(name, source, None, tuple(rest), spec.strip())
    if Path(source).is_file():
        return AbRow(name, "", source, tuple(rest), spec.strip())
    close = difflib.get_close_matches(source, list(PRESETS), n=1, cutoff=0.0)
    hint = f"; the closest preset is {close[0]!r} (`highway presets` lists them)" if close else ""
    raise ConfigError(
        f"--row {name}: {source!r} is neither a preset nor a readable config file{hint}"
    )


def headline_metric(config: Config) -> str:
    """The metric a comparison of ``config``'s runs reads: the task's headline (bpc for a
    character or byte language model), perplexity for a word or subword language model."""
    from ..tasks import task_class  # torch: only when an A/B is planned

    if config.task.name == "lm":
        return headline_key(corpus_level(config.data))
    return task_class(config.task.name).headline


def ab_comparison(experiments: Sequence[Experiment], metric: str) -> Comparison:
    """Each variant against the baseline (the first row): last checkpoint, whole validation
    split, paired by seed, 95% t-interval."""
    base = experiments[0]
    pairs = tuple(Pair(f"{e.row} against {base.row}", e.name, base.name) for e in experiments[1:])
    return Comparison(AB_TABLE, metric, "valid", "last", "end", pairs)


@dataclass(frozen=True)
class AbPlan:
    """An A/B request planned: its runs (seed by seed), rows and registered comparison."""

    specs: list[RunSpec]
    experiments: list[Experiment]
    comparison: Comparison

    @property
    def metric(self) -> str:
        return self.comparison.metric


def _flat(config: Config) -> dict[str, Any]:
    """Every setting by dotted key, the labels left out."""
    return {k: v for k, v in runfolder.flatten(config.to_dict()).items() if k not in _LABELS}


def _check_rows(rows: Sequence[AbRow]) -> None:
    if len(rows) < 2:
        raise ConfigError(
            "an A/B needs a baseline and at least one variant: give --row NAME=SPEC twice or "
            "more (the first is the baseline)"
        )
    seen: dict[str, str] = {}
    for row in rows:
        key = row.name.casefold()  # folders of names differing in case collide on some disks
        if key in seen:
            raise ConfigError(
                f"--row {row.name} is given twice (also as {seen[key]}): each row needs a name "
                "of its own"
            )
        seen[key] = row.name


def _check_configs(rows: Sequence[AbRow], configs: Sequence[Config]) -> None:
    """Refuse rows whose scores would not compare: other data, other seeds, no change."""
    flat = [_flat(c) for c in configs]
    base = rows[0].name
    for row, values in zip(rows[1:], flat[1:], strict=True):
        for key in (*DATA_KEYS, "train.seed"):
            if values[key] == flat[0][key]:
                continue
            what = (
                "would not pair seed by seed (seed N of each row must see the same data order)"
                if key == "train.seed"
                else "read different tasks or data: the comparison would mix them"
            )
            raise ConfigError(
                f"rows {base} and {row.name} {what}: {key}={flat[0][key]!r} in {base}, "
                f"{values[key]!r} in {row.name}; give every row the same {key}"
            )
    for i, (row, values) in enumerate(zip(rows, flat, strict=True)):
        for other, earlier in zip(rows[:i], flat[:i], strict=False):
            if values == earlier:
                which = "the baseline" if other is rows[0] else "row"
                raise SameConfiguration(
                    f"row {row.name} trains the same configuration as {which} {other.name}: a "
                    "variant must change something (another preset, config file or override)",
                    row,
                )


def quote_row_hint(row: AbRow, shared: Sequence[str]) -> str:
    """The likely cause of a :class:`SameConfiguration` on the command line: a row's own
    overrides left unquoted, so the shell gave them to every row; "" with none shared."""
    if not shared:
        return ""
    meant = shlex.quote(f"{row.name}={row.spec} {' '.join(shared)}")
    return (
        f"; {' '.join(shared)} (outside any --row) applies to every row: if it is {row.name}'s "
        f"own, quote the row as one argument: --row {meant}"
    )


def plan_ab(
    rows: Iterable[str | AbRow],
    out_root: str | Path,
    scale: str = AS_CONFIGURED,
    seeds: int = 3,
    data_path: str | Path | None = None,
    overrides: Iterable[str] = (),
) -> AbPlan:
    """Plan an A/B (nothing is written): every row checked against the baseline, then every
    (row, seed) run with the comparison its ``experiment.json`` will freeze."""
    parsed = [parse_row(r) if isinstance(r, str) else r for r in rows]
    _check_rows(parsed)
    if scale != AS_CONFIGURED and scale not in SCALES:
        raise unknown_choice("scale", scale, [AS_CONFIGURED, *SCALES])
    overrides = list(overrides)
    configs = []
    for row in parsed:
        try:
            config = experiment_config(row.experiment(parsed[0].name, "?"), scale, 1, data_path,
                                       overrides)  # fmt: skip
        except ConfigError as error:
            raise ConfigError(f"--row {row.name}: {error}") from None
        configs.append(config)
    _check_configs(parsed, configs)
    metric = headline_metric(configs[0])
    experiments = [row.experiment(parsed[0].name, metric) for row in parsed]
    comparison = ab_comparison(experiments, metric)
    specs = plan_runs(experiments, out_root, scale, seeds, data_path, overrides, comparison)
    return AbPlan(specs, experiments, comparison)


__all__ = ["AB_TABLE", "AbPlan", "AbRow", "SameConfiguration", "ab_comparison",
           "headline_metric", "parse_row", "plan_ab", "quote_row_hint"]  # fmt: skip
