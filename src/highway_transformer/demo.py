"""``highway demo``: the paper's central comparison over seeds, small enough for a laptop CPU.

Trains a plain, a σ-SDU and a tanh-SDU 3-layer Transformer on the embedded corpus (CPython's
documentation topics, character level) over ``seeds`` seeds as one ``highway ab``: the
variants are A/B rows whose configs are written to ``OUT/configs/VARIANT/config.yaml``, trained
by the runner of ``highway ab`` (``jobs`` at once, resumable) into
``OUT/ab/none/VARIANT/seed<N>`` (seed ``N`` of every model: the same seed and data order), and
judged by its comparison, frozen into every run before it trains: each gate minus plain, the
validation bpc of the last weights on the whole split, paired by seed, 95% t-interval, the
verdict *better* / *worse* / *no detectable difference*. Writes the A/B's report to
``OUT/report/`` (curves, steps to plain's best, the trivial models' lines to beat, ...) and a
front page, ``OUT/report.md`` (and ``OUT/demo.json``): the verdicts with their intervals, the
value of every seed and a generated sample from each model. No timing: on a shared machine
seconds per step measure the load.

:func:`run_comparison` is the single-seed comparison of any configs that the demo was before
(``benchmarks/curve_xl_variants.py``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import Config, DataConfig, GateConfig, ModelConfig, TrainConfig, save_config
from .errors import ConfigError, DataError
from .experiments.ab import AB_TABLE, AbPlan, AbRow, plan_ab
from .experiments.scale import AS_CONFIGURED
from .extras import import_extra
from .report.ab_summary import MINUS, ONE_SEED, summary_lines
from .report.compare import compare_runs
from .report.markdown import format_difference
from .report.stats import summary
from .report.tables import higher_is_better
from .storage import runfolder
from .training.trainer import train

VARIANTS: dict[str, GateConfig] = {
    "plain": GateConfig(kind="none"),
    "sdu-sigmoid": GateConfig(kind="sdu", activation="sigmoid"),
    "sdu-tanh": GateConfig(kind="sdu", activation="tanh"),
}
#: The demo's budget: training steps per run, and seeds per model.
DEMO_STEPS = 600
DEMO_SEEDS = 3
#: Where the generated samples start, and the seed whose best weights write them.
PROMPT = "The "
SAMPLE_SEED = 1
TITLE = "Demo: plain vs σ-SDU vs tanh-SDU Transformer (embedded corpus, char level)"
#: ``--tiny``: the demo's models narrowed to d 16 on a slice of the corpus, so that the whole
#: command (training, report, samples) runs in seconds: a check that an installation works,
#: whose numbers say nothing about the gates.
TINY: dict[str, Any] = {
    "model.d_model": 16,
    "model.n_heads": 2,
    "model.d_inner": 32,
    "data.seq_len": 32,
    "data.context": 8,
    "data.batch_size": 4,
    "data.eval_batch_size": 4,
    "data.max_train_tokens": 20_000,
    "data.max_eval_tokens": 2_000,
    "train.eval_max_tokens": 1_000,
}
TINY_NOTE = (
    "**Tiny demo** (`--tiny`): d-16 models on 20,000 training characters, a check that the "
    "installation works; its numbers say nothing about the gates."
)


def demo_config(variant: str, steps: int = DEMO_STEPS) -> Config:
    """A 3-layer, d=128 Transformer on the embedded corpus (a scaled-down HT Table 1).

    Trained so that the plain model learns from the first steps: PyTorch's default
    initialisation (embeddings N(0, 1), so token identity is not drowned by the unit-size
    sinusoidal positions as with U(-0.1, 0.1)) and AdamW with warm-up. The paper's U(-0.1,
    0.1) with Adam keeps the plain model on the unigram plateau (~4.8 bpc) for most of a
    short budget, and a comparison would then measure leaving the plateau, not the gate.
    """
    return Config(
        name=f"demo-{variant}",
        source="scaled-down HT Table 1 (3-layer Transformer, char level) on the embedded corpus",
        model=ModelConfig(
            d_model=128,
            n_layers=3,
            n_heads=4,
            d_inner=512,
            dropout=0.1,
            init="torch",
            tie_weights=False,
            gate=VARIANTS[variant],
        ),
        data=DataConfig(corpus="pydoc", batch_size=16, seq_len=128, context=32, eval_batch_size=32),
        train=TrainConfig(
            optimizer="adamw",
            lr=3e-3,
            weight_decay=0.01,
            schedule="cosine",
            warmup_steps=40,
            clip=0.5,
            max_steps=steps,
            eval_interval=max(steps // 10, 1),
            eval_max_tokens=8000,
            log_interval=10,
            seed=1111,
        ),
    )


def default_jobs(runs: int) -> int:
    """Runs trained at once when ``--jobs`` is not given: one a CPU core (each on one thread,
    as the runner launches them), at most ``runs``."""
    return max(1, min(os.cpu_count() or 1, runs))


def demo_rows(out: Path, steps: int = DEMO_STEPS, tiny: bool = False) -> list[AbRow]:
    """Each variant as an A/B row of its config file, ``out/configs/VARIANT/config.yaml``
    (written here; a folder that holds the demo with another configuration is an error);
    ``tiny``: the configs shrunk by :data:`TINY`."""
    configs = {variant: demo_config(variant, steps) for variant in VARIANTS}
    if tiny:
        configs = {variant: config.replace(**TINY) for variant, config in configs.items()}
    for variant, config in configs.items():
        check_same_config(out / "configs" / variant, config, f"{out} holds the demo")
    rows = []
    for variant, config in configs.items():
        folder = out / "configs" / variant
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / runfolder.CONFIG_FILE
        save_config(config, path)
        rows.append(AbRow(variant, "", str(path), (), str(path)))
    return rows


def plan_demo(
    out: str | Path, steps: int = DEMO_STEPS, seeds: int = DEMO_SEEDS, tiny: bool = False
) -> AbPlan:
    """The demo as an A/B (plain the baseline): every (variant, seed) run and the comparison
    its ``experiment.json`` freezes (nothing is written before the budget is checked)."""
    for name, value in (("seeds", seeds), ("steps", steps)):
        if value < 1:
            raise ConfigError(f"--{name} must be >= 1, got {value}")
    return plan_ab(demo_rows(Path(out), steps, tiny), out, AS_CONFIGURED, seeds)


def run_demo(
    out: str | Path,
    steps: int = DEMO_STEPS,
    seeds: int = DEMO_SEEDS,
    jobs: int | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
    allow_mixed_code: bool = False,
    tiny: bool = False,
) -> dict[str, Any]:
    """Train the demo's runs not trained yet (``jobs`` at once, default
    :func:`default_jobs`; interrupted ones resume), write the A/B's report to ``out/report``
    and the front page ``out/report.md``; return ``out/demo.json``. ``tiny``: the models of
    :data:`TINY`, to check an installation in seconds."""
    from .experiments.runner import run_planned
    from .report.report import write_report

    import_extra("matplotlib", "the demo's figure")  # fail before minutes of training
    if jobs is not None and jobs < 1:
        raise ConfigError(f"--jobs must be >= 1, got {jobs}")
    out = Path(out)
    plan = plan_demo(out, steps, seeds, tiny)
    jobs = default_jobs(len(plan.specs)) if jobs is None else jobs
    progress = progress and jobs == 1  # runs trained at once log to their train.log
    run_dirs = run_planned(plan.specs, out, jobs=jobs, log=log, progress=progress)
    report = write_report(
        run_dirs, out / "report", baselines=True, allow_mixed_code=allow_mixed_code
    )
    runs = out / AB_TABLE / AS_CONFIGURED
    samples = {v: sample(runs / v / f"seed{SAMPLE_SEED}", PROMPT) for v in VARIANTS}
    return write_demo_summary(out, report, steps, samples, tiny)


def write_demo_summary(
    out: Path,
    report: dict[str, Any],
    steps: int,
    samples: dict[str, str] | None = None,
    tiny: bool = False,
) -> dict[str, Any]:
    """``out/report.md`` and ``out/demo.json`` from the A/B's ``report`` (``report.json`` of
    ``out/report``): the verdicts and their intervals, each seed's values, the lines to beat,
    the figure and the samples (``tiny``: says first that the models were :data:`TINY`'s)."""
    primary = report["primary"]
    metric = report["metric"]
    verdicts = summary_lines(report)
    digits = 2 if metric == "ppl" else 4
    trivial = trivial_line(report, digits)
    paired = max(((row["paired"] or {"n": 0})["n"] for row in primary["rows"]), default=0)
    figures = report["figures"]["convergence_steps"]
    figure = next((f"report/{f}" for f in figures if f.endswith(".svg")), None)
    lines = [
        f"# {TITLE}",
        "",
        *([TINY_NOTE, ""] if tiny else []),
        f"Each model trains for {steps:,} steps, once per seed; seed N trains every model with "
        "the same seed and data order. The runs are `highway ab` rows "
        "(`configs/VARIANT/config.yaml`, plain the baseline), judged by its comparison, "
        "frozen into every run before it trained: each gate minus plain, paired by seed, with "
        "the 95% Student-t interval of the mean difference. *better* / *worse*: the interval "
        "excludes 0; *no detectable difference*: it does not, the difference is inside the "
        "seed-to-seed noise at this budget.",
        "",
        "## Verdicts",
        "",
        *[f"- {line}" for line in verdicts],
        *([f"- {trivial}"] if trivial else []),
        "",
    ]
    if paired < 2:
        lines += [ONE_SEED, ""]
    if primary["comparison"] is not None:
        lines += [
            f"Rule ({primary['status']}, fingerprint `{primary['comparison']['fingerprint']}`): "
            f"{primary['rule']}.",
            "",
            *seed_table(primary, digits),
            "",
        ]
    lines += [
        "## The rest of the report",
        "",
        "[report/index.md](report/index.md): test scores, the steps each model needed to reach "
        "plain's best validation loss, the trivial models' scores, the gates' biases. The "
        "figure draws each model's mean over its seeds (the table above is their spread).",
        "",
        *([f"![convergence, mean over seeds]({figure})", ""] if figure else []),
    ]
    if samples:
        lines += [
            "## Samples",
            "",
            f"Seed {SAMPLE_SEED}'s best weights, temperature 0.7, top-k 20, sampling seed 1:",
            "",
        ]
        for variant, text in samples.items():
            lines += [f"**{variant}**", "", "```text", text.strip("\n"), "```", ""]
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
    summary_json = {
        "title": TITLE,
        "steps": steps,
        "tiny": tiny,
        "metric": metric,
        "summary": verdicts + ([trivial] if trivial else []),
        "primary": primary,
        "baselines": report.get("baselines"),
        "samples": samples or {},
        "report": "report/index.md",
        "plot": None if figure is None else str(out / figure),
    }
    (out / "demo.json").write_text(
        json.dumps(summary_json, indent=2, ensure_ascii=False), encoding="utf-8"
    )
    return summary_json


def model_values(primary: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Each model's value a seed (``{"plain": {"1": 2.81, ...}, ...}``), the baseline first,
    from the registered comparison's rows."""
    values: dict[str, dict[str, float | None]] = {}
    for row in primary["rows"]:
        values.setdefault(_name(row["against"]), row["against_per_seed"])
        values.setdefault(_name(row["row"]), row["row_per_seed"])
    return values


def seed_table(primary: dict[str, Any], digits: int = 4) -> list[str]:
    """Every model's value a seed and each variant minus the baseline (per seed, then its
    mean and 95% t-interval): a markdown table of the registered comparison's rows."""
    rows = primary["rows"]
    values = model_values(primary)
    if not rows:
        return []
    seeds = sorted({int(s) for per_seed in values.values() for s in per_seed})
    diffs = [f"{_name(r['row'])} {MINUS} {_name(r['against'])}" for r in rows]
    lines = [
        "| seed | " + " | ".join([*values, *diffs]) + " |",
        "| ---: " + "| ---: " * (len(values) + len(diffs)) + "|",
    ]
    for seed in seeds:
        cells = [_fmt(per_seed.get(str(seed)), digits) for per_seed in values.values()]
        for row in rows:
            paired = row["paired"] or {"per_seed": {}}
            d = paired["per_seed"].get(str(seed))
            cells.append("—" if d is None else _signed(f"{d:+.{digits}f}"))
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    means = [_fmt(_mean(per_seed), digits) for per_seed in values.values()]
    for row in rows:
        means.append(_signed(format_difference(row["paired"], digits, verdict=False)))
    lines.append("| mean [95% t-interval] | " + " | ".join(means) + " |")
    return lines


def trivial_line(report: dict[str, Any], digits: int = 4) -> str | None:
    """Which models' means beat the best trivial model of the registered split (the lines to
    beat: has a model learned more than a trigram holds?); None where none was computed."""
    primary, metric = report["primary"], report["metric"]
    models = (report.get("baselines") or {}).get("models")
    if not models or primary["comparison"] is None:
        return None
    split = primary["comparison"]["split"]
    found = {m: by.get(split, {}).get(metric) for m, by in models.items()}
    found = {m: float(v) for m, v in found.items() if v is not None}
    means = {name: _mean(per_seed) for name, per_seed in model_values(primary).items()}
    means = {name: m for name, m in means.items() if m is not None}
    if not found or not means:
        return None
    up = higher_is_better(metric)
    best = (max if up else min)(found, key=lambda m: found[m])
    line = f"{best} {found[best]:.{digits}f}"
    beat = [name for name, m in means.items() if (m > found[best] if up else m < found[best])]
    if not beat:
        return (
            f"no model's mean beats the best trivial model ({line}): at this budget none has "
            f"learned more than a {best} model holds"
        )
    rest = [name for name in means if name not in beat]
    return f"mean over seeds beating the best trivial model ({line}): {', '.join(beat)}" + (
        f"; not beating it: {', '.join(rest)}" if rest else ""
    )


def _mean(per_seed: dict[str, float | None]) -> float | None:
    found = summary(per_seed.values())
    return None if found is None else found["mean"]


def _name(row: str) -> str:
    return row.split("/", 1)[-1]


def _signed(text: str) -> str:
    return text.replace("-", MINUS)


def _fmt(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def sample(run_dir: Path, prompt: str, tokens: int = 240) -> str:
    """A continuation of ``prompt`` by the run's best weights (the same seed for every run)."""
    from .api import load_pretrained

    model, _, vocab = load_pretrained(run_dir / runfolder.BEST_DIR)
    try:
        text = model.generate(prompt, tokens, vocab=vocab, temperature=0.7, top_k=20, seed=1)
    except DataError as exc:
        return f"(no sample: {exc})"
    return prompt + text


def check_same_config(run_dir: Path, config: Config, holder: str = "") -> None:
    """Refuse to reuse a run folder trained with another configuration (e.g. more steps);
    ``holder`` names what holds it in the message (default: the folder was trained)."""
    differ = runfolder.config_differences(run_dir, config)
    if differ:
        shown = ", ".join(f"{k}={found!r} (asked {asked!r})" for k, found, asked in differ[:3])
        what = f"{holder} with" if holder else f"{run_dir} was trained with"
        raise ConfigError(
            f"{what} another configuration: {shown}; choose another --out or remove the folder"
        )


# ------------------------------------------------ one seed, any configs (benchmarks)


def run_comparison(
    out: str | Path,
    configs: dict[str, Config],
    progress: bool = True,
    log: Callable[[str], None] = print,
    title: str = "Comparison",
    prompt: str = "The ",
) -> dict[str, Any]:
    """Train each named config into ``out/NAME`` (skipping finished, resuming interrupted
    runs of the same config; a folder trained with another config is an error) and write a
    report whose baseline is the first entry, with a generated sample from each model."""
    out = Path(out)
    for variant, config in configs.items():
        check_same_config(out / variant, config)
    for variant, config in configs.items():
        run_dir = out / variant
        if runfolder.is_finished(run_dir):
            log(f"{variant}: already trained, skipped")
            continue
        log(f"training {variant} ({config.train.max_steps} steps)")
        resume = runfolder.has_checkpoint(run_dir)
        train(config, run_dir, resume=resume, overwrite=not resume, progress=progress, log=log)
    samples = {variant: sample(out / variant, prompt) for variant in configs}
    return write_demo_report(out, list(configs), title, samples)


def write_demo_report(
    out: Path,
    variants: list[str],
    title: str = "Comparison",
    samples: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``report.md`` / ``report.json`` / ``convergence.png``: the ``highway compare`` table
    and figure of the runs ``out/VARIANT`` (baseline: the first), then the samples."""
    summary = compare_runs([out / v for v in variants], out, title=title)
    lines = [(out / "compare.md").read_text(encoding="utf-8").rstrip(), ""]
    if samples:
        lines += ["## Samples", "", "Best weights, temperature 0.7, top-k 20, seed 1:", ""]
        for variant, text in samples.items():
            lines += [f"**{variant}**", "", "```text", text.strip("\n"), "```", ""]
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
    summary["samples"] = samples or {}
    (out / "report.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    for name in ("compare.md", "compare.json"):  # the demo's report replaces them
        (out / name).unlink()
    return summary
