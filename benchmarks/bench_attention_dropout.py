"""Dropout on the attention weights on the CPU: ours (``nn.attention.attend``: fp32 takes the
queries a block at a time) against torch's ``scaled_dot_product_attention`` with
``dropout_p`` (what users would call), forward and backward of one layer's attention at the
shapes of the presets that drop attention weights, interleaved over rounds; the same maths on
whole tensors (``attend_written_out``, the route before the blocks) and the attention without
dropout (torch's fused kernel, the floor) beside them. Prints milliseconds per call (median of
rounds) and torch's time over ours.

    python benchmarks/bench_attention_dropout.py            # HT 2, HT 4, RT 1 digits and MNIST
    python benchmarks/bench_attention_dropout.py --threads 2
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

from highway_transformer.nn.attention import attend, attend_written_out  # noqa: E402

#: name -> (batch, heads, length, d_head, dropout): the attention of each preset's `cpu` scale.
SHAPES = {
    "ht-table2/rt-l3 (char)": (16, 8, 100, 16, 0.15),
    "ht-table4/rt-l3 (word)": (16, 8, 20, 16, 0.35),
    "rt-table1/rtransformer (digits)": (32, 2, 64, 16, 0.05),
    "rt-table1/* (MNIST)": (32, 2, 784, 16, 0.05),
}


def fwd_bwd(fn: Callable[..., torch.Tensor], q, k, v) -> Callable[[], None]:
    def call() -> None:
        fn(q, k, v).sum().backward()

    return call


def variants(p: float) -> dict[str, Callable[..., torch.Tensor]]:
    return {
        "ours": lambda q, k, v: attend(q, k, v, None, True, p),
        "written out": lambda q, k, v: attend_written_out(q, k, v, None, True, p),
        "torch sdpa": lambda q, k, v: F.scaled_dot_product_attention(
            q, k, v, dropout_p=p, is_causal=True
        ),
        "no dropout": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    }


def measure(shape: tuple[int, int, int, int, float], rounds: int, repeats: int) -> dict:
    batch, heads, length, d_head, p = shape
    q, k, v = (torch.randn(batch, heads, length, d_head, requires_grad=True) for _ in range(3))
    calls = {name: fwd_bwd(fn, q, k, v) for name, fn in variants(p).items()}
    return interleaved_ms(calls, rounds, repeats, ratio=("torch sdpa", "ours"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args = parse_timing_arguments(parser, argv, rounds=7, repeats=10)
    record = Record()
    rows, raw = [], {}
    for name, shape in SHAPES.items():
        r = measure(shape, args.rounds, args.repeats)
        rows.append([
            f"{name} {shape}", f"{r['ours']:.2f}", f"{r['written out']:.2f}",
            f"{r['torch sdpa']:.2f}", f"{r['no dropout']:.2f}",
            ratio_cell(r),
        ])  # fmt: skip
        raw[name] = r
    record.table(
        ["attention (B, H, L, d_head, p)", "ours ms", "written out ms", "torch sdpa ms",
         "no dropout ms",
         "sdpa / ours"],
        rows,
        caption=f"forward + backward, {args.threads} thread(s), median of {args.rounds} rounds "
        f"of {args.repeats} calls",
    )  # fmt: skip
    record.write(args.json, raw)


if __name__ == "__main__":
    main()
