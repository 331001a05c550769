"""Benchmark the R-Transformer LocalRNN (Wang et al., §3.1, eqs. 2-3): fast path vs oracle.

``fast`` is :class:`highway_transformer.nn.local_rnn.LocalRNN` and its kernel
(``nn/kernels/local_rnn_cell.py``: one input projection for the whole sequence, shifted views
per step, fused recurrence with a hand-written backward).
``oracle`` materialises every zero-padded window as ``[B·L, k, D]`` and runs the module's own
``nn.GRU`` / ``nn.LSTM`` over it, keeping the last hidden state (the tests' oracle,
``nn/reference.py``'s ``local_rnn_windows``).

Both are measured for one forward + backward pass (``out.sum().backward()``) at the paper's
language-modelling settings (HT A.1-A.2, RT code): word PTB (d 128, LSTM, k 9, length 80,
batch 16) and char PTB (d 512, GRU, k 7, length 400, batch 16).

Time: median over ``--repeats`` rounds. In each round each variant runs ``--warmup`` untimed
times and then once timed, so that it is measured in its steady state (its own allocations
and caches, not those the other variant left behind), while the rounds interleave the two
variants so that varying load from other processes affects both alike.

Speed-up ceiling: the fast path's matrix products alone (same shapes and count, no
element-wise maths) are timed in the same rounds; ``oracle / that`` bounds the speed-up any
implementation of this algorithm can reach. The fast path does exactly half the oracle's
matmul FLOPs (``3k`` vs ``6k`` products of ``[B·L, d] × [d, G·d]`` size), and the oracle's
fused oneDNN recurrence runs its products at least as efficiently as separate calls can,
so the ceiling sits at or below 2× wherever the products dominate (small ``d``).

Peak memory: each (variant, setting) runs in a fresh subprocess (``--child VARIANT SETTING``).
On CPU the child first runs the variant once on a tiny input (so one-off library set-up is not
counted), builds the model and inputs, returns free heap to the OS (``malloc_trim``), resets the
kernel's resident-set high-water mark (``echo 5 > /proc/self/clear_refs``) and takes the
current ``VmRSS`` as the baseline; after one forward + backward it reports ``VmHWM - baseline``:
the peak resident memory of the pass beyond the inputs and parameters. (Where ``/proc`` cannot
be used, the growth of ``ru_maxrss`` over the same baseline is reported instead; that can
under-count when an earlier peak, e.g. at import, was higher.) On CUDA it reports
``torch.cuda.max_memory_allocated() - memory_allocated()`` around the same pass.

Threads: ``--threads`` (default 1) sets ``torch.set_num_threads`` in every process. One thread
is the default because on a CPU shared with other jobs every multi-threaded op waits at an
OpenMP barrier for a descheduled worker, which adds milliseconds per op and swamps the
measurement; pass ``--threads 0`` to keep PyTorch's default.

Run: ``python benchmarks/bench_local_rnn.py [--repeats 5] [--threads 1] [--device cpu]``.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Record, add_json_argument  # noqa: E402

from highway_transformer.nn.local_rnn import LocalRNN  # noqa: E402
from highway_transformer.nn.reference import local_rnn_windows as oracle  # noqa: E402
from highway_transformer.runtime.hardware import describe_line  # noqa: E402

# name: (d_model, cell, window, length, batch)
SETTINGS: dict[str, tuple[int, str, int, int, int]] = {
    "word-ptb": (128, "lstm", 9, 80, 16),
    "char-ptb": (512, "gru", 7, 400, 16),
}
VARIANTS = ("fast", "oracle")


def build(
    setting: str, device: torch.device, batch: int | None = None, length: int | None = None
) -> tuple[LocalRNN, Tensor]:
    d, cell, window, full_length, full_batch = SETTINGS[setting]
    torch.manual_seed(0)
    module = LocalRNN(d, window, cell).to(device)
    x = torch.randn(batch or full_batch, length or full_length, d, device=device)
    return module, x.requires_grad_()


def runner(variant: str, module: LocalRNN, x: Tensor) -> Callable[[], None]:
    def run() -> None:
        out = module(x) if variant == "fast" else oracle(module.rnn, x, module.window)
        out.sum().backward()
        x.grad = None
        module.zero_grad(set_to_none=True)

    return run


def matmul_floor(module: LocalRNN, x: Tensor) -> Callable[[], None]:
    """The fast path's matrix products alone, at its shapes and count, nothing else.

    Forward: the input projection and ``k − 1`` recurrent products; backward: the two
    products of the projection and, per recurrent step, the hidden-state and ``W_hh``
    gradients. Its time is what the fast path would take with free element-wise maths, so
    ``oracle / floor`` is the largest speed-up this algorithm can show on the device.
    """
    batch, length, d = x.shape
    rows, k = batch * length, module.window
    w_ih = module.rnn.weight_ih_l0.detach()
    w_hh = module.rnn.weight_hh_l0.detach()
    width = w_ih.shape[0]
    inputs = x.detach().reshape(rows, d)
    h = torch.randn(rows, d, device=x.device)
    da = torch.randn(rows, width, device=x.device)
    pre = torch.empty(rows, width, device=x.device)
    dh = torch.empty(rows, d, device=x.device)
    grad_ih, grad_hh = torch.zeros_like(w_ih), torch.zeros_like(w_hh)

    def run() -> None:
        torch.mm(inputs, w_ih.t(), out=pre)
        for _ in range(k - 1):
            torch.mm(h, w_hh.t(), out=pre)
        torch.mm(da, w_ih, out=dh)
        grad_ih.addmm_(da.t(), inputs)
        for _ in range(k - 1):
            grad_hh.addmm_(da.t(), h)
            torch.mm(da, w_hh, out=dh)

    return run


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _proc_status(field: str) -> int:
    """A ``/proc/self/status`` memory field in KiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"no {field} in /proc/self/status")


def _reset_rss_peak() -> int:
    """Trim the heap, reset the RSS high-water mark and return the baseline RSS (KiB)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
        return _proc_status("VmRSS")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _rss_peak() -> int:
    """The RSS high-water mark (KiB) since :func:`_reset_rss_peak`."""
    try:
        return _proc_status("VmHWM")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def child(variant: str, setting: str, device: torch.device) -> None:
    """Print the peak memory growth (MiB) of one forward + backward pass as JSON."""
    if device.type == "cuda":
        module, x = build(setting, device)
        run = runner(variant, module, x)
        run()  # first call sets up kernels and the caching allocator
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        run()
        synchronize(device)
        peak = (torch.cuda.max_memory_allocated(device) - base) / 2**20
    else:
        window = SETTINGS[setting][2]
        small_module, small_x = build(setting, device, batch=1, length=window + 1)
        runner(variant, small_module, small_x)()  # library set-up, not counted
        module, x = build(setting, device)
        run = runner(variant, module, x)
        base = _reset_rss_peak()
        run()
        peak = (_rss_peak() - base) / 1024  # KiB -> MiB
    print(json.dumps({"peak_mib": peak}))


def peak_memory(variant: str, setting: str, device: str, threads: int) -> float:
    cmd = [sys.executable, __file__, "--child", variant, setting]
    cmd += ["--device", device, "--threads", str(threads)]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return float(json.loads(done.stdout.strip().splitlines()[-1])["peak_mib"])


def time_both(setting: str, device: torch.device, warmup: int, repeats: int) -> dict[str, float]:
    module, x = build(setting, device)
    runs = {v: runner(v, module, x) for v in VARIANTS}
    runs["floor"] = matmul_floor(module, x)
    times: dict[str, list[float]] = {v: [] for v in runs}
    for _ in range(repeats):
        for v in runs:  # rounds interleave the variants
            for _ in range(warmup):
                runs[v]()
            synchronize(device)
            start = time.perf_counter()
            runs[v]()
            synchronize(device)
            times[v].append(time.perf_counter() - start)
    return {v: statistics.median(t) * 1000 for v, t in times.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="0 = PyTorch's default")
    parser.add_argument("--settings", nargs="+", choices=sorted(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--child", nargs=2, metavar=("VARIANT", "SETTING"), help=argparse.SUPPRESS)
    add_json_argument(parser)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.child:
        child(args.child[0], args.child[1], device)
        return
    print(f"machine: {describe_line(str(device))}")
    record = Record(str(device))
    record.note(
        f"LocalRNN forward+backward, device {device}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, median of {args.repeats} rounds "
        f"({args.warmup} untimed + 1 timed run per variant and round)"
    )
    print()
    columns = [
        "setting", "d", "cell", "k", "L", "B", "fast ms", "oracle ms", "speed-up",
        "fast matmuls alone ms", "speed-up ceiling", "fast peak MiB", "oracle peak MiB",
        "memory ratio",
    ]  # fmt: skip
    rows, raw = [], {}
    for setting in args.settings:
        d, cell, window, length, batch = SETTINGS[setting]
        ms = time_both(setting, device, args.warmup, args.repeats)
        mem = {v: peak_memory(v, setting, args.device, args.threads) for v in VARIANTS}
        rows.append([
            setting, d, cell, window, length, batch, f"{ms['fast']:.1f}", f"{ms['oracle']:.1f}",
            f"{ms['oracle'] / ms['fast']:.2f}x", f"{ms['floor']:.1f}",
            f"{ms['oracle'] / ms['floor']:.2f}x", f"{mem['fast']:.1f}", f"{mem['oracle']:.1f}",
            f"{mem['fast'] / mem['oracle']:.2f}",
        ])  # fmt: skip
        raw[setting] = {"milliseconds": ms, "peak_mib": mem}
    record.table(columns, rows, align="lrlrrr" + "r" * 8)
    record.write(args.json, raw)


if __name__ == "__main__":
    main()
