"""Attention without dropout on the CPU in reduced precision: ours (``nn.attention.attend``:
bf16/fp16 operands through torch's fused kernel on fp32 copies) against torch's
``scaled_dot_product_attention`` called on the bf16 operands themselves (what users would
call, and what CPU autocast does), with fp32 operands as the floor; forward and backward of one
layer's causal attention at the presets' `cpu` and paper shapes, interleaved over rounds.
Prints milliseconds per call (median of rounds) and torch's time over ours.

    python benchmarks/bench_attention_precision.py
    python benchmarks/bench_attention_precision.py --threads 2 --dtype float16
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Record, interleaved_ms, parse_timing_arguments, ratio_cell  # noqa: E402

from highway_transformer.nn.attention import attend  # noqa: E402

#: name -> (batch, heads, length, d_head): the attention of each preset at a scale (length:
#: the queries and keys of one segment with its context).
SHAPES = {
    "ht-table1/t-l3 char, cpu": (16, 8, 130, 16),
    "ht-table3/t-l3 word, paper": (16, 8, 120, 16),
    "ht-table1/t-l3 char, paper": (16, 8, 520, 64),
    "rt-table1/* MNIST (no dropout)": (32, 2, 784, 16),
}


def fwd_bwd(fn: Callable[..., torch.Tensor], q, k, v) -> Callable[[], None]:
    def call() -> None:
        fn(q, k, v).float().sum().backward()

    return call


def variants() -> dict[str, Callable[..., torch.Tensor]]:
    return {
        "ours": lambda q, k, v: attend(q, k, v, None, True, 0.0),
        "torch sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    }


def measure(shape: tuple[int, int, int, int], dtype: torch.dtype, rounds: int, repeats: int):
    def operands(dt: torch.dtype) -> list[torch.Tensor]:
        return [torch.randn(*shape, dtype=dt, requires_grad=True) for _ in range(3)]

    reduced, full = operands(dtype), operands(torch.float32)
    calls = {name: fwd_bwd(fn, *reduced) for name, fn in variants().items()}
    calls["fp32"] = fwd_bwd(variants()["torch sdpa"], *full)
    return interleaved_ms(calls, rounds, repeats, ratio=("torch sdpa", "ours"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16")
    args = parse_timing_arguments(parser, argv, rounds=5, repeats=5)
    dtype = getattr(torch, args.dtype)
    record = Record()
    rows, raw = [], {}
    for name, shape in SHAPES.items():
        r = measure(shape, dtype, args.rounds, args.repeats)
        rows.append([
            f"{name} {shape}", f"{r['ours']:.2f}", f"{r['torch sdpa']:.2f}", f"{r['fp32']:.2f}",
            ratio_cell(r),
        ])  # fmt: skip
        raw[name] = r
    record.table(
        ["causal attention (B, H, L, d_head)", f"ours ({args.dtype}) ms",
         f"torch sdpa ({args.dtype}) ms", "torch sdpa (fp32) ms", "sdpa / ours"],
        rows,
        caption=f"forward + backward, {args.threads} thread(s), median of {args.rounds} rounds "
        f"of {args.repeats} calls",
    )  # fmt: skip
    record.write(args.json, raw)


if __name__ == "__main__":
    main()
