"""Shared helpers for the benchmark scripts: timing, matmul peak, peak memory, JSON records."""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import torch

from highway_transformer.runtime.hardware import cpu_flags, describe, describe_line


def _synchronize() -> None:
    """Wait for queued GPU work, so that a timing covers the kernels it launched, and only
    those."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def median_seconds(fn: Callable[[], None], repeats: int, warmup: int = 1) -> float:
    return median_wall_and_cpu(fn, repeats, warmup)[0]


def median_wall_and_cpu(
    fn: Callable[[], None], repeats: int, warmup: int = 1
) -> tuple[float, float]:
    """Median seconds per call of ``fn``: wall time, and this process's CPU time (what the
    call cost its threads, which other processes on a busy machine inflate far less)."""
    for _ in range(warmup):
        fn()
    wall, cpu = [], []
    for _ in range(repeats):
        _synchronize()  # the warm-up's (or previous call's) kernels are not this call's
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        _synchronize()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def interleaved_ms(
    calls: dict[str, Callable[[], None]], rounds: int, repeats: int, ratio: tuple[str, str]
) -> dict:
    """Milliseconds per call of each of ``calls``, timed in turn over ``rounds`` (median of
    ``repeats`` a round, then of the rounds), with ``ratio``: the first named call's time
    over the second's, the median of the rounds, and its ``range`` over them; and the same
    ratio of CPU time (``cpu_ratio``, ``cpu_range``): on a machine shared with other work
    the wall-time ratio can move by several percent from run to run, the CPU-time one less."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    ratios, cpu_ratios = [], []
    for _ in range(rounds):
        now = {name: median_wall_and_cpu(call, repeats) for name, call in calls.items()}
        for name, (wall, _) in now.items():
            times[name].append(wall * 1e3)
        ratios.append(now[ratio[0]][0] / now[ratio[1]][0])
        cpu_ratios.append(now[ratio[0]][1] / max(now[ratio[1]][1], 1e-9))
    return {name: statistics.median(ms) for name, ms in times.items()} | {
        "ratio": statistics.median(ratios),
        "range": (min(ratios), max(ratios)),
        "cpu_ratio": statistics.median(cpu_ratios),
        "cpu_range": (min(cpu_ratios), max(cpu_ratios)),
    }


def matmul_peak_flops(dtype: torch.dtype, device: str = "cpu", repeats: int = 5) -> float:
    """Best achieved FLOP/s over a few large matmuls (squares and a Transformer-FFN shape):
    the peak that model FLOP utilisation is measured against, in the same run."""
    shapes = [(2048, 2048, 2048), (3072, 3072, 3072), (6400, 512, 2048), (6400, 2048, 512)]
    best = 0.0
    for m, k, n in shapes:
        a = torch.randn(m, k, device=device).to(dtype)
        b = torch.randn(k, n, device=device).to(dtype)
        seconds = median_seconds(lambda a=a, b=b: a @ b, repeats, warmup=2)
        best = max(best, 2 * m * k * n / seconds)
    return best


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_rss_since_exec_mib() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, not inherited from the
    parent across exec; Linux only)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise SystemExit("this benchmark reads /proc/self/status (Linux)")


def print_machine(device: str = "cpu") -> None:
    """Print the facts every figure depends on: device, CPU capability, threads, torch."""
    print(f"machine: {describe_line(device)}", flush=True)


def add_shape_arguments(parser: argparse.ArgumentParser) -> None:
    """The T-L3 (char PTB, ``small`` scale) model shape options the benchmarks share."""
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--d-inner", type=int, default=512)


#: CPU flags recorded with every result: the vector and matrix units that decide CPU speed.
NOTABLE_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx")


def parse_timing_arguments(
    parser: argparse.ArgumentParser, argv: list[str] | None, rounds: int, repeats: int
) -> argparse.Namespace:
    """``--rounds``, ``--repeats``, ``--threads`` (default 1) and ``--json`` of an
    interleaved benchmark, parsed; torch's threads set and the machine printed."""
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--threads", type=int, default=1)
    add_json_argument(parser)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print_machine()
    return args


def ratio_cell(result: dict) -> str:
    """An :func:`interleaved_ms` result's ratio with its range over the rounds, then the
    CPU-time ratio."""
    low, high = result["range"]
    return f"{result['ratio']:.2f}× ({low:.2f}–{high:.2f}); CPU time {result['cpu_ratio']:.2f}×"


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    """``--json PATH``: also write the figures, with the machine and commit they come from."""
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="also write the results as JSON, with the machine, torch, threads, date and "
        "commit they were measured with (docs/benchmarks/ holds the documented ones)",
    )


def _git(*args: str) -> str | None:
    root = Path(__file__).resolve().parents[1]
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout.strip()


def _command(argv: list[str]) -> str:
    """The command line that produced a record, less its ``--json PATH``."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--json":
            skip = True
        elif not arg.startswith("--json="):
            kept.append(arg)
    return shlex.join(["python", f"benchmarks/{Path(sys.argv[0]).name}", *kept])


class Record:
    """What one benchmark run measured: its tables and notes, printed as they come and, with
    ``--json PATH``, written beside the facts every figure depends on (:func:`describe`: device,
    CPU model and instruction set, cores, threads, torch), the date, the commit and the load
    average before and after. ``docs/benchmarks/*.json`` are such files; the documentation
    renders its tables from them."""

    def __init__(self, device: str = "cpu") -> None:
        self.device = str(device)
        self.started = time.time()
        self.load_before = _load_average()
        self.tables: list[dict] = []
        self.notes: list[str] = []

    def table(
        self,
        columns: list[str],
        rows: list[list[object]],
        caption: str = "",
        align: str = "",
    ) -> None:
        """Print a markdown table (``align``: one letter per column, ``l`` or ``r``; default
        the first column left, the others right) and keep it."""
        align = align or "l" + "r" * (len(columns) - 1)
        cells = [[str(c) for c in row] for row in rows]
        if caption:
            print(caption + "\n")
        print("| " + " | ".join(columns) + " |")
        print("| " + " | ".join("---:" if a == "r" else "---" for a in align) + " |")
        for row in cells:
            print("| " + " | ".join(row) + " |", flush=True)
        self.tables.append({"caption": caption, "columns": columns, "align": align, "rows": cells})

    def note(self, text: str) -> None:
        """Print a line of results outside the tables and keep it."""
        print(text, flush=True)
        self.notes.append(text)

    def write(self, path: str | None, results: object = None) -> None:
        """Write the record to ``path`` (nothing when ``path`` is None); ``results``: the raw
        figures, for other tools."""
        if not path:
            return
        dirty = _git("status", "--porcelain", "--", "src", "benchmarks")
        record = {
            "benchmark": Path(sys.argv[0]).name,
            "command": _command(sys.argv[1:]),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": _git("rev-parse", "HEAD"),
            "uncommitted_changes": None if dirty is None else bool(dirty),
            "machine": describe(self.device),
            "cpu_flags": sorted(f for f in cpu_flags() if f.startswith(NOTABLE_FLAGS)),
            "load_average": {"before": self.load_before, "after": _load_average()},
            "wall_seconds": round(time.time() - self.started, 1),
            "tables": self.tables,
            "notes": self.notes,
            "results": results,
        }
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"written to {out}")


def _load_average() -> float | None:
    """The one-minute load average (None where the OS has none): a busy machine slows every
    figure."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None
