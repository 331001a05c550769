"""Planning a request: one run folder per (row, seed), its final config, what it holds now
and what ``highway run`` would do with it (``--plan`` prints this, trains nothing).

Layout: ``OUT/<table>/<scale>/<row>/seed<N>/`` holding the trainer's run folder
(``config.yaml``, ``metrics.jsonl``, ``checkpoint/``, ``best/``, ``results.json``) and an
``experiment.json`` (name, table, scale, seed, published figures, and the table's registered
comparison, frozen there before the run first trains: :mod:`.comparisons`). Seed ``N`` trains
with ``train.seed + N - 1``; every row of a table shares the seed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Config, parse_override
from ..errors import ConfigError, HighwayError
from ..runtime.provenance import code_facts
from ..storage import runfolder
from ..training.rates import PLACE_KEYS
from ..training.runlock import holder
from . import estimate
from .comparisons import Comparison, registered_comparison
from .param_match import match_parameters
from .registry import EXPERIMENTS, Experiment, get_experiment, resolve_experiments
from .scale import AS_CONFIGURED, describe_scale, get_scale, scale_changes, scaled


@dataclass(frozen=True)
class RunSpec:
    """One (row, seed) run: its experiment, folder and final configuration."""

    experiment: Experiment
    seed: int
    scale: str
    run_dir: Path
    config: Config
    overrides: tuple[str, ...] = ()  # what the run computes (all but the PLACE_KEYS ones)
    # The comparison its experiment.json freezes; None: the table's registered one.
    comparison: Comparison | None = None

    @property
    def registered(self) -> Comparison:
        """The comparison this run is registered under: its request's, or its table's."""
        return self.comparison or registered_comparison(self.experiment.table)

    @property
    def finished(self) -> bool:
        return runfolder.is_finished(self.run_dir)

    @property
    def interrupted(self) -> bool:
        return not self.finished and runfolder.has_checkpoint(self.run_dir)


def run_dir_for(out_root: str | Path, experiment: Experiment, scale: str, seed: int) -> Path:
    """``out_root/<table>/<scale>/<row>/seed<N>``."""
    return Path(out_root) / experiment.table / scale / experiment.row / f"seed{seed}"


def _row_overrides(
    experiment: Experiment, data_path: str | Path | None, overrides: Iterable[str]
) -> list[str]:
    """What a row's run applies after scaling: ``data.path``, the request's overrides, then
    the row's own."""
    extra = [f"data.path={data_path}"] if data_path is not None else []
    return extra + list(overrides) + list(experiment.overrides)


def experiment_config(
    experiment: Experiment,
    scale: str,
    seed: int = 1,
    data_path: str | Path | None = None,
    overrides: Iterable[str] = (),
) -> Config:
    """The row's preset scaled to ``scale``, then ``data.path``, the overrides and the row's
    own overrides, then the seed; validated once, complete."""
    from ..config import apply_overrides
    from ..validation import check_overrides, validate  # torch: only when a run is planned

    extra = _row_overrides(experiment, data_path, overrides)
    check_overrides(experiment.config(), None, extra)  # the forms, before scaling reads them
    config = apply_overrides(scaled(experiment.config(), scale), None, extra)
    if experiment.match_params_of:  # counting parameters builds the model: a valid one
        matched = get_experiment(experiment.match_params_of)
        target = experiment_config(matched, scale, seed, None, overrides)
        config = match_parameters(validate(config), target)
    config = config.replace(**{"train.seed": config.train.seed + seed - 1})
    config.name = experiment.name.replace("/", "_") + f"_{scale}_seed{seed}"
    return validate(config)


def scale_change_lines(
    specs: Iterable[RunSpec], data_path: str | Path | None = None, overrides: Iterable[str] = ()
) -> list[str]:
    """For each row of ``specs`` (once, not per seed), the line naming every setting its
    ``--scale`` changed (``ROW: scale S changed N settings: key old -> new, ...``), as
    ``highway train --scale`` prints it; rows the scale leaves as they are say nothing. What
    the request's overrides, the row's own overrides and parameter matching set is not the
    scale's doing and is left out."""
    from ..config import apply_overrides

    lines, seen = [], set()
    for spec in specs:
        if spec.experiment.name in seen:
            continue
        seen.add(spec.experiment.name)
        row_extra = _row_overrides(spec.experiment, data_path, overrides)
        asked = apply_overrides(spec.experiment.config(), None, row_extra)
        shrunk = apply_overrides(scaled(spec.experiment.config(), spec.scale), None, row_extra)
        line = scale_changes(asked, shrunk, spec.scale)
        if line:
            lines.append(f"{spec.experiment.name}: {line}")
    return lines


def plan_runs(
    names_or_table: str | Iterable[str | Experiment],
    out_root: str | Path,
    scale: str,
    seeds: int = 1,
    data_path: str | Path | None = None,
    overrides: Iterable[str] = (),
    comparison: Comparison | None = None,
) -> list[RunSpec]:
    """Every (row, seed) run of the request, with its folder and config (nothing is written),
    seed by seed: every row's first seed comes before any row's second, so a table stopped
    part-way (runs of hours on a CPU) has compared every row. Rows are registry names or
    :class:`Experiment` objects built for the request (``highway ab``), whose
    ``comparison`` every run freezes in place of a registered table's."""
    experiments = resolve_experiments(names_or_table)
    if scale != AS_CONFIGURED:
        get_scale(scale)
    elif any(e.name in EXPERIMENTS for e in experiments):
        raise ConfigError(
            f"--scale {AS_CONFIGURED} trains rows as configured, for `highway ab`; a paper's "
            "table trains at --scale paper (the published settings) or a smaller scale"
        )
    if seeds < 1:
        raise ConfigError(f"seeds must be >= 1, got {seeds}")
    overrides = list(overrides)
    recorded = tuple(o for o in overrides if parse_override(o)[0] not in PLACE_KEYS)
    specs = []
    for seed in range(1, seeds + 1):
        for experiment in experiments:
            config = experiment_config(experiment, scale, seed, data_path, overrides)
            folder = run_dir_for(out_root, experiment, scale, seed)
            specs.append(RunSpec(experiment, seed, scale, folder, config, recorded, comparison))
    return specs


def _read_experiment(spec: RunSpec) -> dict[str, Any]:
    path = spec.run_dir / runfolder.EXPERIMENT_FILE
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return stored if isinstance(stored, dict) else {}


def frozen_comparison(spec: RunSpec) -> dict[str, Any] | None:
    """The comparison the run's ``experiment.json`` froze, or None (none yet, or a run that
    trained before comparisons were registered)."""
    frozen = _read_experiment(spec).get("comparison")
    return frozen if isinstance(frozen, dict) else None


def _registration(spec: RunSpec) -> dict[str, Any] | None:
    """The comparison to record: the one frozen before; for a run not started yet, the
    registry's now, with the code that registers it; for an older run that trained without
    one, none (it was not registered before it trained)."""
    frozen = frozen_comparison(spec)
    if frozen is not None or spec.finished or spec.interrupted:
        return frozen
    registered = spec.registered.to_json()
    return {**registered, "registered_with": dict(code_facts())}


def write_experiment_file(spec: RunSpec) -> Path:
    """``experiment.json``: what the run reproduces, the published figures and the table's
    registered comparison (frozen: a rewrite keeps the one recorded first)."""
    e = spec.experiment
    comparison = _registration(spec)
    info: dict[str, Any] = {
        "name": e.name,
        "table": e.table,
        "also_in": list(e.also_in),
        "row": e.row,
        "preset": e.preset,
        "scale": spec.scale,
        "scale_description": describe_scale(spec.scale),
        "overrides": list(spec.overrides),
        "seed": spec.seed,
        "train_seed": spec.config.train.seed,
        "metric": e.metric,
        "baseline": e.baseline,
        "published": e.published,
        "protocols": e.protocols,
        "match_params_of": e.match_params_of,
        "description": e.description,
    }
    if e.config_file is not None:
        info["config_file"] = e.config_file
    if e.overrides:
        info["row_overrides"] = list(e.overrides)
    if comparison is not None:
        info["comparison"] = comparison
    spec.run_dir.mkdir(parents=True, exist_ok=True)
    path = spec.run_dir / runfolder.EXPERIMENT_FILE
    path.write_text(json.dumps(info, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def _check_same_overrides(spec: RunSpec) -> None:
    """Refuse to skip or resume a run folder trained with other overrides (another budget)."""
    stored = _read_experiment(spec).get("overrides")  # unreadable: re-prepared from here
    if stored is not None and list(stored) != list(spec.overrides):
        raise ConfigError(
            f"{spec.run_dir} was trained with overrides {stored or 'none'}, this request gives "
            f"{list(spec.overrides) or 'none'}: pass another --out, or the same overrides"
        )


def _check_same_config(spec: RunSpec) -> None:
    """Refuse to skip or resume a run folder whose config is not the one this request plans
    (e.g. the scale or a preset changed since it trained): its numbers would be mixed into
    a table of other models."""
    try:
        differing = runfolder.config_differences(
            spec.run_dir, spec.config, PLACE_KEYS | {"name", "source"}
        )
    except HighwayError:
        return  # unreadable: training refuses or re-prepares it
    if differing:
        shown = ", ".join(f"{k}={saved!r} there, {now!r} now" for k, saved, now in differing[:3])
        more = f" and {len(differing) - 3} more" if len(differing) > 3 else ""
        raise ConfigError(
            f"{spec.run_dir} was trained with another configuration ({shown}{more}): pass "
            "another --out, or move that folder away to train it again"
        )


def _check_same_comparison(spec: RunSpec) -> None:
    """Refuse to train or resume a run whose table froze another comparison than the one
    registered now: its verdicts would be decided by a rule changed after runs began."""
    frozen = frozen_comparison(spec)
    if frozen is None:
        return
    now = spec.registered.to_json()["fingerprint"]
    if frozen.get("fingerprint") == now:
        return
    if spec.comparison is not None:  # a request's own comparison (``highway ab``)
        raise ConfigError(
            f"{spec.run_dir} froze the comparison {frozen.get('fingerprint')} before it "
            f"trained; this request's is {now} (other rows, baseline or metric): give the "
            "rows it was trained with, or pass another --out"
        )
    raise ConfigError(
        f"{spec.run_dir} froze the comparison {frozen.get('fingerprint')} of "
        f"{spec.experiment.table} before it trained; the registry now registers {now}: "
        "finish and report those runs with the code that registered it, or pass another --out"
    )


def check_existing(spec: RunSpec) -> None:
    """A finished or interrupted run folder must hold this request's run, registered under
    the comparison registered now."""
    if spec.finished or spec.interrupted:
        _check_same_overrides(spec)
        _check_same_config(spec)
        _check_same_comparison(spec)


@dataclass(frozen=True)
class RunState:
    """What ``highway run`` would do with a run: ``finished``, ``resume`` or ``start``."""

    kind: str
    words: str  # e.g. "resumes from its checkpoint at step 5,153 of 17,190"
    steps_left: int


def run_state(spec: RunSpec) -> RunState:
    """The run's state, after the same checks ``highway run`` makes before it trains."""
    from ..training.checkpoint import checkpoint_step  # torch: only for a resumable run

    check_existing(spec)
    total = spec.config.train.max_steps
    if spec.finished:
        return RunState("finished", "finished", 0)
    busy = holder(spec.run_dir)
    now = f"; training now: {busy}" if busy else ""
    if spec.interrupted:
        step = checkpoint_step(spec.run_dir / "checkpoint")
        words = f"resumes from its checkpoint at step {step:,} of {total:,}{now}"
        return RunState("resume", words, total - step)
    return RunState("start", f"starts, {total:,} steps{now}", total)


def describe_plan(
    specs: list[RunSpec],
    jobs: int = 1,
    launcher: str = "local",
    probe: int = 0,
    log: Callable[[str], None] = lambda _: None,
) -> list[str]:
    """One line per run (folder and state), then the totals and, for a local run, the time
    they take here at the rates the rows' own runs measured (``jobs`` at once): ``highway run
    --plan``. ``probe``: rows with no rate measured here train that many steps to get one
    (:mod:`.probe`; ``log`` says which)."""
    states = [run_state(spec) for spec in specs]
    lines = [
        f"{spec.experiment.name} seed {spec.seed} ({spec.run_dir}): {state.words}"
        for spec, state in zip(specs, states, strict=True)
    ]
    count = {kind: sum(s.kind == kind for s in states) for kind in ("finished", "resume", "start")}
    left = sum(s.steps_left for s in states)
    lines.append(
        f"{count['finished']} finished, {count['resume']} to resume, {count['start']} to start: "
        f"{left:,} steps to train"
    )
    if launcher != "local":
        return [*lines, f"submitted with --launcher {launcher}: no time estimate from here"]
    return [*lines, _estimate(specs, states, jobs, probe, log)]


def launch_order(specs: list[RunSpec]) -> list[RunSpec]:
    """The runs left to train, in the order the runner starts them: interrupted runs first
    (a table part-way through completes before new rows start), then the rest seed by seed."""
    todo = [spec for spec in specs if not spec.finished]
    return sorted(todo, key=lambda spec: not spec.interrupted)  # stable: plan order kept


def _estimate(
    specs: list[RunSpec],
    states: list[RunState],
    jobs: int,
    probe: int = 0,
    log: Callable[[str], None] = lambda _: None,
) -> str:
    """:func:`estimate.estimate_line` for a local run of ``specs`` with ``jobs`` at once
    (each with :func:`threads_per_job` threads when several train at once, as the runner
    launches them); rows with steps left and no rate measured here are probed for ``probe``
    steps."""
    import torch

    first = specs[0].config.train
    threads = first.threads or (threads_per_job(jobs) if jobs > 1 else torch.get_num_threads())
    here = estimate.machine_here(first.device, first.precision, threads, first.compile)
    rows: dict[str, list[Path]] = {}
    for spec in specs:
        rows.setdefault(spec.experiment.name, []).append(spec.run_dir)
    rates = {row: estimate.seconds_per_step(dirs, here) for row, dirs in rows.items()}
    left = {id(spec): state.steps_left for spec, state in zip(specs, states, strict=True)}
    runs = [(spec.experiment.name, left[id(spec)]) for spec in launch_order(specs)]
    unmeasured = {row for row, steps in runs if steps and not rates[row]}
    earlier = _cached_rows(specs, unmeasured, here)
    rates.update(earlier)
    probed = _probe_rows(specs, unmeasured - set(earlier), probe, threads, here, log)
    rates.update(probed)
    return estimate.estimate_line(
        runs, rates, jobs, threads, probed=(probe, sorted(probed)), earlier=sorted(earlier)
    )


def _first_configs(specs: list[RunSpec], rows: set[str]) -> dict[str, Config]:
    """Each of ``rows``' first seed's config (the one a probe trains)."""
    first: dict[str, Config] = {}
    for spec in specs:
        if spec.experiment.name in rows:
            first.setdefault(spec.experiment.name, spec.config)
    return first


def _cached_rows(specs: list[RunSpec], rows: set[str], here: dict[str, Any]) -> dict[str, float]:
    """The rates an earlier probe of ``rows`` on this kind of machine left in the per-user
    cache (whatever ``--out`` it planned)."""
    from ..training.rates import cached_rate

    found = {row: cached_rate(config, here) for row, config in _first_configs(specs, rows).items()}
    return {row: rate for row, rate in found.items() if rate is not None}


def _probe_rows(
    specs: list[RunSpec],
    rows: set[str],
    steps: int,
    threads: int,
    here: dict[str, Any],
    log: Callable[[str], None],
) -> dict[str, float]:
    """Seconds per step of each of ``rows`` (its first seed's config) from a probe of
    ``steps`` steps here, kept in the per-user cache for later plans; rows too short to
    probe are left out."""
    from ..training.rates import remember_rate
    from .probe import probe_seconds_per_step

    rates: dict[str, float] = {}
    if not steps:
        return rates
    for row, config in _first_configs(specs, rows).items():
        log(f"{row}: probing {steps} steps here")
        rate = probe_seconds_per_step(config, steps, threads)
        if rate is not None:
            rates[row] = rate
            remember_rate(config, here, rate, steps)
    return rates


def threads_per_job(jobs: int) -> int:
    """CPU threads each of ``jobs`` rows training at once gets (the cores shared out)."""
    return max(1, (os.cpu_count() or 1) // jobs)
