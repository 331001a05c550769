"""Our T-L3 training step against an x-transformers decoder of the same size, in one run.

Both models: d 128, 3 layers, 8 heads of 16, d_inner 512, 50 symbols (char PTB), batch 16 ×
``--seq-len`` tokens, fp32, on the CPU with one thread by default; ``--device cuda
--precision bf16`` runs both on a GPU under bf16 autocast (the shape options give the
published T-L3: ``--d-model 512 --d-inner 2048 --seq-len 400``). Ours is the
``ht-table1/t-l3`` preset at that size (post-LN, sinusoidal positions, ReLU FFN, untied
output); x-transformers is ``TransformerWrapper(Decoder(...))`` as its README builds it
(pre-LN, learned positions, GELU FFN), with and without its ``attn_flash`` switch. A step is
forward, cross-entropy, backward and an SGD update. Variants are interleaved over
``--rounds`` rounds (the machine may be shared); each round times ``--steps`` steps and the
median of the round medians is reported, with tokens/s, the ratio to each x-transformers
variant and the model FLOP utilisation (MFU) against the matmul peak of the autocast dtype
measured on the same device in the same run; the process CPU time per step (warm-up
included) is printed beside it, a steadier comparison on a shared machine.
With dropout, ``ours, torch dropout`` is our model with :class:`torch.nn.Dropout` in place of
the library's CPU dropout.

``--profile`` adds, per variant, where a step's time goes (``torch.profiler``, self CPU time
per step, grouped): the matrix products and the attention kernel are the same torch kernels in
both models, so their sum bounds how far any change outside them can move the ratio.

    pip install x-transformers   # or: pip install -e .[bench]
    python benchmarks/bench_vs_xtransformers.py
    python benchmarks/bench_vs_xtransformers.py --seq-len 400 --rounds 7 --dropout 0.15
    python benchmarks/bench_vs_xtransformers.py --seq-len 400 --dropout 0.15 --profile
    python benchmarks/bench_vs_xtransformers.py --device cuda --precision bf16 \
        --d-model 512 --d-inner 2048 --seq-len 400 --dropout 0.15
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    Record,
    add_json_argument,
    add_shape_arguments,
    matmul_peak_flops,
    median_seconds,
    print_machine,
)

from highway_transformer.api import build_model  # noqa: E402
from highway_transformer.config import PRECISIONS, ModelConfig  # noqa: E402
from highway_transformer.models.lm import count_flops_per_token  # noqa: E402
from highway_transformer.nn.dropout import DRAW_LABEL, Dropout  # noqa: E402
from highway_transformer.presets import get_preset  # noqa: E402
from highway_transformer.runtime.device import AUTOCAST_DTYPES, autocast_context  # noqa: E402

VOCAB = 50

#: Profiler groups: the first two are torch kernels both models call with the same shapes.
KERNEL_GROUPS = (
    ("matrix products", ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")),
    ("attention kernel", ("aten::_scaled_dot_product",)),
    (
        "dropout draw",
        ("aten::uniform_", "aten::bernoulli_", "aten::random_", "aten::ge_", DRAW_LABEL),
    ),
)
SHARED_GROUPS = ("matrix products", "attention kernel")


def our_config(args: argparse.Namespace) -> ModelConfig:
    config = get_preset("ht-table1/t-l3").model
    config.d_model, config.n_layers, config.n_heads = args.d_model, args.layers, args.heads
    config.d_inner, config.vocab_size = args.d_inner, VOCAB
    config.dropout = args.dropout
    return config


def x_transformers_model(args: argparse.Namespace, flash: bool) -> nn.Module:
    from x_transformers import Decoder, TransformerWrapper

    return TransformerWrapper(
        num_tokens=VOCAB,
        max_seq_len=args.seq_len,
        emb_dropout=args.dropout,
        attn_layers=Decoder(
            dim=args.d_model,
            depth=args.layers,
            heads=args.heads,
            attn_dim_head=args.d_model // args.heads,
            ff_mult=args.d_inner // args.d_model,
            attn_flash=flash,
            ff_dropout=args.dropout,
            layer_dropout=0.0,
        ),
    )


def training_step(
    model: nn.Module,
    loss_of: Callable[[Tensor, Tensor], Tensor],
    x: Tensor,
    y: Tensor,
    precision: str = "fp32",
) -> Callable[[], None]:
    """One step of ``model`` on ``(x, y)`` on their device: the loss under autocast in
    ``precision``, backward, an SGD update."""
    model.to(x.device).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step() -> None:
        with autocast_context(x.device, precision):
            loss = loss_of(x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def variants(args: argparse.Namespace, x: Tensor, y: Tensor) -> dict[str, Callable[[], None]]:
    torch.manual_seed(0)
    ours = build_model(our_config(args))
    p = args.precision
    steps = {"ours": training_step(ours, lambda a, b: ours(a, targets=b).loss, x, y, p)}
    if args.dropout > 0:  # the same model with torch's own dropout: what nn.dropout saves
        torch.manual_seed(0)
        plain = build_model(our_config(args))
        for module in plain.modules():
            if isinstance(module, Dropout):
                module.__class__ = nn.Dropout
        steps["ours, torch dropout"] = training_step(
            plain, lambda a, b: plain(a, targets=b).loss, x, y, p
        )
    for name, flash in (("x-transformers", False), ("x-transformers flash", True)):
        torch.manual_seed(0)
        model = x_transformers_model(args, flash)

        def loss_of(a: Tensor, b: Tensor, model: nn.Module = model) -> Tensor:
            return F.cross_entropy(model(a).reshape(-1, VOCAB).float(), b.reshape(-1))

        steps[name] = training_step(model, loss_of, x, y, p)
    return steps


def group_of(name: str) -> str:
    for group, prefixes in KERNEL_GROUPS:
        if name.startswith(prefixes):
            return group
    return "everything else"


def profile_groups(step: Callable[[], None], steps: int) -> dict[str, float]:
    """Self CPU seconds per step in each kernel group (after one warm-up step)."""
    from torch.profiler import ProfilerActivity, profile

    step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    seconds: dict[str, float] = {}
    for event in prof.key_averages():
        group = group_of(event.key)
        seconds[group] = seconds.get(group, 0.0) + event.self_cpu_time_total / 1e6 / steps
    return seconds


def print_profiles(steps: dict[str, Callable[[], None]], n_steps: int) -> None:
    groups = [name for name, _ in KERNEL_GROUPS] + ["everything else"]
    profiles = {name: profile_groups(step, n_steps) for name, step in steps.items()}
    print(f"\nwhere a step goes (torch.profiler, self CPU ms per step, {n_steps} steps):")
    print(f"{'':22s} " + "  ".join(f"{g:>16s}" for g in groups) + f"  {'total':>8s}")
    for name, seconds in profiles.items():
        cells = "  ".join(f"{seconds.get(g, 0.0) * 1e3:16.1f}" for g in groups)
        print(f"{name:22s} {cells}  {sum(seconds.values()) * 1e3:8.1f}")
    ours = profiles["ours"]
    shared = sum(ours.get(g, 0.0) for g in SHARED_GROUPS)
    print(
        f"ours outside the shared kernels: {(sum(ours.values()) - shared) * 1e3:.1f} ms/step; "
        "with all of it free, ours/this would be at most:"
    )
    for name, seconds in profiles.items():
        if name != "ours":
            print(f"  {name:22s} {sum(seconds.values()) / shared:5.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shape_arguments(parser)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=200)
    parser.add_argument("--dropout", type=float, default=0.0, help="dropout of both models")
    parser.add_argument("--device", default="cpu", help="cpu (default) | cuda | cuda:N")
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32", help="autocast")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument(
        "--profile",
        type=int,
        nargs="?",
        const=3,
        default=0,
        metavar="STEPS",
        help="also profile each variant over STEPS steps (default 3) and group the kernels",
    )
    add_json_argument(parser)
    args = parser.parse_args()
    try:
        import x_transformers  # noqa: F401
    except ImportError:
        print("skipped: x-transformers is not installed (pip install x-transformers)")
        return
    torch.set_num_threads(args.threads)
    print_machine(args.device)
    record = Record(args.device)
    x = torch.randint(0, VOCAB, (args.batch, args.seq_len)).to(args.device)
    y = torch.randint(0, VOCAB, (args.batch, args.seq_len)).to(args.device)
    steps = variants(args, x, y)
    peak = matmul_peak_flops(AUTOCAST_DTYPES.get(args.precision, torch.float32), args.device)
    times: dict[str, list[float]] = {name: [] for name in steps}
    cpu_times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, step in steps.items():
            start = time.process_time()
            times[name].append(median_seconds(step, args.steps, warmup=1))
            cpu_times[name].append((time.process_time() - start) / (args.steps + 1))
    tokens = args.batch * args.seq_len
    flops = count_flops_per_token(our_config(args), args.seq_len) * tokens
    ours, ours_cpu = statistics.median(times["ours"]), statistics.median(cpu_times["ours"])
    rows = []
    for name, values in times.items():
        seconds, cpu = statistics.median(values), statistics.median(cpu_times[name])
        ratios = [theirs / mine for theirs, mine in zip(values, times["ours"], strict=True)]
        within = (
            ""
            if name == "ours"
            else (f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}x)")
        )
        rows.append([
            name, f"{tokens / seconds:,.0f}", f"{seconds * 1e3:.1f}",
            f"{flops / seconds / peak:.1%}", f"{seconds / ours:.2f}x", f"{cpu * 1e3:.1f}",
            f"{cpu / ours_cpu:.2f}x", within,
        ])  # fmt: skip
    record.table(
        ["variant", "tokens/s", "ms/step", "MFU", "ours/this", "CPU ms/step",
         "ours/this (CPU time)", "ours/this within each round: median (range)"],
        rows,
        caption=f"T-L3 step, d {args.d_model}, {args.layers} layers, {args.heads} heads, d_inner "
        f"{args.d_inner}, batch {args.batch} x {args.seq_len}, dropout {args.dropout}, "
        f"{args.device} {args.precision}; matmul peak {peak / 1e9:.1f} GFLOP/s; median of "
        f"{args.rounds} interleaved rounds",
        align="lrrrrrrr",
    )  # fmt: skip
    medians = {name: statistics.median(values) for name, values in times.items()}
    record.write(
        args.json,
        {
            "matmul_peak_flops": peak,
            "seconds": times,
            "cpu_seconds": cpu_times,
            "tokens": tokens,
            "flops_per_step": flops,
            "tokens_per_second": {name: tokens / s for name, s in medians.items()},
            "mfu": {name: flops / s / peak for name, s in medians.items()},
        },
    )
    if args.profile:
        print_profiles(steps, args.profile)


if __name__ == "__main__":
    main()
