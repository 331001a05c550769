"""Forward+backward throughput of the T-L3 (or RT-L3) char-PTB configuration per gate.

For each gate (plain, σ-SDU on all layers, highway, gated MHDPA) the script builds the
HT A.1 model (3 layers, d 512, 8 heads, d_ff 2048, sequence 400, batch 16, 50 symbols),
times full training steps (forward, backward, SGD update) and reports tokens/s, peak
memory and model FLOP utilisation (MFU): model FLOPs per second over the FLOP/s of a large
square matmul measured in the same run and precision. Each variant runs in its own
subprocess so that its peak memory (``ru_maxrss``) is its own; variants are interleaved
over ``--rounds`` rounds and the median is reported, because shared machines are noisy.

    python benchmarks/bench_gates.py                 # fp32 and bf16 autocast
    python benchmarks/bench_gates.py --precision fp32 --batch 8 --rounds 3
    python benchmarks/bench_gates.py --preset ht-table2/rt-l3 --gates plain,sdu-sigmoid
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
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
from highway_transformer.config import GateConfig  # noqa: E402
from highway_transformer.models.lm import count_flops_per_token  # noqa: E402
from highway_transformer.presets import get_preset  # noqa: E402
from highway_transformer.runtime.hardware import cpu_native  # noqa: E402
from highway_transformer.tasks.lm_scoring import autocast_context  # noqa: E402

GATES = {
    "plain": GateConfig(kind="none"),
    "sdu-sigmoid": GateConfig(kind="sdu", activation="sigmoid"),
    "highway": GateConfig(kind="highway"),
    "gated-mhdpa": GateConfig(kind="gated"),
}


def child(gate: str, precision: str, batch: int, seq_len: int, steps: int, preset: str) -> dict:
    torch.manual_seed(0)
    config = get_preset(preset)
    config.model.gate = GATES[gate]
    config.model.vocab_size = 50
    model = build_model(config.model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randint(0, 50, (batch, seq_len))
    y = torch.randint(0, 50, (batch, seq_len))
    device = torch.device("cpu")

    def step() -> None:
        with autocast_context(device, precision):
            hidden, _ = model(x)
        loss = model.token_nll(hidden, y).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    seconds = median_seconds(step, steps, warmup=2)
    tokens = batch * seq_len
    flops = count_flops_per_token(config.model, seq_len) * tokens
    return {
        "gate": gate,
        "seconds_per_step": seconds,
        "tokens_per_s": tokens / seconds,
        "model_flops_per_s": flops / seconds,
        "peak_rss_mib": peak_rss_mib(),
        "parameters": model.num_parameters(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", choices=["fp32", "bf16", "both"], default="both")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=400)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds per variant")
    parser.add_argument("--preset", default="ht-table1/t-l3")
    parser.add_argument("--gates", default=",".join(GATES), help="comma-separated subset")
    parser.add_argument("--child", nargs=2, metavar=("GATE", "PRECISION"), help=argparse.SUPPRESS)
    add_json_argument(parser)
    args = parser.parse_args()
    if args.child:
        result = child(
            args.child[0], args.child[1], args.batch, args.seq_len, args.steps, args.preset
        )
        print(json.dumps(result))
        return
    print_machine()
    record = Record()
    precisions = ["fp32", "bf16"] if args.precision == "both" else [args.precision]
    if "bf16" in precisions and not cpu_native("bf16"):
        record.note("bf16 skipped: this CPU has no native bf16 (autocast would be emulated)")
        precisions.remove("bf16")
    record.note(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, preset {args.preset}, "
        f"batch {args.batch} x {args.seq_len} tokens"
    )
    raw: dict[str, dict] = {}
    for precision in precisions:
        peak = matmul_peak_flops(torch.float32 if precision == "fp32" else torch.bfloat16)
        runs: dict[str, list[dict]] = {g: [] for g in args.gates.split(",")}
        for _ in range(args.rounds):
            for gate in runs:
                cmd = [
                    sys.executable,
                    __file__,
                    "--child",
                    gate,
                    precision,
                    "--batch",
                    str(args.batch),
                    "--seq-len",
                    str(args.seq_len),
                    "--steps",
                    str(args.steps),
                    "--preset",
                    args.preset,
                ]
                out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
                runs[gate].append(json.loads(out.strip().splitlines()[-1]))
        plain_tps = statistics.median(r["tokens_per_s"] for r in runs["plain"])
        rows = []
        for gate, rs in runs.items():
            tps = statistics.median(r["tokens_per_s"] for r in rs)
            mfu = statistics.median(r["model_flops_per_s"] for r in rs) / peak
            rows.append([
                gate, f"{rs[0]['parameters']:,}", f"{tps:,.0f}", f"{tps / plain_tps:.3f}",
                f"{statistics.median(r['seconds_per_step'] for r in rs):.3f}", f"{mfu:.1%}",
                f"{max(r['peak_rss_mib'] for r in rs):,.0f}",
            ])  # fmt: skip
        print()
        record.table(
            ["gate", "params", "tokens/s", "vs plain", "step s", "MFU", "peak RSS MiB"],
            rows,
            caption=f"{precision}: matmul peak {peak / 1e9:.1f} GFLOP/s (best large matmul, "
            "same run)",
        )
        raw[precision] = {"matmul_peak_flops": peak, "runs": runs}
    record.write(args.json, raw)


if __name__ == "__main__":
    main()
