"""Benchmark: Shaw et al. (2018) relation-aware attention, efficient form vs full edge tensors.

Times one forward + backward of a :class:`~highway_transformer.nn.shaw.ShawAttention` sublayer
(CPU, fp32, training mode, dropout 0) and measures its peak memory, for three ways of computing
the same function (Shaw eqs. 2-5):

``efficient``
    The library's form: ``q · a^K`` for the ``2k+1`` distances (``[B, H, L, 2k+1]``) gathered
    to ``[B, H, L, L]``; ``α`` scattered into ``2k+1`` buckets times ``a^V``. No ``L×L×d``.
``oracle``
    The definition, the tests' oracle (``nn/reference.py``): full ``[L, L, d_head]`` tables ``a^K``,
    ``a^V``, then ``k_j + a^K_ij`` and ``v_j + a^V_ij`` materialised per batch and head
    (``[B, H, L, L, d_head]``), contracted with einsum.
``tables``
    Shaw et al.'s own implementation (§3.3): the ``[L, L, d_head]`` tables shared across batch
    and heads, with ``q k^T + einsum(q, a^K)`` and ``α v + einsum(α, a^V)``.

Memory method: each variant runs in a fresh subprocess (the script re-invokes itself with
``--child VARIANT``). The child imports torch, builds the module and input, runs one tiny
forward + backward (to initialise the math libraries), then reads ``ru_maxrss`` as the
baseline; the reported peak is the growth of ``ru_maxrss`` over that baseline during the first
full-size forward + backward (activations, saved tensors and gradients). The time is the
median wall-clock of ``--repeats`` further forward + backward passes.

Example (the configuration whose results are reported)::

    python benchmarks/bench_shaw.py --batch 4 --length 400 --d-model 512 --heads 8 --clip 16
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Record, add_json_argument  # noqa: E402

from highway_transformer.nn import reference  # noqa: E402
from highway_transformer.nn.shaw import ShawAttention, relative_buckets  # noqa: E402
from highway_transformer.runtime.hardware import describe_line  # noqa: E402

VARIANTS = ("efficient", "oracle", "tables")


def _heads(attn: ShawAttention, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    q, k, v = attn.split_heads(h)
    return q * (1.0 / math.sqrt(attn.d_head)), k, v


def _merge(attn: ShawAttention, z: Tensor) -> Tensor:
    b, _, length, _ = z.shape
    return attn.out(z.transpose(1, 2).reshape(b, length, attn.d_model))


def _masked_softmax(attn: ShawAttention, scores: Tensor) -> Tensor:
    if attn.causal:
        length = scores.shape[-1]
        future = torch.ones(length, length, dtype=torch.bool, device=scores.device).triu(1)
        scores = scores.masked_fill(future, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1)


def oracle_forward(attn: ShawAttention, h: Tensor) -> Tensor:
    """Shaw eqs. 2-4 with ``k_j + a^K_ij`` and ``v_j + a^V_ij`` as ``[B, H, L, L, d]``: the
    tests' oracle :func:`reference.shaw_attention`, its edge tables gathered in one call."""
    q, k, v = attn.split_heads(h)
    buckets = relative_buckets(h.shape[1], attn.clip, h.device)
    a_k, a_v = attn.rel_k(buckets), attn.rel_v(buckets)  # [L, L, d_head]
    return _merge(attn, reference.shaw_attention(q, k, v, a_k, a_v, attn.causal))


def tables_forward(attn: ShawAttention, h: Tensor) -> Tensor:
    """Shaw §3.3: ``[L, L, d]`` tables shared across batch and heads, two einsums each."""
    q, k, v = _heads(attn, h)
    buckets = relative_buckets(h.shape[1], attn.clip, h.device)
    a_k, a_v = attn.rel_k(buckets), attn.rel_v(buckets)
    scores = q @ k.transpose(-2, -1) + torch.einsum("bhid,ijd->bhij", q, a_k)
    alpha = _masked_softmax(attn, scores)
    return _merge(attn, alpha @ v + torch.einsum("bhij,ijd->bhid", alpha, a_v))


def _step(variant: str, attn: ShawAttention, h: Tensor) -> None:
    if variant == "efficient":
        out = attn(h)
    elif variant == "oracle":
        out = oracle_forward(attn, h)
    else:
        out = tables_forward(attn, h)
    out.sum().backward()
    h.grad = None
    attn.zero_grad(set_to_none=False)


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def child(args: argparse.Namespace) -> dict[str, float]:
    """Runs in the subprocess: peak-memory growth of one step, then the median step time."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    attn = ShawAttention(args.d_model, args.heads, args.clip, causal=not args.non_causal)
    attn.train()
    small = torch.randn(1, 8, args.d_model, requires_grad=True)
    _step(args.child, attn, small)  # initialise kernels/thread pools; allocates .grad buffers
    h = torch.randn(args.batch, args.length, args.d_model, requires_grad=True)
    baseline = _maxrss_mib()
    start = time.perf_counter()
    _step(args.child, attn, h)
    first = time.perf_counter() - start
    peak = _maxrss_mib() - baseline
    times = [first]
    for _ in range(args.repeats - 1):
        start = time.perf_counter()
        _step(args.child, attn, h)
        times.append(time.perf_counter() - start)
    return {"peak_mib": peak, "time_s": statistics.median(times)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--length", type=int, default=400)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--clip", type=int, default=16)
    parser.add_argument("--non-causal", action="store_true")
    parser.add_argument("--repeats", type=int, default=3, help="forward+backward passes timed")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    add_json_argument(parser)
    args = parser.parse_args(argv)

    if args.child:
        sys.stdout.write(json.dumps(child(args)) + "\n")
        return
    print(f"machine: {describe_line()}")
    record = Record()

    forwarded = [
        f"--batch={args.batch}",
        f"--length={args.length}",
        f"--d-model={args.d_model}",
        f"--heads={args.heads}",
        f"--clip={args.clip}",
        f"--repeats={args.repeats}",
        f"--threads={args.threads}",
    ] + (["--non-causal"] if args.non_causal else [])
    results: dict[str, dict[str, float]] = {}
    for variant in args.variants:
        proc = subprocess.run(
            [sys.executable, __file__, "--child", variant, *forwarded],
            check=True,
            capture_output=True,
            text=True,
        )
        results[variant] = json.loads(proc.stdout.strip().splitlines()[-1])

    ref = results.get("efficient")
    rows = []
    for variant, r in results.items():
        ratio = f"{r['peak_mib'] / ref['peak_mib']:.1f}x" if ref and ref["peak_mib"] else "-"
        rows.append([variant, f"{r['time_s']:.3f}", f"{r['peak_mib']:.0f}", ratio])
    record.table(
        ["variant", "time (s)", "peak memory (MiB)", "memory / efficient"],
        rows,
        caption=f"Shaw attention fwd+bwd, B={args.batch}, L={args.length}, d={args.d_model}, "
        f"H={args.heads}, clip={args.clip}, causal={not args.non_causal}, fp32 CPU, "
        f"{args.threads} threads, median of {args.repeats}",
    )
    record.write(args.json, results)


if __name__ == "__main__":
    main()
