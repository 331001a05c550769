"""Training throughput of any presets through the library's own trainer, side by side.

Each preset trains in its own process (so peak memory is its own) with the trainer users run:
the same autocast, gradient scaler, clipping, optimiser and, when asked, ``torch.compile`` and
the fused optimiser. The data is the embedded corpus (the presets' own corpora need
downloads); the model, batch and segment length are the preset's unless overridden, so the
cost per token is the preset's (only the output layer's vocabulary differs). Steps are timed
in log windows of ``--window`` steps; the first window (warm-up, compilation) is dropped and
the median of the others reported, with the model FLOP utilisation (MFU) against the matmul
peak of the same precision measured on the same device in the same run, and each preset's
speed relative to the first one (a gate's cost). Presets are interleaved over ``--rounds``.

    # the issue's GPU figures: L6-XL in bf16, plain vs σ-SDU on every layer
    python benchmarks/bench_train_step.py ht-table5/l6-xl ht-table5/l6-xl+sigmoid \\
        --device cuda --precision bf16
    # add --compile and --fused-optimizer for the fast GPU path
    # a CPU-sized check (1 thread)
    python benchmarks/bench_train_step.py ht-table1/t-l3 ht-table1/t-l3+sigmoid \\
        --batch 16 --seq-len 200 --window 5 --threads 1
    # precisions side by side (each against its own matmul peak): is bf16 faster on this CPU?
    python benchmarks/bench_train_step.py ht-table1/t-l3+sigmoid --precision fp32 bf16 \\
        --batch 16 --seq-len 100 --window 5 --threads 1 --rounds 4
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    Record,
    add_json_argument,
    matmul_peak_flops,
    peak_rss_mib,
    print_machine,
)

from highway_transformer.config import PRECISIONS  # noqa: E402
from highway_transformer.models.lm import count_flops_per_token  # noqa: E402
from highway_transformer.presets import get_preset  # noqa: E402
from highway_transformer.runtime.device import AUTOCAST_DTYPES  # noqa: E402
from highway_transformer.storage.runfolder import read_metrics  # noqa: E402
from highway_transformer.training.trainer import Trainer  # noqa: E402
from highway_transformer.validation import build_config  # noqa: E402

#: Evaluation is not timed; these bound the trainer's closing evaluation on valid and test.
EVAL_TOKENS = 4_000


def add_trainer_arguments(parser: argparse.ArgumentParser) -> None:
    """The options :func:`overrides` reads besides device and precision."""
    parser.add_argument("--compile", action="store_true", help="train.compile=true")
    parser.add_argument("--fused-optimizer", action="store_true")
    parser.add_argument("--batch", type=int, default=0, help="data.batch_size (0: preset's)")
    parser.add_argument("--seq-len", type=int, default=0, help="data.seq_len (0: preset's)")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's)")
    parser.add_argument("--set", nargs="*", default=[], help="more key=value settings")


def overrides(args: argparse.Namespace, steps: int, log_interval: int) -> list[str]:
    """The preset's settings that change here: data, device, precision, step count."""
    settings = [
        "data.corpus=pydoc",
        "data.path=null",
        f"data.max_eval_tokens={EVAL_TOKENS}",
        f"train.device={args.device}",
        f"train.precision={args.precision}",
        f"train.compile={args.compile}",
        f"train.fused_optimizer={args.fused_optimizer}",
        f"train.max_steps={steps}",
        f"train.log_interval={log_interval}",
        f"train.eval_interval={steps}",
        "train.checkpoint_interval=0",
    ]
    if args.batch:
        settings.append(f"data.batch_size={args.batch}")
    if args.seq_len:
        settings.append(f"data.seq_len={args.seq_len}")
    return settings + list(args.set)


def child_argv(args: argparse.Namespace, preset: str, precision: str) -> list[str]:
    """The command line of one variant's training child."""
    argv = [preset, "--device", args.device, "--precision", precision, "--child"]
    for name in ("batch", "seq_len", "window", "windows", "threads"):
        argv += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    argv += ["--compile"] * args.compile + ["--fused-optimizer"] * args.fused_optimizer
    return argv + (["--set", *args.set] if args.set else [])


def train_child(preset: str, args: argparse.Namespace) -> dict:
    """Train ``preset`` briefly; its steady tokens/s per window, FLOPs per token, memory."""
    steps = args.window * (args.windows + 1)
    config = build_config(get_preset(preset), overrides=overrides(args, steps, args.window))
    with tempfile.TemporaryDirectory() as folder:
        trainer = Trainer(config, folder, progress=False)
        results = trainer.fit()
        records = [r for r in read_metrics(folder) if r.get("split") == "train" and "rate" in r]
    device = trainer.device
    if device.type == "cuda":
        peak_mib = torch.cuda.max_memory_allocated(device) / 2**20
    else:
        peak_mib = peak_rss_mib()
    model_config = trainer.task.config.model
    return {
        "preset": preset,
        "rates": [r["rate"] for r in records[1:]],  # the first window warms up
        "flops_per_token": count_flops_per_token(model_config, config.data.seq_len),
        "peak_mib": peak_mib,
        "parameters": results["parameters"],
        "first_loss": records[0]["loss"],
        "last_loss": records[-1]["loss"],
        "batch": f"{config.data.batch_size} x {config.data.seq_len}",
    }


def run_child(preset: str, argv: list[str]) -> dict:
    command = [sys.executable, __file__, *argv]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"{preset}: the training child failed: {tail}")
    return json.loads(done.stdout.strip().splitlines()[-1])


Variant = tuple[str, str]  # (preset, precision)


def print_table(
    runs: dict[Variant, list[dict]],
    peaks: dict[str, float],
    args: argparse.Namespace,
    record: Record | None = None,
) -> None:
    first = next(iter(runs))
    rates = {v: statistics.median(r for run in rs for r in run["rates"]) for v, rs in runs.items()}
    some = runs[first][0]
    matmul = ", ".join(f"{p} {peak / 1e12:.3f}" for p, peak in peaks.items())
    rows = []
    for (preset, precision), rs in runs.items():
        run, rate = rs[-1], rates[(preset, precision)]
        mfu = rate * run["flops_per_token"] / peaks[precision]
        loss = f"{run['first_loss']:.3f} → {run['last_loss']:.3f}"
        rows.append([
            preset, precision, f"{run['parameters']:,}", f"{rate:,.0f}",
            f"{rate / rates[first]:.3f}", f"{mfu:.1%}", f"{max(r['peak_mib'] for r in rs):,.0f}",
            loss,
        ])  # fmt: skip
    (record or Record(args.device)).table(
        ["preset", "precision", "params", "tokens/s", "vs first", "MFU", "peak MiB",
         "train loss first → last"],
        rows,
        caption=f"batch {some['batch']}, device {args.device}, compile {args.compile}, "
        f"fused optimiser {args.fused_optimizer}; {args.device} matmul peak (TFLOP/s): "
        f"{matmul}; median of {args.windows} windows of {args.window} steps x {args.rounds} "
        "rounds",
        align="llrrrrrl",
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("presets", nargs="+", help="preset names; the first is the reference")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--precision", nargs="+", choices=PRECISIONS, default=["fp32"],
        help="one or more, each preset trained in each (MFU against that precision's peak)",
    )  # fmt: skip
    add_trainer_arguments(parser)
    parser.add_argument("--window", type=int, default=10, help="steps per timed window")
    parser.add_argument("--windows", type=int, default=3, help="timed windows per round")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    add_json_argument(parser)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.child:
        args.precision = args.precision[0]
        print(json.dumps(train_child(args.presets[0], args)))
        return
    print_machine(args.device)
    record = Record(args.device)
    peaks = {  # the products run in the autocast dtype
        p: matmul_peak_flops(AUTOCAST_DTYPES.get(p, torch.float32), args.device)
        for p in args.precision
    }
    variants = [(preset, p) for preset in args.presets for p in args.precision]
    runs: dict[Variant, list[dict]] = {v: [] for v in variants}
    for _ in range(args.rounds):
        for preset, precision in variants:
            argv = child_argv(args, preset, precision)
            runs[(preset, precision)].append(run_child(preset, argv))
    print_table(runs, peaks, args, record)
    record.write(
        args.json,
        {"matmul_peak_flops": peaks, "runs": [[*v, rs] for v, rs in runs.items()]},
    )


if __name__ == "__main__":
    main()
