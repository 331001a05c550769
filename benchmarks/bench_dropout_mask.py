"""The CPU dropout mask: ours (``nn.dropout.keep_draw``: numpy SFC64's 32-bit words compared
with an integer threshold) against the float draws it replaced (numpy's float32 draws
compared with ``p``: the same mask bit for bit) and torch's own (``torch.rand(...) >= p``,
``bernoulli_``: what ``torch.nn.Dropout`` draws), at the sizes of the T-L3 word step's masks,
interleaved over rounds. Prints milliseconds per mask (median of rounds) and the float draws'
time over ours.

    python benchmarks/bench_dropout_mask.py
    python benchmarks/bench_dropout_mask.py --json docs/benchmarks/bench_dropout_mask.json
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Record, interleaved_ms, parse_timing_arguments, ratio_cell  # noqa: E402

from highway_transformer.nn.dropout import keep_draw  # noqa: E402

#: name -> (elements, p): the masks of one T-L3 word step (16 x 80, d 128, d_ff 512).
SHAPES = {
    "T-L3 word, sublayer output (16 x 80 x 128)": (16 * 80 * 128, 0.35),
    "T-L3 word, feed-forward inner (16 x 80 x 512)": (16 * 80 * 512, 0.35),
}


def float_draws(n: int, p: float) -> torch.Tensor:
    """The route before the words: numpy's float32 draws, compared by torch."""
    seed = int(torch.randint(0, 1 << 62, (1,)))
    draws = torch.empty(n)
    np.random.Generator(np.random.SFC64(seed)).random(out=draws.numpy(), dtype=np.float32)
    return draws.ge_(p)


def variants(n: int, p: float) -> dict[str, Callable[[], object]]:
    return {
        "ours": lambda: keep_draw((n,), p),
        "float draws": lambda: float_draws(n, p),
        "torch.rand": lambda: torch.rand(n).ge_(p),
        "bernoulli_": lambda: torch.empty(n).bernoulli_(1 - p),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args = parse_timing_arguments(parser, argv, rounds=9, repeats=20)
    record = Record()
    rows, raw = [], {}
    for name, (n, p) in SHAPES.items():
        r = interleaved_ms(variants(n, p), args.rounds, args.repeats, ratio=("float draws", "ours"))
        rows.append([
            f"{name}, p {p}", f"{r['ours']:.3f}", f"{r['float draws']:.3f}",
            f"{r['torch.rand']:.3f}", f"{r['bernoulli_']:.3f}", ratio_cell(r),
        ])  # fmt: skip
        raw[name] = r
    record.table(
        ["mask", "ours ms", "float draws ms", "torch.rand ms", "bernoulli_ ms",
         "float draws / ours"],
        rows,
        caption=f"one float32 keep mask, {args.threads} thread(s), median of {args.rounds} "
        f"rounds of {args.repeats} masks",
    )  # fmt: skip
    record.write(args.json, raw)


if __name__ == "__main__":
    main()
