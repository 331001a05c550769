"""``highway compare RUN_DIRS... --out DIR``: convergence figure and table for any run folders.

Works on every folder ``highway train`` writes (``config.yaml``, ``metrics.jsonl``,
``results.json``), so the demo's runs and a user's own variants compare the same way, and
says what such a comparison can and cannot conclude:

* each row is **one run, one seed**: a difference between rows is not tested against
  seed-to-seed variation (``highway ab`` trains seeds and gives intervals);
* a difference smaller than the evaluation's own noise — 1.96 standard errors of the two
  scores, each from the per-token (per-step, per-example) loss variance over what it scored,
  a lower bound on the noise — is a **tie**, never a "steps to target" or a winner;
* every score names its split and how many tokens (steps, examples) it scored;
* the trivial baselines each run recorded at the end of training are listed, and drawn over
  the curves only where the periodic validation scored the same tokens as they did; a run
  that did not learn beyond them is named first, and every comparison with it is withheld
  (:func:`~highway_transformer.tasks.floor.withheld_reason`, as ``highway ab`` and
  ``highway report`` withhold their verdicts).

The first run (or ``baseline``) sets the target: its best periodic validation loss, drawn on
the figure; the table gives the step each run first reached it. A view, as the report is: the
folders are read by the one reader (:func:`~.runs.load_compared`), the numbers computed by
:mod:`.stats`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.levels import bits_label
from ..errors import DataError
from ..experiments.ab import DATA_KEYS
from .convergence import curve, steps_to_reach
from .runs import RunRecord, load_compared, run_labels
from .stats import best_periodic, count_name, difference, learned_check, scored_count

LN2 = math.log(2)

__all__ = ["compare_runs", "difference", "load_compared", "run_labels"]


@dataclass(frozen=True)
class Unit:
    """How losses are shown: ``value = loss * scale`` in ``label``."""

    scale: float
    label: str


def _results(run: RunRecord) -> dict[str, Any]:
    """``results.json``; ``{}`` for a run that has not finished (it is compared all the same)."""
    return run.results or {}


def check_comparable(runs: list[RunRecord]) -> None:
    """Refuse runs of different tasks or data: their losses are not on one scale."""
    first = runs[0].flat
    for run in runs[1:]:
        mine = run.flat
        differ = [k for k in DATA_KEYS if mine.get(k) != first.get(k)]
        if differ:
            key = differ[0]
            raise DataError(
                f"{run.run_dir} and {runs[0].run_dir} were trained on different tasks or data "
                f"({key}={mine.get(key)!r} vs {first.get(key)!r}); compare runs "
                "of one task on the same data"
            )


def loss_unit(run: RunRecord) -> Unit:
    """Bits per token (named by level) for a language model; the task's loss otherwise."""
    if run.task == "lm":
        return Unit(1 / LN2, bits_label(run.level))
    return Unit(1.0, f"{run.task} loss")


def compare_runs(
    run_dirs: list[str | Path],
    out: str | Path,
    baseline: str | None = None,
    title: str = "",
    samples: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Write ``compare.md``, ``compare.json`` and ``convergence.png`` into ``out``; ``samples``
    (each run's text from its best weights): a last section of the page."""
    dirs = [Path(d) for d in run_dirs]
    labels = run_labels(dirs)
    if len(set(dirs)) != len(dirs):
        raise DataError("a run folder is named twice; give each run once")
    if baseline is not None and baseline not in labels:
        raise DataError(f"--baseline {baseline!r} is not one of the runs: {', '.join(labels)}")
    runs = [load_compared(d, label) for label, d in zip(labels, dirs, strict=True)]
    check_comparable(runs)
    base = next(r for r in runs if r.label == (baseline or labels[0]))
    unit = loss_unit(base)
    target, target_se = best_periodic(base.records)
    rows = [_row(run, base, target, target_se, unit) for run in runs]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    trivial = (_results(base).get("learned") or {}).get("baselines", {})
    periodic, whole = rows_count(rows, base.label)
    # the trivial models scored the final validation's tokens: drawn over the periodic curves
    # only where those scored the same ones
    same_tokens = periodic is None or whole is None or periodic == whole
    drawn = trivial if same_tokens else {}
    counted = count_name(_results(base).get("valid"))
    on = "valid split" if whole is None else f"valid split, {whole:,} {counted}"
    curves_on = "periodic" if periodic is None else f"periodic, {periodic:,} {counted}"
    plot = plot_convergence(out, runs, target, base.label, drawn, unit, on, curves_on)
    summary = {
        "baseline": base.label,
        "target_valid_loss": target,
        "target_valid_loss_se": target_se,
        "unit": unit.label,
        "scale": unit.scale,
        "max_eval_tokens": base.flat.get("data.max_eval_tokens"),
        "counts": count_name(_results(base).get("valid")),
        "trivial_baselines": trivial,
        "trivial_drawn": same_tokens,
        "rows": rows,
        "plot": str(plot),
    }
    page = markdown_table(summary, title or "Comparison")
    if samples:
        from .markdown import sample_lines  # the tasks import torch: after the inputs' checks

        summary["samples"] = samples
        how = "Best weights, temperature 0.7, top-k 20, seed 1:"
        page = "\n".join([page.rstrip(), "", *sample_lines(samples, how)])
    write_json(out / "compare.json", summary)
    (out / "compare.md").write_text(page, "utf-8")
    return summary


def rows_count(rows: list[dict[str, Any]], label: str) -> tuple[int | None, int | None]:
    """What the ``label`` row's periodic and final validations scored (None: not recorded)."""
    row = next(r for r in rows if r["run"] == label)
    return row["periodic_valid_count"], row["final_valid_count"]


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def _row(
    run: RunRecord, base: RunRecord, target: float, target_se: float | None, unit: Unit
) -> dict:
    # the tasks import torch: after the inputs' checks
    from ..tasks.floor import learning_hint, plateau_warning, withheld_reason

    valid_curve = curve(run.records, "valid")
    best, best_se = best_periodic(run.records)
    periodic = [scored_count(r) for r in run.records if r.get("split") == "valid"]
    results, learned = _results(run), learned_check(run.results)
    versus_target = difference(best, best_se, target, target_se)
    reached = steps_to_reach(valid_curve, target)
    status = "reached" if reached is not None else "not reached"
    if run is not base and versus_target["tie"]:
        status, reached = "tie", None  # within the evaluation's noise: no step is claimed
    withheld = None
    if run is not base:  # the baseline's row compares with nothing
        checks = [(r.label, learned_check(r.results)) for r in (base, run)]
        withheld = withheld_reason(checks, unit.scale, unit.label)
    if withheld is not None:
        status, reached = "withheld", None  # a run that learned nothing: no step is claimed
    final_valid, base_valid = results.get("valid") or {}, _results(base).get("valid") or {}
    versus_base = None
    if run is not base and "loss" in final_valid and "loss" in base_valid:
        versus_base = difference(
            final_valid["loss"], final_valid.get("loss_se"),
            base_valid["loss"], base_valid.get("loss_se"),
        )  # fmt: skip
    return {
        "run": run.label,
        "parameters": results.get("parameters"),
        "steps": max(s for s, _ in valid_curve),
        "best_periodic_valid_loss": best,
        "best_periodic_valid_se": best_se,
        "periodic_valid_count": max((c for c in periodic if c is not None), default=None),
        "target": status,
        "steps_to_target": reached,
        **{f"final_{s}_loss": (results.get(s) or {}).get("loss") for s in ("valid", "test")},
        **{f"final_{s}_se": (results.get(s) or {}).get("loss_se") for s in ("valid", "test")},
        **{f"final_{s}_count": scored_count(results.get(s)) for s in ("valid", "test")},
        "final_valid_vs_baseline": versus_base,
        "withheld": withheld,
        "learned": learned,
        "warning": plateau_warning(
            learned, run.label, unit.scale, unit.label, learning_hint(run.flat)
        ),
    }


def _fmt(value: Any, spec: str = ".4f") -> str:
    return "–" if value is None else format(value, spec)


def _score(loss: float | None, se: float | None, scale: float) -> str:
    if loss is None:
        return "–"
    return f"{loss * scale:.4f}" + ("" if se is None else f" ± {se * scale:.4f}")


def _versus(found: dict[str, Any] | None, scale: float, withheld: str | None = None) -> str:
    if withheld is not None:
        return withheld
    if found is None:
        return "–"
    shown = f"{found['difference'] * scale:+.4f}"
    if found["tie"] is None:
        return f"{shown} (no standard error recorded)"
    return f"{shown}: tie" if found["tie"] else shown


def _counts(rows: list[dict[str, Any]], key: str) -> str:
    counts = {r[key] for r in rows} - {None}
    if not counts:
        return "an unrecorded number of"
    return " / ".join(f"{c:,}" for c in sorted(counts))


def markdown_table(summary: dict[str, Any], title: str) -> str:
    rows, scale, unit = summary["rows"], summary["scale"], summary["unit"]
    cap, counted = summary.get("max_eval_tokens"), summary.get("counts", "items")
    truncated = f", truncated to their first {cap:,} tokens (data.max_eval_tokens)" if cap else ""
    periodic = f"{_counts(rows, 'periodic_valid_count')} {counted}"
    final = f"{_counts(rows, 'final_valid_count')} {counted}"
    warnings = [r["warning"] for r in rows if r["warning"]]
    lines = [
        f"# {title}",
        "",
        # first: why a comparison below is withheld
        *(f"- {w}" for w in warnings),
        *(
            [
                "",
                "Every comparison with these runs is withheld (`vs baseline`, `steps to target`).",
                "",
            ]
            if warnings
            else []
        ),
        f"Scores in {unit} (± one standard error of the evaluation, from the loss variance "
        f"over the {counted} scored; a lower bound on its noise).",
        "",
        "- **One seed a row.** Each row is a single run: differences between rows are not "
        "tested against seed-to-seed variation, which at small budgets is often larger than "
        "them. `highway ab` trains several seeds and gives intervals.",
        f"- **Target**: the best periodic validation loss of `{summary['baseline']}` "
        f"({_score(summary['target_valid_loss'], summary['target_valid_loss_se'], scale)}), "
        "the dashed line in the figure. A run whose best is within 1.96 standard errors of it "
        "is a *tie*: no steps to target are claimed from noise.",
        f"- **Periodic validation** (the curves, `best periodic`): "
        f"{_counts(rows, 'periodic_valid_count')} {counted} of the validation split.",
        f"- **Final** (`final valid`, `final test`): the validation and test splits"
        f"{truncated}, {_counts(rows, 'final_valid_count')} / "
        f"{_counts(rows, 'final_test_count')} {counted}, scored once with each run's best "
        "weights; "
        "`vs baseline`: final valid minus the baseline's, a *tie* within 1.96 standard errors.",
        "",
        f"| run | params | steps | best periodic valid ({periodic}) | steps to target | "
        f"final valid ({final}) | vs baseline | final test |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        reached = r["target"] if r["steps_to_target"] is None else str(r["steps_to_target"])
        lines.append(
            f"| {r['run']} | {_fmt(r['parameters'], ',')} | {r['steps']} | "
            f"{_score(r['best_periodic_valid_loss'], r['best_periodic_valid_se'], scale)} | "
            f"{reached} | {_score(r['final_valid_loss'], r['final_valid_se'], scale)} | "
            f"{_versus(r['final_valid_vs_baseline'], scale, r.get('withheld'))} | "
            f"{_score(r['final_test_loss'], r['final_test_se'], scale)} |"
        )
    lines += [
        "",
        *trivial_lines(summary, rows),
        f"![convergence]({Path(summary['plot']).name})",
        "",
    ]
    return "\n".join(lines)


def trivial_lines(summary: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """The trivial baselines (the lines to beat), which split they scored, and whether the
    figure draws them (the warnings of runs that did not learn are at the top)."""
    scale, trivial = summary["scale"], summary["trivial_baselines"]
    if not trivial:
        return ["Trivial baselines: not recorded by these runs (trained before the check).", ""]
    shown = ", ".join(f"{name} {loss * scale:.4f}" for name, loss in trivial.items())
    line = f"Trivial baselines (final validation split, as `final valid`): {shown}."
    if not summary.get("trivial_drawn", True):
        line += (
            " Not drawn in the figure: its curves are the periodic validation, which scored "
            "other (fewer) tokens."
        )
    return [line, ""]


def plot_convergence(
    out: Path,
    runs: list[RunRecord],
    target: float,
    baseline: str,
    trivial: dict[str, float],
    unit: Unit,
    trivial_split: str = "valid split",
    curves_on: str = "periodic",
) -> Path:
    """Training and validation loss against steps, with the target and the ``trivial``
    baselines' lines (give none where the curves scored other tokens than they did), each
    legend naming what it scored (``trivial_split``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for run in runs:
        for ax, split in zip(axes, ("train", "valid"), strict=True):
            points = curve(run.records, split)
            if points:
                steps, values = zip(*points, strict=True)
                marker = "o" if split == "valid" else None
                ax.plot(
                    steps, [v * unit.scale for v in values], marker=marker, ms=3, label=run.label
                )
    axes[1].axhline(
        target * unit.scale, color="grey", ls="--", lw=1, label=f"target ({baseline} best)"
    )
    for style, (name, loss) in zip((":", "-.", (0, (1, 3))), trivial.items(), strict=False):
        axes[1].axhline(
            loss * unit.scale, color="black", ls=style, lw=1,
            label=f"{name} model ({trivial_split})",
        )  # fmt: skip
    for ax, name in zip(axes, ("training", f"validation ({curves_on})"), strict=True):
        ax.set_xlabel("step")
        ax.set_ylabel(unit.label)
        ax.set_title(f"{name} loss")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / "convergence.png"
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)
    return path
