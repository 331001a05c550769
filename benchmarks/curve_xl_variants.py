"""A short char-PTB training curve: plain Transformer-XL vs GTrXL-GRU vs XL + σ-SDU.

Same seed, data order, size and step budget for all three (a CPU scale stated in the
output); writes ``OUT/compare.md`` (the ``highway compare`` page of the three runs, with a
sample from each model) and ``OUT/convergence.png``.

    python benchmarks/curve_xl_variants.py --ptb ../shared/data/ptb --out runs/xl-variants
"""

from __future__ import annotations

import argparse
from pathlib import Path

from highway_transformer.api import sample_text
from highway_transformer.config import Config, GateConfig
from highway_transformer.presets.xl_tables import xl_enwik8
from highway_transformer.report.compare import compare_runs
from highway_transformer.storage import runfolder
from highway_transformer.training.trainer import train


def scaled(gate: GateConfig, norm: str, args: argparse.Namespace) -> Config:
    config = xl_enwik8(args.layers, gate, args.steps)
    m, d, t = config.model, config.data, config.train
    m.d_model, m.n_heads, m.d_head = args.d_model, 4, args.d_model // 4
    m.d_inner, m.norm = 4 * args.d_model, norm
    m.memory.mem_len, m.memory.eval_mem_len, m.memory.eval_clamp_len = args.seq_len, None, None
    m.memory.eval_same_length = None
    d.corpus, d.path, d.seq_len, d.batch_size = "ptb-char", args.ptb, args.seq_len, 16
    d.eval_seq_len, d.max_train_tokens, d.max_eval_tokens = None, args.train_tokens, 50_000
    t.lr, t.warmup_steps, t.eval_interval, t.eval_max_tokens = 1e-3, 20, args.steps // 8, 20_000
    t.log_interval = 10
    return config


def run_comparison(out: Path, configs: dict[str, Config], title: str, prompt: str) -> None:
    """Train each named config into ``out/NAME`` (skipping finished, resuming interrupted
    runs of the same config; a folder trained with another config is an error), then compare
    them (baseline: the first) with a generated sample from each model."""
    for variant, config in configs.items():
        runfolder.refuse_other_config(out / variant, config)
    for variant, config in configs.items():
        run_dir = out / variant
        if runfolder.is_finished(run_dir):
            print(f"{variant}: already trained, skipped")
            continue
        print(f"training {variant} ({config.train.max_steps} steps)")
        resume = runfolder.has_checkpoint(run_dir)
        train(config, run_dir, resume=resume, overwrite=not resume, progress=False)
    samples = {variant: sample_text(out / variant, prompt) for variant in configs}
    compare_runs([out / v for v in configs], out, title=title, samples=samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ptb", required=True, help="folder with ptb.char.*.txt")
    parser.add_argument("--out", default="runs/xl-variants")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--train-tokens", type=int, default=1_000_000)
    args = parser.parse_args()
    configs = {
        "plain": scaled(GateConfig(), "post", args),
        "gtrxl-gru": scaled(GateConfig(kind="gtrxl-gru", bias=2.0), "pre", args),
        "sdu-sigmoid": scaled(GateConfig(kind="sdu", activation="sigmoid"), "post", args),
    }
    title = (
        f"char PTB, {args.layers}-layer XL d {args.d_model}, segment = memory = {args.seq_len}, "
        f"batch 16, {args.steps} Adam steps, first {args.train_tokens:,} training symbols"
    )
    run_comparison(Path(args.out), configs, title=title, prompt="the ")
    print(Path(args.out, "compare.md").read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
