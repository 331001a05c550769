"""The output layer and its summed cross-entropy on the CPU, forward + backward: ours
(``nn.linear_cross_entropy``: a block of rows at a time, gradients in the forward) against
``F.cross_entropy(F.linear(...), reduction="sum")`` (what the model ran before, and what users
would write), at the output shapes of the LM presets, interleaved over rounds. Prints
milliseconds per call (median of rounds) and torch's time over ours.

    python benchmarks/bench_linear_cross_entropy.py
    python benchmarks/bench_linear_cross_entropy.py --threads 2
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

from highway_transformer.nn.linear_cross_entropy import linear_cross_entropy  # noqa: E402

#: name -> (target rows a step, d_model, vocabulary): the output layer of each preset's step
#: (a word-PTB window of 80 scores its last 40 positions: 16 x 40 rows).
SHAPES = {
    "ht-table1/t-l3 char PTB, cpu (50 symbols)": (16 * 130, 128, 50),
    "ht-table3/t-l3, ht-table4/rt-l3 word PTB, paper": (16 * 40, 128, 10_000),
    "the same, all 80 positions scored": (16 * 80, 128, 10_000),
    "word PTB at d 512": (16 * 40, 512, 10_000),
    "a 1,000-word vocabulary (the threshold)": (16 * 80, 128, 1_000),
}
#: Presets whose whole training step is timed both ways (word PTB, paper size).
STEP_PRESETS = ("ht-table3/t-l3", "ht-table4/rt-l3")


def variants() -> dict[str, Callable[..., torch.Tensor]]:
    return {
        "ours": linear_cross_entropy,
        "torch": lambda x, w, b, t: F.cross_entropy(F.linear(x, w, b), t, reduction="sum"),
    }


def measure(shape: tuple[int, int, int], rounds: int, repeats: int) -> dict:
    rows, d_model, vocab = shape
    x = torch.randn(rows, d_model, requires_grad=True)
    w = (torch.randn(vocab, d_model) * d_model**-0.5).requires_grad_()
    b = torch.zeros(vocab, requires_grad=True)
    t = torch.randint(0, vocab, (rows,))

    def fwd_bwd(fn: Callable[..., torch.Tensor]) -> Callable[[], None]:
        def call() -> None:
            x.grad = w.grad = b.grad = None
            fn(x, w, b, t).backward()

        return call

    calls = {name: fwd_bwd(fn) for name, fn in variants().items()}
    return interleaved_ms(calls, rounds, repeats, ratio=("torch", "ours"))


def step_measure(preset: str, vocab: int, rounds: int, repeats: int) -> dict:
    """A whole training step (forward, backward, SGD) of ``preset``'s model over ``vocab``
    symbols on random tokens, in this process, with the blocks and with torch's route (the
    model's per-token NLL summed), interleaved: machine load hits both alike."""
    from highway_transformer.api import build_model
    from highway_transformer.models import lm
    from highway_transformer.presets import get_preset

    config = get_preset(preset)
    model = build_model(config.replace(**{"model.vocab_size": vocab}).model).train()
    optimiser = torch.optim.SGD(model.parameters(), lr=1e-3)
    d = config.data
    tokens = torch.randint(0, vocab, (d.batch_size, d.seq_len))  # a training window
    targets = torch.randint(0, vocab, (d.batch_size, d.seq_len - d.context))  # its scored end

    def step(blocks: bool) -> Callable[[], None]:
        def call() -> None:
            lm.takes_row_blocks = module_route if blocks else (lambda *args: False)
            optimiser.zero_grad(set_to_none=True)
            model(tokens, targets=targets, reduction="sum").loss.backward()
            optimiser.step()

        return call

    module_route = lm.takes_row_blocks
    try:
        calls = {"ours": step(True), "torch": step(False)}
        return interleaved_ms(calls, rounds, repeats, ratio=("torch", "ours"))
    finally:
        lm.takes_row_blocks = module_route


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args = parse_timing_arguments(parser, argv, rounds=5, repeats=5)
    record = Record()
    rows, raw = [], {}
    for name, shape in SHAPES.items():
        r = measure(shape, args.rounds, args.repeats)
        rows.append([f"{name} {shape}", f"{r['ours']:.2f}", f"{r['torch']:.2f}",
                     ratio_cell(r)])  # fmt: skip
        raw[name] = r
    record.table(
        ["output layer + summed NLL (rows, d_model, V)", "ours ms", "torch ms", "torch / ours"],
        rows,
        caption=f"forward + backward, fp32, {args.threads} thread(s), median of {args.rounds} "
        f"rounds of {args.repeats} calls",
    )
    steps = []
    for preset in STEP_PRESETS:
        r = step_measure(preset, 10_000, args.rounds, args.repeats)
        steps.append([f"{preset} (word PTB, V 10,000)", f"{r['ours']:.1f}", f"{r['torch']:.1f}",
                      ratio_cell(r)])  # fmt: skip
        raw[f"step {preset}"] = r
    record.table(
        ["whole training step at the paper's size", "ours ms", "torch route ms", "torch / ours"],
        steps,
        caption=f"forward + backward + SGD, fp32, {args.threads} thread(s), random tokens, "
        f"median of {args.rounds} rounds of {args.repeats} steps",
    )
    record.write(args.json, raw)


if __name__ == "__main__":
    main()
