"""Where a training step's time goes: the library's trainer under ``torch.profiler``.

``bench_train_step.py`` says how fast a preset trains; this says why. The trainer runs
``--warmup`` steps unprofiled-for-the-summary (allocator, cuBLAS handles, compilation), then
``--active`` profiled steps. On a GPU it prints the wall time per step, the time the GPU was
busy running kernels (the union of kernel intervals), the kernels launched per step, and the
GPU time by kernel class (matrix products, attention, normalisation and softmax, optimiser,
reductions, the rest: elementwise). A step whose GPU is busy a small fraction of its wall
time is bound by the host launching kernels, not by the matrix units; the fix is fewer,
larger kernels (``--compile``, CUDA graphs), not faster matrix products. On a CPU it prints
the operators with the most self time. The profiler adds host overhead, so the wall time here
is an upper bound: take speeds from ``bench_train_step.py``.

    python benchmarks/profile_train_step.py ht-table5/l6-xl ht-table5/l6-xl+sigmoid \\
        --device cuda --precision bf16 --fused-optimizer
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, schedule

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train_step import add_trainer_arguments, overrides  # noqa: E402
from common import print_machine  # noqa: E402

from highway_transformer.config import PRECISIONS  # noqa: E402
from highway_transformer.presets import get_preset  # noqa: E402
from highway_transformer.training.trainer import Trainer  # noqa: E402
from highway_transformer.validation import build_config  # noqa: E402

#: Kernel classes, first match wins; names are lower-cased before matching.
KERNEL_CLASSES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("attention", ("flash", "fmha", "attention", "sdpa", "efficient_attention")),
    ("matrix products", ("gemm", "nvjet", "cutlass", "xmma", "cublas", "matmul")),
    ("optimiser", ("adam", "multi_tensor", "foreach")),
    ("normalisation, softmax", ("norm", "softmax")),
    ("reductions", ("reduce",)),
    ("copies, fills", ("memcpy", "memset", "copy", "fill", "cat")),
)
OTHER = "elementwise, other"


def kernel_class(name: str) -> str:
    lowered = name.lower()
    for label, needles in KERNEL_CLASSES:
        if any(needle in lowered for needle in needles):
            return label
    return OTHER


def busy_microseconds(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of ``(start, end)`` intervals: time when at least one ran."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def summarise_kernels(kernels: list[tuple[str, float, float]], steps: int) -> dict:
    """Kernels as ``(name, start us, end us)``: busy time, launches and time per class and
    per name, all per step."""
    by_class: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    by_name: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for name, start, end in kernels:
        for table, key in ((by_class, kernel_class(name)), (by_name, name)):
            table[key][0] += 1
            table[key][1] += end - start
    per_step = {
        table_name: {k: (n / steps, us / steps / 1000) for k, (n, us) in table.items()}
        for table_name, table in (("classes", by_class), ("names", by_name))
    }
    busy = busy_microseconds([(s, e) for _, s, e in kernels])
    return {"busy_ms": busy / steps / 1000, "kernels": len(kernels) / steps, **per_step}


def print_summary(preset: str, summary: dict, wall_ms: float, top: int) -> None:
    busy = summary["busy_ms"]
    print(
        f"\n{preset}: wall {wall_ms:.2f} ms/step (profiled), GPU busy {busy:.2f} ms/step "
        f"({busy / wall_ms:.0%}), {summary['kernels']:.0f} kernels/step\n"
    )
    kernel_ms = sum(ms for _, ms in summary["classes"].values()) or 1.0
    print("| kernel class | kernels/step | GPU ms/step | share of kernel time |")
    print("| --- | ---: | ---: | ---: |")
    for label, (count, ms) in sorted(summary["classes"].items(), key=lambda kv: -kv[1][1]):
        print(f"| {label} | {count:.0f} | {ms:.3f} | {ms / kernel_ms:.1%} |")
    print(f"\ntop {top} kernels by GPU time:")
    ranked = sorted(summary["names"].items(), key=lambda kv: -kv[1][1])[:top]
    for name, (count, ms) in ranked:
        print(f"  {ms:8.3f} ms/step  {count:5.0f}x  {name[:110]}")


def is_annotation(event: object) -> bool:
    """The profiler's own step ranges, mirrored on the GPU's timeline: no kernel."""
    name = getattr(event, "name", "")
    return bool(getattr(event, "is_user_annotation", False)) or name.startswith("ProfilerStep")


def profile_preset(preset: str, args: argparse.Namespace) -> tuple[object, float]:
    """Train ``preset`` for warm-up + active steps; the profiler and wall ms per active step."""
    steps = args.warmup + args.active
    config = build_config(get_preset(preset), overrides=overrides(args, steps, steps))
    cuda = args.device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * cuda
    marks: dict[int, float] = {}

    def after_step(step: int) -> None:
        if cuda:
            torch.cuda.synchronize()  # the step's kernels belong to the step
        marks[step] = time.perf_counter()
        prof.step()

    plan = schedule(wait=0, warmup=args.warmup, active=args.active, repeat=1)
    with (
        tempfile.TemporaryDirectory() as folder,
        profile(activities=activities, schedule=plan, record_shapes=args.shapes) as prof,
    ):
        Trainer(config, folder, progress=False).fit(after_step=after_step)
    wall_ms = (marks[steps] - marks[args.warmup]) / args.active * 1000
    return prof, wall_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("presets", nargs="+")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32")
    add_trainer_arguments(parser)
    parser.add_argument("--warmup", type=int, default=10, help="steps before profiling")
    parser.add_argument("--active", type=int, default=10, help="profiled steps")
    parser.add_argument("--top", type=int, default=15, help="kernels or operators listed")
    parser.add_argument("--shapes", action="store_true", help="also operators by input shape")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print_machine(args.device)
    for preset in args.presets:
        prof, wall_ms = profile_preset(preset, args)
        events = prof.events()
        kernels = [
            (e.name, e.time_range.start, e.time_range.end)
            for e in events
            if e.device_type == DeviceType.CUDA and not is_annotation(e)
        ]
        if kernels:
            print_summary(preset, summarise_kernels(kernels, args.active), wall_ms, args.top)
            if args.shapes:  # which operators, at which shapes, launch the costly kernels
                table = prof.key_averages(group_by_input_shape=True)
                print(table.table(sort_by="self_device_time_total", row_limit=args.top))
        else:
            print(f"\n{preset}: wall {wall_ms:.2f} ms/step (profiled); no GPU kernels")
            averages = prof.key_averages(group_by_input_shape=args.shapes)
            print(averages.table(sort_by="self_cpu_time_total", row_limit=args.top))


if __name__ == "__main__":
    main()
