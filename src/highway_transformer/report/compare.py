"""``highway compare RUN_DIRS... --out DIR``: convergence figure and table for any run folders.

Works on every folder ``highway train`` writes (``metrics.jsonl``, ``results.json``), so the
demo's runs and a user's own variants compare the same way. The first run (or
``baseline``) sets the target: its best periodic validation loss, drawn on the figure; the
table gives the step each run first reached it. The curve and the "best periodic" column
come from the same periodic validation evaluations (their size is stated); the final columns
are the full splits, evaluated once with each run's best weights.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..storage.runfolder import read_metrics
from .convergence import best_value, curve, steps_to_reach

LN2 = math.log(2)


def run_labels(run_dirs: list[Path]) -> list[str]:
    """Folder names, or paths where two runs share a name."""
    names = [d.name for d in run_dirs]
    return names if len(set(names)) == len(names) else [str(d) for d in run_dirs]


def load_run(run_dir: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``(metric records, results)`` of one training run folder."""
    records = read_metrics(run_dir)
    if not curve(records, "valid"):
        raise DataError(
            f"{run_dir} has no validation records in metrics.jsonl; give folders written by "
            "`highway train` (or the demo) that reached at least one evaluation"
        )
    results_path = run_dir / "results.json"
    results = json.loads(results_path.read_text("utf-8")) if results_path.is_file() else {}
    return records, results


def compare_runs(
    run_dirs: list[str | Path], out: str | Path, baseline: str | None = None, title: str = ""
) -> dict[str, Any]:
    """Write ``compare.md``, ``compare.json`` and ``convergence.png`` into ``out``."""
    dirs = [Path(d) for d in run_dirs]
    labels = run_labels(dirs)
    if len(set(dirs)) != len(dirs):
        raise DataError("a run folder is named twice; give each run once")
    if baseline is not None and baseline not in labels:
        raise DataError(f"--baseline {baseline!r} is not one of the runs: {', '.join(labels)}")
    runs = {label: load_run(d) for label, d in zip(labels, dirs, strict=True)}
    base = baseline or labels[0]
    target = best_value(curve(runs[base][0], "valid"))
    rows = [_row(label, records, results, target) for label, (records, results) in runs.items()]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plot = plot_convergence(out, {k: r for k, (r, _) in runs.items()}, target, base)
    summary = {"baseline": base, "target_valid_loss": target, "rows": rows, "plot": str(plot)}
    (out / "compare.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    (out / "compare.md").write_text(
        markdown_table(summary, title or "Comparison"), encoding="utf-8"
    )
    return summary


def _row(label: str, records: list[dict], results: dict, target: float) -> dict[str, Any]:
    valid_curve = curve(records, "valid")
    tokens = [int(r["tokens"]) for r in records if r.get("split") == "valid" and "tokens" in r]
    final = {s: results[s]["bpc"] for s in ("valid", "test") if s in results}
    return {
        "run": label,
        "parameters": results.get("parameters"),
        "steps": max(s for s, _ in valid_curve),
        "best_periodic_valid_bpc": best_value(valid_curve) / LN2,
        "periodic_valid_tokens": max(tokens, default=None),
        "steps_to_target": steps_to_reach(valid_curve, target),
        "final_valid_bpc": final.get("valid"),
        "final_test_bpc": final.get("test"),
    }


def _fmt(value: Any, spec: str = ".4f") -> str:
    return "–" if value is None else format(value, spec)


def markdown_table(summary: dict[str, Any], title: str) -> str:
    rows = summary["rows"]
    sizes = {r["periodic_valid_tokens"] for r in rows}
    size = f"the first {_fmt(max(sizes - {None}, default=None), ',')} validation symbols"
    lines = [
        f"# {title}",
        "",
        f"Target: the best periodic validation loss of `{summary['baseline']}` "
        f"({summary['target_valid_loss'] / LN2:.4f} bits/symbol), the dashed line in the figure.",
        f"`best periodic valid` and the curves use the same evaluations ({size});",
        "`final valid` / `final test` are the full splits, scored once with each run's best "
        "weights.",
        "",
        "| run | params | steps | best periodic valid | steps to target | final valid | "
        "final test |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        reached = "not reached" if r["steps_to_target"] is None else str(r["steps_to_target"])
        lines.append(
            f"| {r['run']} | {_fmt(r['parameters'], ',')} | {r['steps']} | "
            f"{r['best_periodic_valid_bpc']:.4f} | {reached} | {_fmt(r['final_valid_bpc'])} | "
            f"{_fmt(r['final_test_bpc'])} |"
        )
    lines += ["", f"![convergence]({Path(summary['plot']).name})", ""]
    return "\n".join(lines)


def plot_convergence(
    out: Path, records: dict[str, list[dict[str, Any]]], target: float, baseline: str
) -> Path:
    """Training and validation bits per symbol against steps, with the target line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for label, recs in records.items():
        for ax, split in zip(axes, ("train", "valid"), strict=True):
            points = curve(recs, split)
            if points:
                steps, values = zip(*points, strict=True)
                marker = "o" if split == "valid" else None
                ax.plot(steps, [v / LN2 for v in values], marker=marker, ms=3, label=label)
    axes[1].axhline(target / LN2, color="grey", ls="--", lw=1, label=f"target ({baseline} best)")
    for ax, name in zip(axes, ("training", "validation (periodic)"), strict=True):
        ax.set_xlabel("step")
        ax.set_ylabel("bits per symbol")
        ax.set_title(f"{name} loss")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    path = out / "convergence.png"
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)
    return path
