"""Benchmark: the relative-attention core with its position-score rows K+1 wide vs aligned.

The core (``nn/kernels/relative_core.py``) writes ``BD`` in rows of ``K+p`` columns (``p`` zero rows
before the position keys) and reads the relative shift as a strided view. With the
reference's ``p = 1`` and ``K = 1024`` a bf16 row is 2,050 bytes, not a multiple of 16, and
on a GPU the three products that touch those rows (one forward, two backward) run on slow
unaligned kernels; the module therefore prepends as many zero rows as make ``K+p`` a
multiple of 8 there (``zero_rows``). This times forward + backward of the core at the L6-XL
shape (HT Table 5 analogue: batch 22, segment 512, memory 512, 8 heads × 64) with ``p = 1``
and with the aligned ``p``, in one run, and checks that they agree.

    python benchmarks/bench_row_align.py --device cuda --precision bf16
    python benchmarks/bench_row_align.py --device cpu --batch 2 --q-len 64 --mem-len 64 --reps 3
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Record, add_json_argument, median_seconds, print_machine  # noqa: E402

from highway_transformer.nn.kernels.relative_core import relative_attention, zero_rows  # noqa: E402
from highway_transformer.nn.relative import relative_attention_mask  # noqa: E402
from highway_transformer.runtime.device import AUTOCAST_DTYPES  # noqa: E402


def operands(args: argparse.Namespace, pad: int) -> tuple[torch.Tensor, ...]:
    """The core's inputs at the given shape: queries, keys, values, position keys after
    ``pad`` zero rows, all leaves that want gradients (the same values for every ``pad``)."""
    g = torch.Generator().manual_seed(0)
    dtype = AUTOCAST_DTYPES.get(args.precision, torch.float32)
    n_h, bsz, q_len, d_h = args.heads, args.batch, args.q_len, args.d_head
    k_len = args.mem_len + q_len

    def leaf(*shape: int) -> torch.Tensor:
        x = torch.randn(*shape, generator=g) / math.sqrt(d_h)
        return x.to(args.device, dtype).requires_grad_()

    r_rows = torch.randn(n_h, k_len, d_h, generator=g) / math.sqrt(d_h)
    r_rows = torch.cat([torch.zeros(n_h, pad, d_h), r_rows], 1)
    return (
        leaf(n_h * bsz, q_len, d_h),
        leaf(n_h, bsz * q_len, d_h),
        leaf(n_h * bsz, k_len, d_h),
        leaf(n_h * bsz, k_len, d_h),
        r_rows.to(args.device, dtype).requires_grad_(),
    )


def forward_backward(inputs: tuple[torch.Tensor, ...], mask: torch.Tensor) -> list[torch.Tensor]:
    """Output and the input gradients (the position keys' without their zero rows)."""
    for t in inputs:
        t.grad = None
    scale = 1 / math.sqrt(inputs[0].shape[-1])
    out = relative_attention(*inputs, mask, scale, 0.0)
    out.backward(torch.ones_like(out))
    k_len = inputs[2].shape[1]
    return [out.detach(), *(t.grad for t in inputs[:4]), inputs[4].grad[:, -k_len:]]


def aligned_pad(k_len: int) -> int:
    """The zero rows the module prepends on a GPU for ``k_len`` keys (asked on any device)."""
    return zero_rows(k_len, torch.device("cuda"))


def compare(args: argparse.Namespace, pads: tuple[int, ...]) -> dict[int, float]:
    """Median seconds of forward + backward per zero-row count; stops if the results differ."""
    mask = relative_attention_mask(args.q_len, args.mem_len, device=torch.device(args.device))
    inputs = {pad: operands(args, pad) for pad in pads}
    results = {pad: forward_backward(inputs[pad], mask) for pad in pads}
    for pad in pads[1:]:
        for a, b in zip(results[pads[0]], results[pad], strict=True):
            # the products' blocking differs: agreement to the precision's rounding
            error = (b.float() - a.float()).norm() / a.float().norm().clamp_min(1e-30)
            if error > 1e-2:
                raise SystemExit(f"{pad} zero rows differ from {pads[0]}: {error:.2e}")
    return {
        pad: median_seconds(lambda p=pad: forward_backward(inputs[p], mask), args.reps, warmup=2)
        for pad in pads
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="bf16")
    p.add_argument("--batch", type=int, default=22)
    p.add_argument("--q-len", type=int, default=512)
    p.add_argument("--mem-len", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--d-head", type=int, default=64)
    p.add_argument("--reps", type=int, default=20, help="timed repetitions (median)")
    add_json_argument(p)
    args = p.parse_args()
    print_machine(args.device)
    record = Record(args.device)
    times = compare(args, (1, aligned_pad(args.mem_len + args.q_len)))
    k_len = args.mem_len + args.q_len
    rows = [
        [f"{k_len + pad} wide ({pad} zero rows)", f"{seconds * 1000:.3f}",
         f"{times[1] / seconds:.2f}×"]
        for pad, seconds in times.items()
    ]  # fmt: skip
    print()
    record.table(
        ["position-score rows", "ms", "vs K+1 wide"],
        rows,
        caption=f"relative-attention core, forward + backward, {args.precision}: H {args.heads} × "
        f"B {args.batch}, L {args.q_len}, M {args.mem_len}, d_head {args.d_head}",
    )
    record.write(args.json, {str(pad): seconds for pad, seconds in times.items()})


if __name__ == "__main__":
    main()
