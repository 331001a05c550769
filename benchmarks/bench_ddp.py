"""Data-parallel training throughput on the CPU: T-L3 on 1 vs 2 processes, one thread each.

The same global batch (``--batch`` rows of ``--seq-len`` tokens) is trained by one process
and by two (DistributedDataParallel, gloo, ``--batch / 2`` rows each), with the trainer's own
step (:func:`~highway_transformer.training.accumulation.accumulate_gradients`, clipping, the
optimizer). Printed: tokens/s of each, the scaling efficiency (2-process tokens/s over twice
the 1-process figure), and the communication share of a 2-process step, measured two ways:
the step with gradient all-reduce against the same step under ``no_sync``, and one
all-reduce of a gradient-sized buffer timed alone.

    python benchmarks/bench_ddp.py                     # T-L3 (d 512, 3 layers), ~2 minutes
    python benchmarks/bench_ddp.py --steps 10 --seq-len 256 --batch 8

On a machine with fewer free cores than processes the 2-process figures measure the
contention, not the method: the machine line printed first says how many cores there are.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import print_machine  # noqa: E402

from highway_transformer.api import build_model  # noqa: E402
from highway_transformer.presets import get_preset  # noqa: E402
from highway_transformer.runtime.strategies import Replicated  # noqa: E402
from highway_transformer.runtime.world import World  # noqa: E402
from highway_transformer.training.accumulation import accumulate_gradients  # noqa: E402
from highway_transformer.training.optim import build_optimizer  # noqa: E402

VOCAB = 50  # char PTB


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _timed_steps(step, steps: int) -> float:
    """Median seconds of ``steps`` calls after two warm-up calls."""
    for _ in range(2):
        step()
    times = []
    for _ in range(steps):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _worker(rank: int, size: int, args: argparse.Namespace, port: int, out: str) -> None:
    torch.set_num_threads(1)
    if size > 1:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=size)
    world = World(rank=rank, size=size)
    config = get_preset(args.preset).replace(
        **{"model.vocab_size": VOCAB, "model.dropout": 0.0, "train.optimizer": "adamw"}
    )
    torch.manual_seed(0)
    model = build_model(config.model)
    forward = Replicated().wrap(model, world)
    optimizer = build_optimizer(model.parameters(), config.train)
    rows = args.batch // size
    x = torch.randint(VOCAB, (rows, args.seq_len))
    y = torch.randint(VOCAB, (rows, args.seq_len))

    def micro() -> tuple[torch.Tensor, int]:
        return forward(x, targets=y, reduction="sum").loss, y.numel()

    def step() -> None:
        accumulate_gradients(forward, world, [micro])
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.train.clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    result = {"seconds": _timed_steps(step, args.steps)}
    if size > 1:
        with forward.no_sync():
            result["local_seconds"] = _timed_steps(step, args.steps)
        flat = torch.zeros(sum(p.numel() for p in model.parameters()))
        result["allreduce_seconds"] = _timed_steps(lambda: dist.all_reduce(flat), args.steps)
        slowest = [None] * size
        dist.all_gather_object(slowest, result)
        result = {k: max(r[k] for r in slowest) for k in result}  # a step waits for the slowest
        dist.destroy_process_group()
    result["parameters"] = sum(p.numel() for p in model.parameters())
    if rank == 0:
        Path(out).write_text(json.dumps(result), encoding="utf-8")


def measure(size: int, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "result.json")
        if size == 1:
            _worker(0, 1, args, 0, out)
        else:
            mp.spawn(_worker, args=(size, args, _free_port(), out), nprocs=size)
        return json.loads(Path(out).read_text(encoding="utf-8"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="ht-table1/t-l3")
    parser.add_argument("--batch", type=int, default=8, help="global batch (rows)")
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--steps", type=int, default=8, help="timed steps (median)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print_machine("cpu")
    # other work on the machine slows the two processes more than the one: say how busy it is
    print(f"load average (1 min) before the run: {os.getloadavg()[0]:.1f}")
    tokens = args.batch * args.seq_len
    one, two = measure(1, args), measure(2, args)
    tps1, tps2 = tokens / one["seconds"], tokens / two["seconds"]
    print(
        f"{args.preset}: {one['parameters'] / 1e6:.2f}M parameters, global batch "
        f"{args.batch} x {args.seq_len} tokens, fp32, 1 thread per process"
    )
    print(f"1 process : {one['seconds'] * 1e3:8.1f} ms/step  {tps1:8.0f} tokens/s")
    print(f"2 processes: {two['seconds'] * 1e3:8.1f} ms/step  {tps2:8.0f} tokens/s")
    print(f"scaling efficiency (2-process tokens/s / (2 x 1-process)): {tps2 / (2 * tps1):.0%}")
    share = max(0.0, 1 - two["local_seconds"] / two["seconds"])
    print(
        f"communication share of a 2-process step: {share:.0%} (step {two['seconds'] * 1e3:.1f} "
        f"ms vs {two['local_seconds'] * 1e3:.1f} ms under no_sync); one all-reduce of the "
        f"gradients alone: {two['allreduce_seconds'] * 1e3:.1f} ms "
        f"({two['allreduce_seconds'] / two['seconds']:.0%} of the step)"
    )


if __name__ == "__main__":
    main()
