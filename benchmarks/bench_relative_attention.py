"""Benchmark: Transformer-XL relative attention, ours vs. what one writes with torch's pieces.

Times forward + backward of three computations of the same layer:

* ``efficient``: :class:`RelativeMultiHeadAttention` (one ``(q + v) · (W_kR R)ᵀ`` product
  over the ``M + L`` distances, the shift as a view, scores, softmax and value product in
  the fused core of ``nn/kernels/relative_core.py`` with its hand-written backward);
* ``sdpa``: the same shift by autograd (pad, reshape, slice: Dai et al. 2019 / the post's
  "Bonus"), scaled and masked, as the additive ``attn_mask`` of
  ``scaled_dot_product_attention`` (this library's code before the fused core);
* ``oracle``: the ``[H, L, M+L, d_head]`` tensor of relative keys ``W_kR R_{i-j}``
  materialised per ``(i, j)`` and contracted with the queries (the quadratic-memory form
  the shift avoids).

Peak memory: every (variant, size) runs in a fresh subprocess; after the module and inputs
exist the process's ``ru_maxrss`` is read as a baseline, and the figure reported is the
growth of ``ru_maxrss`` over that baseline after warm-up + timed repetitions (CPU, resident
set size, so it includes allocator slack but not memory that was never touched).

Usage::

    python benchmarks/bench_relative_attention.py            # default sizes, markdown table
    python benchmarks/bench_relative_attention.py --sizes 64:64 --reps 2
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
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Record, add_json_argument  # noqa: E402

from highway_transformer.nn.positional import sinusoid  # noqa: E402
from highway_transformer.nn.relative import (  # noqa: E402
    RelativeMultiHeadAttention,
    relative_attention_mask,
)
from highway_transformer.runtime.hardware import describe_line  # noqa: E402

VARIANTS = ("efficient", "sdpa", "oracle")


def _projections(m: RelativeMultiHeadAttention, h: torch.Tensor, memory: torch.Tensor):
    """Queries ``[B, H, L, dh]``, keys and values ``[B, H, K, dh]`` of ``[memory ∘ h]``."""
    bsz, q_len, _ = h.shape
    n_h, d_h = m.n_heads, m.d_head
    cat = torch.cat([memory, h], dim=1)
    w_q, w_k, w_v = m.qkv.weight.split(n_h * d_h, dim=0)
    q = (h @ w_q.T).view(bsz, q_len, n_h, d_h).transpose(1, 2)
    k = (cat @ w_k.T).view(bsz, cat.shape[1], n_h, d_h).transpose(1, 2)
    v = (cat @ w_v.T).view(bsz, cat.shape[1], n_h, d_h).transpose(1, 2)
    return q, k, v


def sdpa_forward(m: RelativeMultiHeadAttention, h: torch.Tensor, memory: torch.Tensor):
    """The shift by autograd, the BD term as ``scaled_dot_product_attention``'s mask."""
    bsz, q_len, _ = h.shape
    n_h, d_h = m.n_heads, m.d_head
    q, k, v = _projections(m, h, memory)
    k_len, mem_len = k.shape[2], memory.shape[1]
    pos = torch.arange(k_len - 1, -1, -1, dtype=torch.float32)  # distances K-1 … 0
    r_k = m.r_net(sinusoid(pos, m.d_model, split=True)).view(k_len, n_h, d_h).transpose(0, 1)
    bd = (q + m.r_r_bias[:, None]) @ r_k.transpose(1, 2)  # [B, H, L, K]
    padded = F.pad(bd, (1, 0)).reshape(bsz, n_h, q_len * (k_len + 1))
    bd = padded[..., q_len:].reshape(bsz, n_h, q_len, k_len) / math.sqrt(d_h)
    bd = bd.masked_fill(relative_attention_mask(q_len, mem_len), float("-inf"))
    attn = F.scaled_dot_product_attention(q + m.r_w_bias[:, None], k, v, attn_mask=bd)
    return m.out(attn.transpose(1, 2).reshape(bsz, q_len, n_h * d_h))


def oracle_forward(m: RelativeMultiHeadAttention, h: torch.Tensor, memory: torch.Tensor):
    """Relative attention with the ``[H, L, K, d_head]`` relative-key tensor materialised."""
    bsz, q_len, _ = h.shape
    n_h, d_h = m.n_heads, m.d_head
    q, k, v = _projections(m, h, memory)
    k_len, mem_len = k.shape[2], memory.shape[1]
    # Position keys for distances 0 .. K-1, then one row per (i, j): distance M + i - j.
    r_k = m.r_net(sinusoid(torch.arange(k_len, dtype=torch.float32), m.d_model, split=True))
    r_k = r_k.view(k_len, n_h, d_h).transpose(0, 1)  # [H, K, dh], index = distance
    i = torch.arange(q_len)[:, None]
    j = torch.arange(k_len)[None, :]
    dist = (mem_len + i - j).clamp(min=0)  # future keys are masked below
    rel = r_k[:, dist]  # [H, L, K, dh]: the tensor the efficient path never builds
    ac = (q + m.r_w_bias[:, None]) @ k.transpose(-1, -2)
    bd = torch.einsum("bhid,hijd->bhij", q + m.r_r_bias[:, None], rel)
    scores = (ac + bd) / math.sqrt(d_h)
    scores = scores.masked_fill(relative_attention_mask(q_len, mem_len), float("-inf"))
    attn = torch.softmax(scores, dim=-1) @ v
    return m.out(attn.transpose(1, 2).reshape(bsz, q_len, n_h * d_h))


def worker(args: argparse.Namespace) -> None:
    """Run one (variant, size) and print a JSON line: median seconds and peak RSS growth."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    q_len, mem_len = args.q_len, args.mem_len
    m = RelativeMultiHeadAttention(args.d_model, args.heads, args.d_head)
    h = torch.randn(args.batch, q_len, args.d_model, requires_grad=True)
    memory = torch.randn(args.batch, mem_len, args.d_model)  # SG(memory): no gradient

    forward = {
        "efficient": m,
        "sdpa": partial(sdpa_forward, m),
        "oracle": partial(oracle_forward, m),
    }[args.variant]

    def step() -> None:
        out = forward(h, memory)
        out.sum().backward()
        h.grad = None
        m.zero_grad(set_to_none=True)

    base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    step()  # warm-up
    times = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": statistics.median(times), "peak_mib": (peak_kb - base_kb) / 1024}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="128:128,256:256", help="comma-separated L:M pairs")
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--d-head", type=int, default=64)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--reps", type=int, default=3, help="timed repetitions (median reported)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    p.add_argument("--q-len", type=int, help=argparse.SUPPRESS)
    p.add_argument("--mem-len", type=int, help=argparse.SUPPRESS)
    add_json_argument(p)
    args = p.parse_args()
    if args.variant is not None:
        worker(args)
        return
    print(f"machine: {describe_line()}")
    record = Record()

    common = [
        f"--d-model={args.d_model}",
        f"--heads={args.heads}",
        f"--d-head={args.d_head}",
        f"--batch={args.batch}",
        f"--reps={args.reps}",
        f"--threads={args.threads}",
    ]
    rows, raw = [], {}
    for pair in args.sizes.split(","):
        q_len, mem_len = (int(x) for x in pair.split(":"))
        res = {}
        for variant in VARIANTS:
            cmd = [sys.executable, __file__, f"--variant={variant}", f"--q-len={q_len}"]
            cmd += [f"--mem-len={mem_len}", *common]
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            res[variant] = json.loads(done.stdout.strip().splitlines()[-1])
        eff = res["efficient"]
        for variant in VARIANTS:
            r = res[variant]
            slower = r["seconds"] / eff["seconds"]
            bigger = r["peak_mib"] / max(eff["peak_mib"], 1e-9)
            rows.append([
                q_len, mem_len, variant, f"{1000 * r['seconds']:.1f}", f"{r['peak_mib']:.0f}",
                f"{slower:.2f}x", f"{bigger:.2f}x",
            ])  # fmt: skip
        raw[pair] = res
    record.table(
        ["L", "M", "variant", "fwd+bwd ms (median)", "peak MiB", "time / efficient",
         "peak / efficient"],
        rows,
        caption=f"Relative attention fwd+bwd, batch {args.batch}, d_model {args.d_model}, "
        f"{args.heads} heads x {args.d_head}, {args.threads} threads, torch {torch.__version__}; "
        "peak = ru_maxrss growth over post-setup baseline, fresh subprocess per row.",
        align="rrlrrrr",
    )  # fmt: skip
    record.write(args.json, raw)


if __name__ == "__main__":
    main()
