"""``highway demo``: the paper's central comparison, small enough for a laptop CPU.

Trains a plain, a σ-SDU and a tanh-SDU 3-layer Transformer on the embedded corpus (CPython's
documentation topics, character level) with the same seed, data order and budget, then
writes a report folder: a convergence plot and a table of final valid/test bits per
character and the steps each gated model needed to reach the plain model's best validation
loss.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import Config, DataConfig, GateConfig, ModelConfig, TrainConfig
from .report.convergence import best_value, curve, steps_to_reach
from .train.runfolder import read_metrics
from .train.trainer import train

VARIANTS: dict[str, GateConfig] = {
    "plain": GateConfig(kind="none"),
    "sdu-sigmoid": GateConfig(kind="sdu", activation="sigmoid"),
    "sdu-tanh": GateConfig(kind="sdu", activation="tanh"),
}


def demo_config(variant: str, steps: int = 400) -> Config:
    """A 3-layer, d=128 Transformer on the embedded corpus (a scaled-down HT Table 1)."""
    return Config(
        name=f"demo-{variant}",
        source="scaled-down HT Table 1 (3-layer Transformer, char level) on the embedded corpus",
        model=ModelConfig(
            d_model=128,
            n_layers=3,
            n_heads=4,
            d_inner=512,
            dropout=0.1,
            init="uniform",
            init_range=0.1,
            tie_weights=False,
            gate=VARIANTS[variant],
        ),
        data=DataConfig(corpus="pydoc", batch_size=16, seq_len=128, context=32, eval_batch_size=32),
        train=TrainConfig(
            optimizer="adam",
            lr=2e-3,
            schedule="cosine",
            warmup_steps=20,
            clip=0.5,
            max_steps=steps,
            eval_interval=max(steps // 10, 1),
            eval_max_tokens=8000,
            log_interval=10,
            seed=1111,
        ),
    )


def run_comparison(
    out: str | Path,
    configs: dict[str, Config],
    progress: bool = True,
    log: Callable[[str], None] = print,
    title: str = "Comparison",
) -> dict[str, Any]:
    """Train each named config into ``out/NAME`` (skipping finished, resuming interrupted
    runs) and write a report whose baseline is the entry named ``plain``."""
    out = Path(out)
    results: dict[str, dict[str, Any]] = {}
    for variant, config in configs.items():
        run_dir = out / variant
        if (run_dir / "results.json").is_file():
            results[variant] = json.loads((run_dir / "results.json").read_text())
            log(f"{variant}: already trained, skipped")
            continue
        log(f"training {variant} ({config.train.max_steps} steps)")
        resume = (run_dir / "checkpoint").exists() or (run_dir / "checkpoint.old").exists()
        # a run cut before its first checkpoint starts again: its partial records go
        results[variant] = train(
            config, run_dir, resume=resume, overwrite=not resume, progress=progress, log=log
        )
    return write_demo_report(out, results, title)


def run_demo(
    out: str | Path, steps: int = 400, progress: bool = True, log: Callable[[str], None] = print
) -> dict[str, Any]:
    configs = {variant: demo_config(variant, steps) for variant in VARIANTS}
    title = "Demo: plain vs σ-SDU vs tanh-SDU Transformer (embedded corpus, char level)"
    return run_comparison(out, configs, progress, log, title)


def write_demo_report(
    out: Path, results: dict[str, dict[str, Any]], title: str = "Comparison"
) -> dict[str, Any]:
    records = {v: read_metrics(out / v) for v in results}
    target = best_value(curve(records["plain"], "valid"))
    rows = []
    for variant, result in results.items():
        valid_curve = curve(records[variant], "valid")
        reached = steps_to_reach(valid_curve, target)
        rows.append(
            {
                "model": variant,
                "parameters": result["parameters"],
                "valid_bpc": result["valid"]["bpc"],
                "test_bpc": result["test"]["bpc"],
                "best_periodic_valid_bpc": best_value(valid_curve) / math.log(2),
                "steps_to_plain_best": reached,
                "seconds_per_step": result["train_seconds"] / max(result["steps"], 1),
            }
        )
    plot_path = _plot(out, records)
    lines = [
        f"# {title}",
        "",
        "Same seed, data order and step budget for every model. `steps to plain best`: the",
        "first periodic evaluation at which the model's validation loss is at or below the",
        "best validation loss the plain model ever reached (fewer is faster convergence).",
        "",
        "| model | params | valid bpc | test bpc | steps to plain best | s/step |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        reached = (
            "not reached" if r["steps_to_plain_best"] is None else str(r["steps_to_plain_best"])
        )
        lines.append(
            f"| {r['model']} | {r['parameters']:,} | {r['valid_bpc']:.4f} | {r['test_bpc']:.4f} "
            f"| {reached} | {r['seconds_per_step']:.3f} |"
        )
    lines += ["", f"![convergence]({plot_path.name})", ""]
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
    summary = {"rows": rows, "plain_best_valid_loss": target, "plot": str(plot_path)}
    (out / "report.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return summary


def _plot(out: Path, records: dict[str, list[dict[str, Any]]]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for variant, recs in records.items():
        train_points = curve(recs, "train")
        valid_points = curve(recs, "valid")
        axes[0].plot(
            *zip(*[(s, v / math.log(2)) for s, v in train_points], strict=True), label=variant
        )
        axes[1].plot(
            *zip(*[(s, v / math.log(2)) for s, v in valid_points], strict=True),
            marker="o",
            label=variant,
        )
    for ax, title in zip(axes, ("training", "validation"), strict=True):
        ax.set_xlabel("step")
        ax.set_ylabel("bits per character")
        ax.set_title(f"{title} loss")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    path = out / "convergence.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
