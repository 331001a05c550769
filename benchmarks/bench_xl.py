"""Transformer-XL benchmarks (issue: relative attention and segment memory).

1. Training: tokens/s, peak memory and model FLOP utilisation of L6-XL at a CPU-sized width,
   plain vs σ-SDU on all layers vs GTrXL-GRU gating (pre-LN), against a matmul peak measured
   in the same run.
2. Evaluation on a long stream: XL with segment memory (segment ``--eval-seg``, memory
   ``--context``) versus a vanilla Transformer that recomputes its whole context window of
   ``--context`` tokens for every predicted token. Both predict the same number of tokens.

    python benchmarks/bench_xl.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    Record,
    add_json_argument,
    matmul_peak_flops,
    median_seconds,
    peak_rss_mib,
    print_machine,
)

from highway_transformer.api import build_model  # noqa: E402
from highway_transformer.config import GateConfig, MemoryConfig, ModelConfig  # noqa: E402
from highway_transformer.models.lm import count_flops_per_token  # noqa: E402


def xl_config(d_model: int, mem_len: int, gate: GateConfig, d_head: int = 64) -> ModelConfig:
    return ModelConfig(
        family="xl", attention="relative", vocab_size=204, d_model=d_model, n_layers=6,
        n_heads=max(d_model // d_head, 1), d_head=d_head, d_inner=4 * d_model, dropout=0.1,
        init="normal", memory=MemoryConfig(mem_len=mem_len), gate=gate,
    )  # fmt: skip


def train_child(
    gate: str, d_model: int, seq_len: int, batch: int, steps: int, d_head: int = 64
) -> dict:
    torch.manual_seed(0)
    gate_config = {
        "plain": GateConfig(),
        "sdu": GateConfig(kind="sdu", activation="sigmoid"),
        "gtrxl-gru": GateConfig(kind="gtrxl-gru", bias=2.0),
    }[gate]
    config = xl_config(d_model, seq_len, gate_config, d_head)
    if gate == "gtrxl-gru":
        config.norm = "pre"  # GTrXL: identity-map reordering
    model = build_model(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    memory = [None]
    x = torch.randint(0, 204, (batch, seq_len))

    def step() -> None:
        hidden, memory[0] = model(x, memory=memory[0])
        loss = model.token_nll(hidden, x).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    seconds = median_seconds(step, steps, warmup=2)
    tokens = batch * seq_len
    return {
        "gate": gate,
        "tokens_per_s": tokens / seconds,
        "flops_per_s": count_flops_per_token(config, seq_len) * tokens / seconds,
        "peak_rss_mib": peak_rss_mib(),
        "parameters": model.num_parameters(),
    }


@torch.no_grad()
def eval_speed(d_model: int, context: int, segment: int, n_predict: int) -> dict:
    torch.manual_seed(0)
    stream = torch.randint(0, 204, (1, context + n_predict))
    xl = build_model(xl_config(d_model, context, GateConfig())).eval()
    vanilla_config = ModelConfig(
        vocab_size=204, d_model=d_model, n_layers=6, n_heads=max(d_model // 64, 1),
        d_inner=4 * d_model, dropout=0.0, init="normal",
    )  # fmt: skip
    vanilla = build_model(vanilla_config).eval()
    # XL: warm the memory with the first `context` tokens, then predict n_predict tokens
    # segment by segment: every prediction sees up to context + segment previous tokens.
    _, memory = xl(stream[:, :context])
    start = time.perf_counter()
    for a in range(context, context + n_predict, segment):
        _, memory = xl(stream[:, a : a + segment], memory=memory)
    xl_seconds = time.perf_counter() - start
    start = time.perf_counter()
    for t in range(context, context + n_predict):
        hidden, _ = vanilla(stream[:, t - context + 1 : t + 1])
        vanilla.logits(hidden[:, -1])
    vanilla_seconds = time.perf_counter() - start
    return {
        "xl_tokens_per_s": n_predict / xl_seconds,
        "vanilla_tokens_per_s": n_predict / vanilla_seconds,
        "speedup": vanilla_seconds / xl_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--eval-seg", type=int, default=64)
    parser.add_argument("--predict", type=int, default=128)
    parser.add_argument("--d-head", type=int, default=64, help="heads of this width")
    parser.add_argument(
        "--threads", type=int, default=0, help="threads per process (0: torch's default)"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    add_json_argument(parser)
    args = parser.parse_args()
    if args.threads:  # the matmul peak and every child alike
        torch.set_num_threads(args.threads)
    if args.child:
        shape = (args.d_model, args.seq_len, args.batch, args.steps, args.d_head)
        print(json.dumps(train_child(args.child, *shape)))
        return
    print_machine()
    record = Record()
    peak = matmul_peak_flops(torch.float32)
    runs: dict[str, list[dict]] = {"plain": [], "sdu": [], "gtrxl-gru": []}
    for _ in range(args.rounds):
        for gate in runs:
            cmd = [sys.executable, __file__, "--child", gate, "--d-model", str(args.d_model),
                   "--seq-len", str(args.seq_len), "--batch", str(args.batch),
                   "--steps", str(args.steps), "--d-head", str(args.d_head),
                   "--threads", str(args.threads)]  # fmt: skip
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            runs[gate].append(json.loads(out.strip().splitlines()[-1]))
    plain = statistics.median(r["tokens_per_s"] for r in runs["plain"])
    rows = []
    for gate, rs in runs.items():
        tps = statistics.median(r["tokens_per_s"] for r in rs)
        mfu = statistics.median(r["flops_per_s"] for r in rs) / peak
        rows.append([gate, f"{rs[0]['parameters']:,}", f"{tps:,.0f}", f"{tps / plain:.3f}",
                     f"{mfu:.1%}", f"{max(r['peak_rss_mib'] for r in rs):,.0f}"])  # fmt: skip
    record.table(
        ["gate", "params", "tokens/s", "vs plain", "MFU", "peak RSS MiB"],
        rows,
        caption=f"L6-XL d_model {args.d_model} (d_inner {4 * args.d_model}, heads of "
        f"{args.d_head}), segment {args.seq_len} = memory, batch {args.batch}, fp32, "
        f"{torch.get_num_threads()} thread(s); matmul peak {peak / 1e9:.1f} GFLOP/s",
    )
    speed = eval_speed(args.d_model, args.context, args.eval_seg, args.predict)
    print()
    record.note(
        f"Evaluation, context {args.context}, {args.predict} predicted tokens: XL with memory "
        f"{speed['xl_tokens_per_s']:,.1f} tok/s (segments of {args.eval_seg}), vanilla "
        f"recompute {speed['vanilla_tokens_per_s']:,.1f} tok/s: {speed['speedup']:.0f}x faster"
    )
    record.write(args.json, {"matmul_peak_flops": peak, "training": runs, "evaluation": speed})


if __name__ == "__main__":
    main()
