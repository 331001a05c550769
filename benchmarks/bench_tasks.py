"""Tasks beyond language modelling: Nottingham convergence and encoder-decoder throughput.

(a) Nottingham (RT Table 2 preset, R-Transformer 3 layers, d 160, GRU window 6, one piece a
    step): the same number of training steps for the plain model and the σ-SDU model (HT
    eqs. 21-24), same seed and data order; prints the validation NLL per time step after
    each evaluation. By default Adam (lr 1e-3) replaces the RT code's slow SGD schedule so a
    short budget gets somewhere (``--optimizer preset`` keeps the preset's). The HT claim is
    faster convergence: the gated model should be lower at equal steps.
(b) Encoder-decoder on the toy translation task: training tokens/s (target tokens, forward +
    backward + Adam) per attention score function and per gate.

    python benchmarks/bench_tasks.py                      # both, about 3 minutes on 2 cores
    python benchmarks/bench_tasks.py --part music --steps 1000 --eval-every 250
    python benchmarks/bench_tasks.py --data-dir PATH      # where music/Nottingham.mat is

The music part needs the Nottingham file (``--data-dir``, default ``../shared/data`` beside
the repository); it is skipped with a message when the file is absent.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median_seconds, print_machine  # noqa: E402

from highway_transformer.config import GateConfig  # noqa: E402
from highway_transformer.data.seq2seq import make_toy_pairs, toy_batch, toy_vocabs  # noqa: E402
from highway_transformer.errors import DataError  # noqa: E402
from highway_transformer.models.encoder_decoder import EncoderDecoder  # noqa: E402
from highway_transformer.nn.scores import SCORES  # noqa: E402
from highway_transformer.presets.rt_tables import rt_nottingham, seq2seq_toy  # noqa: E402
from highway_transformer.training.trainer import train  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def music(args: argparse.Namespace) -> dict:
    results = {}
    for label, gate in (
        ("plain", GateConfig(kind="none")),
        ("sdu-sigmoid", GateConfig(kind="sdu", activation="sigmoid")),
    ):
        config = rt_nottingham("rtransformer", gate).replace(
            **{
                "data.path": str(args.data_dir),
                "train.max_steps": args.steps,
                "train.eval_interval": args.eval_every,
                "train.seed": args.seed,
                "train.threads": args.threads,
                "train.device": "cpu",
            }
        )
        if args.optimizer == "adam":
            config = config.replace(
                **{"train.optimizer": "adam", "train.lr": 1e-3, "train.schedule": "constant"}
            )
        with tempfile.TemporaryDirectory() as out:
            started = time.perf_counter()
            try:
                summary = train(config, out, progress=False)
            except DataError as exc:
                print(f"music part skipped: {exc}")
                return {}
            wall = time.perf_counter() - started
            lines = (Path(out) / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
            curve = [
                (r["step"], round(r["loss"], 4))
                for r in map(json.loads, lines)
                if r["split"] == "valid"
            ]
        results[label] = {
            "valid_nll_curve": curve,
            "best_valid_nll": summary["valid"]["nll"],
            "test_nll": summary["test"]["nll"],
            "train_seconds": round(summary["train_seconds"], 1),
            "wall_seconds": round(wall, 1),
            "parameters": summary["parameters"],
        }
        print(
            f"Nottingham RT-L3 {label:<12} {args.steps} steps ({args.optimizer}): valid NLL "
            f"{' -> '.join(f'{v:.3f}@{s}' for s, v in curve)}; best {summary['valid']['nll']:.3f}"
            f", test {summary['test']['nll']:.3f}; {summary['train_seconds']:.0f} s training",
            flush=True,
        )
    return results


def seq2seq(args: argparse.Namespace) -> dict:
    src_vocab, tgt_vocab = toy_vocabs()
    batch = toy_batch(make_toy_pairs(64, 3, 8, seed=0), src_vocab, tgt_vocab)
    tokens = int((batch["tgt_out"] != 0).sum())
    variants = [(score, "none") for score in SCORES]
    variants += [("scaled_dot", gate) for gate in ("sdu", "highway", "gated")]
    steps = {}
    for score, gate in variants:
        config = seq2seq_toy()
        config.model.gate = GateConfig(kind=gate)
        torch.manual_seed(0)
        model = EncoderDecoder(config.model, len(src_vocab), len(tgt_vocab), score, max_len=16)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step(model: EncoderDecoder = model, optimizer: torch.optim.Optimizer = optimizer):
            logits = model(batch["src"], batch["tgt_in"])
            loss = model.token_nll(logits, batch["tgt_out"]).sum() / tokens
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        steps[(score, gate)] = step
    # variants interleaved over rounds, median of the rounds: shared machines are noisy
    timings: dict[tuple[str, str], list[float]] = {key: [] for key in steps}
    for _ in range(args.rounds):
        for key, step in steps.items():
            timings[key].append(median_seconds(step, repeats=args.repeats, warmup=2))
    results = {}
    for (score, gate), times in timings.items():
        seconds = statistics.median(times)
        rate = tokens / seconds
        results[f"{score}/{gate}"] = round(rate)
        print(
            f"encoder-decoder 2+2 layers d 32, batch 64 ({tokens} target tokens), score "
            f"{score:<10} gate {gate:<8}: {rate:9,.0f} target tokens/s "
            f"({seconds * 1e3:.1f} ms/step)",
            flush=True,
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["music", "seq2seq", "both"], default="both")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--steps", type=int, default=600, help="music training steps per model")
    parser.add_argument("--eval-every", type=int, default=200)
    parser.add_argument(
        "--optimizer",
        choices=["adam", "preset"],
        default="adam",
        help="adam: Adam lr 1e-3 (a short budget); preset: the RT code's SGD schedule",
    )
    parser.add_argument("--seed", type=int, default=1111)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--repeats", type=int, default=10, help="timed seq2seq steps a round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print_machine()
    out = {"torch": torch.__version__, "threads": args.threads}
    if args.part in ("music", "both"):
        out["music"] = music(args)
    if args.part in ("seq2seq", "both"):
        out["seq2seq_tokens_per_second"] = seq2seq(args)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
