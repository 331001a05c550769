"""Generation speed: Transformer-XL decoding from its memory against the Transformer's KV
cache and against recomputing the whole context, in one run.

Both models have the T-L3 size of ``bench_vs_xtransformers.py`` (d 128, 3 layers, 8 heads,
d_inner 512, 50 symbols); greedy decoding of ``--tokens`` symbols after a ``--prompt``-symbol
prompt, batch 1, one thread. Variants:

* ``transformer kv-cache`` / ``transformer recompute``: ``generate_ids`` with and without
  ``use_cache``;
* ``xl cached``: ``generate_ids``: each token a segment of length 1 over the memory, with
  each layer's keys/values and position keys cached;
* ``xl memory``: the same memory decoding without those caches (every step re-projects the
  whole memory: what generation did before the caches);
* ``xl recompute``: ``use_cache=False``.

Variants are interleaved over ``--rounds`` rounds; the median tokens/s is reported.

    python benchmarks/bench_generate.py
    python benchmarks/bench_generate.py --prompt 200 --tokens 400 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Record, add_json_argument, add_shape_arguments, print_machine  # noqa: E402

from highway_transformer.api import build_model  # noqa: E402
from highway_transformer.config import MemoryConfig, ModelConfig  # noqa: E402
from highway_transformer.models.generation import generate_ids  # noqa: E402
from highway_transformer.models.lm import LanguageModel  # noqa: E402
from highway_transformer.nn.memory import MemoryPolicy  # noqa: E402

VOCAB = 50


def model_of(family: str, args: argparse.Namespace) -> LanguageModel:
    torch.manual_seed(0)
    config = ModelConfig(
        family=family,
        vocab_size=VOCAB,
        d_model=args.d_model,
        n_layers=args.layers,
        n_heads=args.heads,
        d_inner=args.d_inner,
        dropout=0.0,
    )
    if family == "xl":  # a memory that holds the whole context: exact, as a KV cache
        config.memory = MemoryConfig(mem_len=args.prompt + args.tokens)
    return build_model(config).eval()


@torch.no_grad()
def memory_without_caches(model: LanguageModel, prompt: list[int], n_tokens: int) -> list[int]:
    """Greedy XL decoding through the memory argument alone (no per-layer caches)."""
    policy = MemoryPolicy(len(prompt) + n_tokens)
    hidden, memory = model(torch.tensor([prompt]), policy=policy)
    out: list[int] = []
    for _ in range(n_tokens):
        token = model.logits(hidden[:, -1]).argmax(-1)
        out.append(int(token))
        hidden, memory = model(token[:, None], memory=memory, policy=policy)
    return out


def variants(args: argparse.Namespace, prompt: list[int]) -> dict[str, Callable[[], list[int]]]:
    transformer, xl = model_of("transformer", args), model_of("xl", args)
    n = args.tokens
    return {
        "transformer kv-cache": lambda: generate_ids(transformer, prompt, n, temperature=0),
        "transformer recompute": lambda: generate_ids(
            transformer, prompt, n, temperature=0, use_cache=False
        ),
        "xl cached": lambda: generate_ids(xl, prompt, n, temperature=0),
        "xl memory": lambda: memory_without_caches(xl, prompt, n),
        "xl recompute": lambda: generate_ids(xl, prompt, n, temperature=0, use_cache=False),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shape_arguments(parser)
    parser.add_argument("--prompt", type=int, default=100, help="prompt length")
    parser.add_argument("--tokens", type=int, default=200, help="new tokens per run")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    add_json_argument(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print_machine()
    record = Record()
    prompt = torch.randint(0, VOCAB, (args.prompt,), generator=torch.Generator().manual_seed(0))
    runs = variants(args, prompt.tolist())
    outputs = {name: run() for name, run in runs.items()}  # warm-up; greedy ids must agree
    for family in ("transformer", "xl"):
        same = {tuple(ids) for name, ids in outputs.items() if name.startswith(family)}
        record.note(f"{family}: all variants generate the same ids: {len(same) == 1}")
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    rates = {name: args.tokens / statistics.median(values) for name, values in times.items()}
    record.table(
        ["variant", "tokens/s"],
        [[name, f"{rate:.1f}"] for name, rate in rates.items()],
        caption=f"greedy generation, d {args.d_model}, {args.layers} layers, {args.heads} heads, "
        f"d_inner {args.d_inner}, prompt {args.prompt}, {args.tokens} new tokens, batch 1, "
        f"fp32; median of {args.rounds} interleaved rounds",
    )
    record.write(args.json, {"tokens_per_s": rates, "seconds": times})


if __name__ == "__main__":
    main()
