"""Shared helpers for the benchmark scripts: timing, matmul peak, peak memory."""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Callable

import torch


def median_seconds(fn: Callable[[], None], repeats: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def matmul_peak_flops(
    dtype: torch.dtype, device: str = "cpu", n: int = 2048, repeats: int = 5
) -> float:
    """Achieved FLOP/s of a square ``n × n`` matmul: the peak the model utilisation is against."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    seconds = median_seconds(lambda: a @ b, repeats, warmup=2)
    return 2 * n**3 / seconds


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
