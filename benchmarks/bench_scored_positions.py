"""A language model's training step when it scores only the end of its window: the last
block's FFN, the final norm and the output dropout on the scored positions alone (what
``forward`` does given targets) against the whole window's hidden states sliced afterwards
(the reference code's ``pred_hid = hidden[-tgt_len:]``, and this library before), in one
process, interleaved over rounds, on random tokens over a 10,000-word vocabulary (word PTB).
The two give the same loss and gradients (``tests/models/test_lm.py``).

    python benchmarks/bench_scored_positions.py
    python benchmarks/bench_scored_positions.py --threads 2
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Record, interleaved_ms, parse_timing_arguments, ratio_cell  # noqa: E402

#: Presets whose windows score their end (word PTB at the paper's size: 80 tokens, last 40).
PRESETS = ("ht-table3/t-l3", "ht-table3/t-l3+sigmoid", "ht-table4/rt-l3")
VOCAB = 10_000


def losses(model: torch.nn.Module, tokens: torch.Tensor, targets: torch.Tensor) -> dict:
    """The mean NLL of ``targets`` (the last positions of ``tokens``) both ways."""

    def whole() -> torch.Tensor:
        hidden, _ = model(tokens)
        return model.summed_nll(hidden[:, -targets.shape[1] :], targets) / targets.numel()

    def scored() -> torch.Tensor:
        return model(tokens, targets=targets, reduction="mean").loss

    return {"scored": scored, "whole": whole}


def setting(preset: str, vocab: int = VOCAB) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    """``preset``'s model over ``vocab`` symbols, training, and one random window of its
    batch with the targets of its scored end."""
    from highway_transformer.api import build_model
    from highway_transformer.presets import get_preset

    config = get_preset(preset)
    model = build_model(config.replace(**{"model.vocab_size": vocab}).model).train()
    d = config.data
    tokens = torch.randint(0, vocab, (d.batch_size, d.seq_len))
    targets = torch.randint(0, vocab, (d.batch_size, d.seq_len - d.context))
    return model, tokens, targets


def measure(preset: str, rounds: int, repeats: int, vocab: int = VOCAB) -> dict:
    model, tokens, targets = setting(preset, vocab)
    optimiser = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step(loss: Callable[[], torch.Tensor]) -> Callable[[], None]:
        def call() -> None:
            optimiser.zero_grad(set_to_none=True)
            loss().backward()
            optimiser.step()

        return call

    calls = {name: step(loss) for name, loss in losses(model, tokens, targets).items()}
    result = interleaved_ms(calls, rounds, repeats, ratio=("whole", "scored"))
    return {**result, "window": list(tokens.shape), "scored_positions": targets.shape[1]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args = parse_timing_arguments(parser, argv, rounds=9, repeats=3)
    record, rows, raw = Record(), [], {}
    for preset in PRESETS:
        r = measure(preset, args.rounds, args.repeats)
        (batch, length), scored = r["window"], r["scored_positions"]
        rows.append([f"{preset} ({batch} × {length}, last {scored} scored)",
                     f"{r['scored']:.1f}", f"{r['whole']:.1f}", ratio_cell(r)])  # fmt: skip
        raw[preset] = r
    record.table(
        ["training step", "scored tail ms", "whole window ms", "whole / scored"],
        rows,
        caption=f"forward + backward + SGD, fp32, {args.threads} thread(s), V {VOCAB:,}, "
        f"random tokens, median of {args.rounds} rounds of {args.repeats} steps",
    )
    record.write(args.json, raw)


if __name__ == "__main__":
    main()
