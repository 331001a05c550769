"""``highway demo``: the paper's central comparison, small enough for a laptop CPU.

Trains a plain, a σ-SDU and a tanh-SDU 3-layer Transformer on the embedded corpus (CPython's
documentation topics, character level) with the same seed, data order and budget, then
writes a report folder: the convergence figure (target line: the plain model's best
validation loss) and the table of ``highway compare`` (the steps each model needed to reach
that target; periodic and full-split bits per character, labelled), and a generated sample
from each model. No timing column: on a shared machine seconds per step measure the load.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import Config, DataConfig, GateConfig, ModelConfig, TrainConfig
from .errors import ConfigError, DataError
from .extras import import_extra
from .report.compare import compare_runs
from .storage import runfolder
from .training.trainer import train

VARIANTS: dict[str, GateConfig] = {
    "plain": GateConfig(kind="none"),
    "sdu-sigmoid": GateConfig(kind="sdu", activation="sigmoid"),
    "sdu-tanh": GateConfig(kind="sdu", activation="tanh"),
}


def demo_config(variant: str, steps: int = 400) -> Config:
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
        if (run_dir / "results.json").is_file():
            log(f"{variant}: already trained, skipped")
            continue
        log(f"training {variant} ({config.train.max_steps} steps)")
        checkpoint = run_dir / runfolder.CHECKPOINT_DIR
        resume = checkpoint.exists() or checkpoint.with_name(f"{checkpoint.name}.old").exists()
        train(config, run_dir, resume=resume, overwrite=not resume, progress=progress, log=log)
    samples = {variant: sample(out / variant, prompt) for variant in configs}
    return write_demo_report(out, list(configs), title, samples)


def run_demo(
    out: str | Path, steps: int = 400, progress: bool = True, log: Callable[[str], None] = print
) -> dict[str, Any]:
    import_extra("matplotlib", "the demo's figure")  # fail before minutes of training
    configs = {variant: demo_config(variant, steps) for variant in VARIANTS}
    title = "Demo: plain vs σ-SDU vs tanh-SDU Transformer (embedded corpus, char level)"
    return run_comparison(out, configs, progress, log, title)


def check_same_config(run_dir: Path, config: Config) -> None:
    """Refuse to reuse a run folder trained with another configuration (e.g. more steps)."""
    differ = runfolder.config_differences(run_dir, config)
    if differ:
        shown = ", ".join(f"{k}={found!r} (asked {asked!r})" for k, found, asked in differ[:3])
        raise ConfigError(
            f"{run_dir} was trained with another configuration: {shown}; "
            "choose another --out or remove the folder"
        )


def sample(run_dir: Path, prompt: str, tokens: int = 240) -> str:
    """A continuation of ``prompt`` by the run's best weights (the same seed for every run)."""
    from .api import load_pretrained

    model, _, vocab = load_pretrained(run_dir / runfolder.BEST_DIR)
    try:
        text = model.generate(prompt, tokens, vocab=vocab, temperature=0.7, top_k=20, seed=1)
    except DataError as exc:
        return f"(no sample: {exc})"
    return prompt + text


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
