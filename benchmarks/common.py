"""Shared helpers for the benchmark scripts: timing, matmul peak, peak memory."""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from collections.abc import Callable

import torch

from highway_transformer.runtime.hardware import describe_line


def _synchronize() -> None:
    """Wait for queued GPU work, so that a timing covers the kernels it launched, and only
    those."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def median_seconds(fn: Callable[[], None], repeats: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        _synchronize()  # the warm-up's (or previous call's) kernels are not this call's
        start = time.perf_counter()
        fn()
        _synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


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


def print_machine(device: str = "cpu") -> None:
    """Print the facts every figure depends on: device, CPU capability, threads, torch."""
    print(f"machine: {describe_line(device)}", flush=True)


def add_shape_arguments(parser: argparse.ArgumentParser) -> None:
    """The T-L3 (char PTB, ``small`` scale) model shape options the benchmarks share."""
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--d-inner", type=int, default=512)
