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
    python benchmarks/bench_gates.py --table gates-eras --precision fp32   # a table's own rows

``--table T`` times the rows of a registered table as ``highway run T --scale S`` trains them
(``--scale``, default ``short``; their own batch, length and AdamW), and sets each row's extra
CPU time per step over the table's first row against its FLOP bound: the row's extra matmul
FLOPs per step (``count_flops_per_token``) at the first row's measured FLOP rate, the time the
gate would cost if it ran as fast as the rest of the model.
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
    median_wall_and_cpu,
    peak_rss_mib,
    print_machine,
)

from highway_transformer.api import build_model  # noqa: E402
from highway_transformer.config import Config, GateConfig  # noqa: E402
from highway_transformer.experiments.plan import experiment_config  # noqa: E402
from highway_transformer.experiments.registry import get_experiment, table_experiments  # noqa: E402
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


def _config(gate: str, preset: str, table: str | None, scale: str) -> Config:
    """The timed model's config: a table's row as it trains, or ``preset`` with ``gate``."""
    if table:
        return experiment_config(get_experiment(gate), scale)
    config = get_preset(preset)
    config.model.gate = GATES[gate]
    return config


def child(gate: str, precision: str, args: argparse.Namespace) -> dict:
    torch.manual_seed(0)
    config = _config(gate, args.preset, args.table, args.scale)
    config.model.vocab_size = 50
    model = build_model(config.model)
    if args.table:  # the table's rows train with AdamW: time its update too
        optimizer: torch.optim.Optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        batch, seq_len = config.data.batch_size, config.data.seq_len
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        batch, seq_len = args.batch, args.seq_len
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

    seconds, cpu_seconds = median_wall_and_cpu(step, args.steps, warmup=2)
    tokens = batch * seq_len
    flops = count_flops_per_token(config.model, seq_len) * tokens
    return {
        "gate": gate,
        "seconds_per_step": seconds,
        "cpu_seconds_per_step": cpu_seconds,
        "tokens_per_s": tokens / seconds,
        "model_flops_per_s": flops / seconds,
        "flops_per_step": flops,
        "peak_rss_mib": peak_rss_mib(),
        "parameters": model.num_parameters(),
    }


def _child_command(gate: str, precision: str, args: argparse.Namespace) -> list[str]:
    command = [sys.executable, __file__, "--child", gate, precision, "--batch", str(args.batch),
               "--seq-len", str(args.seq_len), "--steps", str(args.steps), "--preset",
               args.preset, "--scale", args.scale]  # fmt: skip
    return command + (["--table", args.table] if args.table else [])


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _gate_rows(runs: dict[str, list[dict]], peak: float, table: bool) -> list[list[str]]:
    """One table row per gate; with ``table``, the extra CPU ms a step over the first row and
    its FLOP bound at the first row's FLOP rate."""
    base = runs[next(iter(runs))]
    base_tps, base_cpu = _median(base, "tokens_per_s"), _median(base, "cpu_seconds_per_step")
    rate = _median(base, "flops_per_step") / base_cpu  # FLOP per CPU-second of the first row
    rows = []
    for gate, rs in runs.items():
        tps = _median(rs, "tokens_per_s")
        row = [gate, f"{rs[0]['parameters']:,}", f"{tps:,.0f}", f"{tps / base_tps:.3f}",
               f"{_median(rs, 'seconds_per_step'):.3f}",
               f"{_median(rs, 'model_flops_per_s') / peak:.1%}",
               f"{max(r['peak_rss_mib'] for r in rs):,.0f}"]  # fmt: skip
        if table:
            extra = _median(rs, "cpu_seconds_per_step") - base_cpu
            bound = (_median(rs, "flops_per_step") - _median(base, "flops_per_step")) / rate
            row += [f"{1e3 * extra:+.1f}", f"{1e3 * bound:.1f}"]
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", choices=["fp32", "bf16", "both"], default="both")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=400)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds per variant")
    parser.add_argument("--preset", default="ht-table1/t-l3")
    parser.add_argument("--gates", default=",".join(GATES), help="comma-separated subset")
    parser.add_argument("--table", help="time this registered table's rows instead of --gates")
    parser.add_argument("--scale", default="short", help="the scale --table's rows train at")
    parser.add_argument("--child", nargs=2, metavar=("GATE", "PRECISION"), help=argparse.SUPPRESS)
    add_json_argument(parser)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args)))
        return
    print_machine()
    record = Record()
    precisions = ["fp32", "bf16"] if args.precision == "both" else [args.precision]
    if "bf16" in precisions and not cpu_native("bf16"):
        record.note("bf16 skipped: this CPU has no native bf16 (autocast would be emulated)")
        precisions.remove("bf16")
    gates = [e.name for e in table_experiments(args.table)] if args.table else args.gates.split(",")
    shape = (
        f"table {args.table} at --scale {args.scale} (the rows' own batch and length, AdamW)"
        if args.table
        else f"preset {args.preset}, batch {args.batch} x {args.seq_len} tokens"
    )
    record.note(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {shape}")
    raw: dict[str, dict] = {}
    header = ["gate", "params", "tokens/s", "vs first", "step s", "MFU", "peak RSS MiB"]
    if args.table:
        header += ["extra CPU ms/step", "FLOP bound ms/step"]
    for precision in precisions:
        peak = matmul_peak_flops(torch.float32 if precision == "fp32" else torch.bfloat16)
        runs: dict[str, list[dict]] = {g: [] for g in gates}
        for _ in range(args.rounds):
            for gate in runs:
                command = _child_command(gate, precision, args)
                out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
                runs[gate].append(json.loads(out.strip().splitlines()[-1]))
        print()
        record.table(
            header,
            _gate_rows(runs, peak, bool(args.table)),
            caption=f"{precision}: matmul peak {peak / 1e9:.1f} GFLOP/s (best large matmul, "
            "same run)"
            + ("; FLOP bound: the row's extra FLOPs at the first row's FLOP per CPU-second"
               if args.table else ""),
        )  # fmt: skip
        raw[precision] = {"matmul_peak_flops": peak, "runs": runs}
    record.write(args.json, raw)


if __name__ == "__main__":
    main()
