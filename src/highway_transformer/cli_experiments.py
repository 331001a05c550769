"""``highway experiments | run | report | prune``: the papers' tables as named, resumable runs;
``highway ab``: your own baseline and variants, run and reported the same way.

highway experiments ht-table1
highway run ht-table1 --scale small --seeds 3 --jobs 2 --data-path data/ptb --out runs
highway run ht-table5/l6-xl ht-table5/l6-xl+tanh --scale tiny train.max_steps=50
highway report runs/ht-table1/small --out reports/ht-table1-small
highway prune runs/ht-table1/small          # finished runs' weights, once nothing needs them
highway ab --row "plain=ht-table1/t-l3" --row "tanh=ht-table1/t-l3+tanh" --scale tiny --out runs/ab

``highway demo`` is a named A/B (:mod:`.experiments.named`), run by :func:`run_named_ab`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from .errors import ConfigError
from .experiments.scale import AS_CONFIGURED, SCALES
from .storage.folder import trusting_unverified

if TYPE_CHECKING:
    from .experiments.named import NamedAB


def _log(message: str) -> None:
    print(message, file=sys.stderr)


def _published(figures: dict[str, float]) -> str:
    parts = []
    for key, value in figures.items():
        if key == "train_hours":
            parts.append(f"{value:g} h")
        else:
            split, metric = key.split("_", 1)
            parts.append(f"{split} {metric} {value:g}")
    return ", ".join(parts)


def _experiments(args: argparse.Namespace) -> int:
    from .experiments.registry import TABLES, table_experiments

    tables = [args.table] if args.table else list(TABLES)
    for table in tables:
        rows = table_experiments(table)
        print(f"{table}: {TABLES[table][0]}")
        width = max(len(e.name) for e in rows)
        for e in rows:
            note = " (baseline)" if e.is_baseline else ""
            trained = ""
            if e.preset != e.name:
                matched = f", d_inner matched to {e.match_params_of}" if e.match_params_of else ""
                trained = f"  [trained as {e.preset}{matched}]"
            print(f"  {e.name:<{width}}  {_published(e.published)}{note}{trained}")
    return 0


def split_targets(items: list[str]) -> tuple[list[str], list[str]]:
    """Positional arguments -> (tables / row names, ``key=value`` overrides)."""
    names = [item for item in items if "=" not in item]
    overrides = [item for item in items if "=" in item]
    if not names:
        raise ConfigError("name a table (e.g. ht-table1) or rows to run; see `highway experiments`")
    return names, overrides


def _run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scale", default="small", help=" | ".join(SCALES) + " (default small)")
    parser.add_argument("--seeds", type=int, default=1, help="seeds per row (default 1)")
    parser.add_argument("--out", default="runs", help="root folder (default runs)")
    _launch_options(parser)


def _allow_mixed_code_option(parser: argparse.ArgumentParser) -> None:
    """``--allow-mixed-code`` of ``highway report`` and ``highway ab``."""
    parser.add_argument(
        "--allow-mixed-code",
        action="store_true",
        help="write the report although its runs did not all record one version of the code "
        "(the report says so at its top)",
    )


def _launch_options(parser: argparse.ArgumentParser) -> None:
    """The options ``highway run`` and ``highway ab`` share: where and how runs train."""
    parser.add_argument("--jobs", type=int, default=1, help="runs trained at once (default 1)")
    parser.add_argument(
        "--device",
        help="where every row trains (train.device): auto | cpu | cuda | cuda:N | mps; with "
        "--jobs N on a GPU the N runs share it, their memory estimated and checked against "
        "its free memory before any starts",
    )
    parser.add_argument(
        "--data-path", "--data-dir", dest="data_path", help="where the corpus lives (data.path)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--plan",
        action="store_true",
        help="say what each run would do (finished, resumes at step S, starts); train nothing",
    )
    parser.add_argument(
        "--probe",
        type=int,
        default=0,
        metavar="N",
        help="with --plan: rows with no rate measured on this kind of machine train N steps "
        "here (after 2 unmeasured ones, in a temporary folder) to price the plan",
    )
    parser.add_argument(
        "--launcher",
        default="local",
        help="local (default) | slurm (one job a row, via submitit) | submitit-local",
    )
    parser.add_argument("--nproc", type=int, help="submitted jobs: processes (GPUs) per row")
    parser.add_argument(
        "--max-restarts",
        type=int,
        metavar="M",
        help="submitted jobs with --nproc: start a row's processes again from its last "
        "checkpoint when one fails, up to M times",
    )
    parser.add_argument(
        "--trust-unverified",
        action="store_true",
        help="runs that resume may read a checkpoint folder without manifest.json (its files "
        "cannot be checked: only for folders you trust)",
    )
    parser.add_argument("--time", type=int, help="submitted jobs: time limit, minutes")
    parser.add_argument("--partition", help="submitted jobs: the Slurm partition")


class _QuietParser(argparse.ArgumentParser):
    """Raises ConfigError instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"highway run: {message}")


def parse_run_targets(args: argparse.Namespace) -> argparse.Namespace:
    """Read options given among or after the positional targets (``ht-table1 --scale tiny
    train.lr=1``), which the sub-command parser leaves in ``args.targets``."""
    parser = _QuietParser(prog="highway run", add_help=False)
    _run_options(parser)
    parser.add_argument("targets", nargs="*")
    parser.set_defaults(**{k: v for k, v in vars(args).items() if k != "targets"})
    return parser.parse_intermixed_args(args.targets)


def with_device(device: str | None, overrides: list[str]) -> list[str]:
    """``overrides`` with ``train.device=DEVICE`` for ``--device DEVICE`` (every row's)."""
    if device is None:
        return overrides
    from .config.names import check_device_name

    check_device_name(device, "--device")
    if any(o.split("=", 1)[0].strip() == "train.device" for o in overrides):
        raise ConfigError("give the device once: --device or train.device=, not both")
    return [*overrides, f"train.device={device}"]


def check_probe(args: argparse.Namespace) -> None:
    """``--probe N`` prices a local ``--plan``: anything else is an error, not ignored."""
    if not args.probe:
        return
    if args.probe < 0:
        raise ConfigError(f"--probe takes a number of steps of at least 1, not {args.probe}")
    if not args.plan:
        raise ConfigError("--probe prices a plan: give it with --plan (it trains nothing else)")
    if args.launcher != "local":
        raise ConfigError(
            f"--probe measures this machine: submitted runs (--launcher {args.launcher}) "
            "train elsewhere; drop --probe or --launcher"
        )


def _plan_lines(specs: list[Any], args: argparse.Namespace) -> list[str]:
    """``--plan``: each run's state and the time estimate; with ``--jobs N`` on a GPU, the
    memory check the runs would pass before they start."""
    from .experiments.plan import describe_plan, launch_order
    from .experiments.runner import check_packed, check_trust

    check_trust(specs, args.trust_unverified)
    lines = describe_plan(specs, args.jobs, args.launcher, args.probe, _log)
    if args.launcher == "local":
        lines += check_packed(launch_order(specs), args.jobs)
    return lines


def _run(args: argparse.Namespace) -> int:
    args = parse_run_targets(args)
    with trusting_unverified(args.trust_unverified):  # --plan reads the checkpoints too
        return _run_targets(args)


def _run_targets(args: argparse.Namespace) -> int:
    from .experiments.plan import plan_runs
    from .experiments.runner import JobSettings, run_planned

    check_probe(args)
    names, overrides = split_targets(args.targets)
    overrides = with_device(args.device, overrides)
    specs = plan_runs(names, args.out, args.scale, args.seeds, args.data_path, overrides)
    if args.plan:
        print("\n".join(_plan_lines(specs, args)))
        return 0
    _log_scale_changes(specs, args, overrides)
    run_dirs = run_planned(
        specs,
        args.out,
        jobs=args.jobs,
        log=_log,
        progress=not args.no_progress and args.jobs == 1,
        launcher=args.launcher,
        job=_job_settings(args, JobSettings),
        trust_unverified=args.trust_unverified,
    )
    for run_dir in run_dirs:
        print(run_dir)
    folders = sorted({str(d.parent.parent) for d in run_dirs})
    print(f"write the report with: highway report {' '.join(folders)} --out REPORT_DIR")
    return 0


def _log_scale_changes(specs: list, args: argparse.Namespace, overrides: list[str]) -> None:
    """What ``--scale`` changes in each row, a line a row (as ``highway train`` says it)."""
    from .experiments.plan import scale_change_lines

    for line in scale_change_lines(specs, args.data_path, overrides):
        _log(line)


def _job_settings(args: argparse.Namespace, settings: Any) -> Any:
    """The submitted jobs' settings given (``--nproc``, ``--max-restarts``, ``--time``,
    ``--partition``), or None."""
    given = {
        "nproc": args.nproc,
        "max_restarts": args.max_restarts,
        "timeout_min": args.time,
        "partition": args.partition,
    }
    given = {k: v for k, v in given.items() if v is not None}
    return settings(**given) if given else None


def _ab(args: argparse.Namespace) -> int:
    with trusting_unverified(args.trust_unverified):  # --plan reads the checkpoints too
        return _ab_rows(args)


def _ab_rows(args: argparse.Namespace) -> int:
    from .experiments.ab import AB_TABLE, SameConfiguration, plan_ab, quote_row_hint
    from .experiments.runner import JobSettings, run_planned

    check_probe(args)
    overrides = with_device(args.device, list(args.overrides))
    try:
        plan = plan_ab(args.row, args.out, args.scale, args.seeds, args.data_path, overrides)
    except SameConfiguration as error:  # the user's own overrides, not --device's
        raise ConfigError(f"{error}{quote_row_hint(error.row, args.overrides)}") from None
    if args.plan:
        print("\n".join(_plan_lines(plan.specs, args)))
        return 0
    _log_scale_changes(plan.specs, args, overrides)
    if args.seeds == 1:
        from .report.ab_summary import ONE_SEED

        print(ONE_SEED)
    run_dirs = run_planned(
        plan.specs,
        args.out,
        jobs=args.jobs,
        log=_log,
        progress=not args.no_progress and args.jobs == 1,
        launcher=args.launcher,
        job=_job_settings(args, JobSettings),
        trust_unverified=args.trust_unverified,
    )
    runs = Path(args.out) / AB_TABLE / args.scale
    if args.no_report:
        print(f"write the report with: highway report {runs} --out REPORT_DIR --baselines")
        return 0
    from .report.ab_summary import summary_lines

    out = Path(args.out) / "report" / args.scale
    report = write_ab_report(run_dirs, out, args.allow_mixed_code)
    print("\n".join(summary_lines(report)))
    print(f"report: {out / 'index.md'} (runs: {runs})")
    return 0


def write_ab_report(run_dirs: list[Path], out: Path, allow_mixed_code: bool) -> dict[str, Any]:
    """An A/B's report (with the lines to beat) into ``out``, the unusable runs named first."""
    from .report.report import write_report

    report = write_report(run_dirs, out, baselines=True, allow_mixed_code=allow_mixed_code)
    _warn_unusable(report)
    return report


def run_named_ab(
    named: NamedAB,
    out: str | Path,
    steps: int | None = None,
    seeds: int | None = None,
    jobs: int | None = None,
    progress: bool = True,
    log: Callable[[str], None] = _log,
    allow_mixed_code: bool = False,
    tiny: bool = False,
) -> dict[str, Any]:
    """Train the named A/B's runs not trained yet (``jobs`` at once, default
    :func:`~.experiments.named.default_jobs`; interrupted ones resume), write its report to
    ``out/report`` and its front page ``out/report.md``; return ``out/NAME.json``."""
    from .api import sample_text
    from .experiments.named import default_jobs, plan_named
    from .experiments.runner import run_planned
    from .extras import import_extra
    from .report.ab_summary import write_ab_page

    import_extra("matplotlib", f"the {named.name}'s figure")  # fail before minutes of training
    if jobs is not None and jobs < 1:
        raise ConfigError(f"--jobs must be >= 1, got {jobs}")
    out, steps = Path(out), named.steps if steps is None else steps
    plan = plan_named(named, out, steps, named.seeds if seeds is None else seeds, tiny)
    jobs = default_jobs(len(plan.specs)) if jobs is None else jobs
    progress = progress and jobs == 1  # runs trained at once log to their train.log
    run_dirs = run_planned(plan.specs, out, jobs=jobs, log=log, progress=progress)
    report = write_ab_report(run_dirs, out / "report", allow_mixed_code)
    runs = out / plan.experiments[0].table / AS_CONFIGURED
    seed = f"seed{named.sample_seed}"
    samples = {row: sample_text(runs / row / seed, named.prompt) for row in named.rows}
    return write_ab_page(out, report, named, steps, samples, tiny)


def _warn_unusable(report: dict[str, Any]) -> None:
    """Say first which runs no number of the report reads (NaN, a damaged file)."""
    for run in report["unusable"]:
        _log(
            f"warning: {run['name']} seed {run['seed']} is not usable, left out of every "
            f"number: {run['reason']}"
        )


def _report(args: argparse.Namespace) -> int:
    from .report.runs import find_run_dirs

    if args.data_path and not args.baselines:
        raise ConfigError("--data-path is where --baselines reads the data; pass --baselines too")
    find_run_dirs(args.run_dirs)  # a mistyped folder answers before torch is imported
    from .report.report import write_report

    report = write_report(
        args.run_dirs,
        args.out,
        baselines=args.baselines,
        data_path=args.data_path,
        allow_mixed_code=args.allow_mixed_code,
    )
    _warn_unusable(report)
    print(f"report written to {Path(args.out) / 'index.md'} ({len(report['runs'])} runs)")
    if report["missing"]:
        print(f"{len(report['missing'])} missing or incomplete item(s), listed in index.md")
    return 0


def _prune(args: argparse.Namespace) -> int:
    from .experiments.prune import prune
    from .report.runs import find_run_dirs

    prune(find_run_dirs(args.run_dirs), dry_run=args.dry_run)
    return 0


def add_commands(subparsers: Any) -> None:
    """Add ``experiments``, ``run``, ``report`` and ``prune`` to the ``highway`` sub-command
    parsers."""
    p = subparsers.add_parser("experiments", help="list the papers' table rows and figures")
    p.add_argument("table", nargs="?", help="only this table (e.g. ht-table5)")
    p.set_defaults(func=_experiments)

    p = subparsers.add_parser("run", help="train table rows (resumable) at a scale")
    _run_options(p)
    p.add_argument(
        "targets",
        nargs=argparse.REMAINDER,
        metavar="TABLE_OR_NAME... [KEY=VALUE...]",
        help="tables (ht-table1), rows (ht-table1/t-l3+tanh) and config overrides; options "
        "may follow them",
    )
    p.set_defaults(func=_run)

    p = subparsers.add_parser(
        "ab",
        help="your own A/B: a baseline and variants over seeds, paired, pre-registered, reported",
        description="Train a baseline and variants (the first --row is the baseline) over the "
        "same seeds and data order, freeze the comparison (each variant minus the baseline: "
        "the task's metric on the whole validation split at the last checkpoint, paired by "
        "seed, 95% t-interval) into every run before it trains, then write the report and "
        "print each variant's verdict. Rerunning the command resumes it.",
    )
    p.add_argument(
        "--row",
        action="append",
        default=[],
        metavar="NAME=SPEC",
        help="a row: NAME (its folder) = SPEC, a preset or a config file, then the row's "
        'key=value overrides, quoted as one argument ("sigmoid=ht-table1/t-l3 '
        'model.gate.kind=sdu"); the first --row is the baseline',
    )
    p.add_argument(
        "--scale",
        default=AS_CONFIGURED,
        help=f"{AS_CONFIGURED} (default: each row as configured) | " + " | ".join(SCALES),
    )
    p.add_argument("--seeds", type=int, default=3, help="seeds per row (default 3)")
    p.add_argument("--out", default="runs/ab", help="root folder (default runs/ab)")
    _launch_options(p)
    p.add_argument("--no-report", action="store_true", help="train only; write no report")
    _allow_mixed_code_option(p)
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="overrides for every row (before each row's own), e.g. data.corpus=file",
    )
    p.set_defaults(func=_ab)

    p = subparsers.add_parser("report", help="figures and tables from run folders")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run folders or their roots")
    p.add_argument("--out", default="report", help="report folder (default report)")
    p.add_argument(
        "--baselines",
        action="store_true",
        help="add the lines to beat: trivial models of the runs' data (loads the data as the "
        "runs did, downloading it where they did)",
    )
    p.add_argument(
        "--data-path", "--data-dir", dest="data_path",
        help="with --baselines: where the runs' data lives now",
    )  # fmt: skip
    _allow_mixed_code_option(p)
    p.set_defaults(func=_report)

    p = subparsers.add_parser(
        "prune", help="drop the weights of finished runs that no longer need them"
    )
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run folders or their roots")
    p.add_argument("--dry-run", action="store_true", help="say what would go; remove nothing")
    p.set_defaults(func=_prune)
