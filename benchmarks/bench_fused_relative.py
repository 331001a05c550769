"""Benchmark: Transformer-XL relative attention, the fused Triton kernel against the core.

The core (``nn/kernels/relative_core.py``: batched products, the shift as a strided view, the
``[H·B, L, K]`` probabilities kept for its hand-written backward) and the fused kernel
(``nn/kernels/relative_triton.py``: tiles, online softmax, the position band picked inside the tile,
nothing ``[H·B, L, K]`` in memory) on the same operands, built as the layer builds them
(position keys from the clamped sinusoid after the zero rows, the layer's mask), at the
shapes of the HT Table 5 L6-XL (``ht-table5/l6-xl``: 8 heads × 64):

* training: batch 22, segment 512, memory 512: median time of forward + backward and of the
  forward alone, peak memory of each, and the largest difference of the output and of every
  operand's gradient;
* evaluation: batch 10, target 80, memory 2100, ``clamp_len`` 820, ``same_length``: the
  forward without gradients (how evaluation runs), its time, peak memory and difference.

Peak memory is ``torch.cuda.max_memory_allocated`` during the timed calls less what was
allocated before them (the operands). With ``--precision bf16`` the differences are also
given against the core in float32 on the same (rounded) operands, for scale.

    python benchmarks/bench_fused_relative.py --precision bf16 --json bench.json
    python benchmarks/bench_fused_relative.py --device cpu --interpret --tiny   # a smoke check
    python benchmarks/bench_fused_relative.py --compile-for 90   # sm_90 kernels, no GPU needed

``--device cpu --interpret`` runs the kernels through Triton's interpreter (no GPU; slow,
tiny shapes only: ``--tiny``). ``--compile-for SM`` compiles the kernels here for a GPU of
compute capability SM (Triton's bundled ``ptxas``, no GPU) and prints each one's shared
memory; it times nothing.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Record, add_json_argument, median_seconds, print_machine  # noqa: E402

from highway_transformer.nn.kernels.relative_core import relative_attention as core  # noqa: E402
from highway_transformer.nn.kernels.relative_core import zero_rows  # noqa: E402
from highway_transformer.nn.relative import (  # noqa: E402
    distance_encoding,
    relative_attention_mask,
)

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
#: (batch, L, M, clamp_len, same_length) of the L6-XL: its training and evaluation shapes.
SHAPES = {
    "train": (22, 512, 512, -1, False),
    "eval": (10, 80, 2100, 820, True),
}
TINY = {"train": (2, 20, 13, -1, False), "eval": (2, 5, 30, 12, True)}
HEADS, D_HEAD, TINY_HEADS, TINY_D_HEAD = 8, 64, 2, 8


def operands(shape: tuple, heads: int, d_head: int, dtype: torch.dtype, device: torch.device):
    """``(q_u, q_v, key, value, r_rows), mask, scale`` at ``shape``, the position keys built
    as the layer builds them: ``W_kR`` of the clamped sinusoid of the distances ``K-1 … 0``
    after the zero rows the device gets (:func:`zero_rows`); leaves that want gradients."""
    bsz, q_len, mem_len, clamp_len, same_length = shape
    k_len = mem_len + q_len
    g = torch.Generator().manual_seed(0)
    d_model = heads * d_head

    def leaf(*size: int) -> torch.Tensor:
        return torch.randn(*size, generator=g).to(device, dtype).requires_grad_()

    w_r = torch.randn(d_model, d_model, generator=g) / math.sqrt(d_model)
    r_k = distance_encoding(k_len, d_model, clamp_len, torch.zeros(1)) @ w_r.T  # [K, H·dh]
    pad = 0 if q_len == 1 else zero_rows(k_len, device)
    r_rows = torch.cat([torch.zeros(pad, d_model), r_k]).view(-1, heads, d_head).transpose(0, 1)
    ops = (
        leaf(heads * bsz, q_len, d_head),
        leaf(heads, bsz * q_len, d_head),
        leaf(heads * bsz, k_len, d_head),
        leaf(heads * bsz, k_len, d_head),
        r_rows.contiguous().to(device, dtype).requires_grad_(),
    )
    mask = relative_attention_mask(
        q_len, mem_len, same_length=same_length, window=mem_len, device=device
    )
    return ops, mask, 1 / math.sqrt(d_head)


def forward_backward(fn, ops, mask, scale, dropout, upstream) -> list[torch.Tensor]:  # noqa: ANN001
    out = fn(*ops, mask, scale, dropout)
    return [out.detach(), *torch.autograd.grad(out, ops, upstream)]


def forward(fn, ops, mask, scale) -> list[torch.Tensor]:  # noqa: ANN001
    with torch.no_grad():
        return [fn(*ops, mask, scale, 0.0)]


def largest_differences(a: list[torch.Tensor], b: list[torch.Tensor]) -> list[float]:
    return [float((x.float() - y.float()).abs().max()) for x, y in zip(a, b, strict=True)]


def peak_mib(run, device: torch.device) -> float | None:  # noqa: ANN001
    """Peak memory of ``run()`` above what was allocated before it (CUDA only)."""
    if device.type != "cuda":
        return None
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    run()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated(device) - base) / 2**20


NAMES = ["output", "d q_u", "d q_v", "d key", "d value", "d r_rows"]


def measure(name: str, shape: tuple, args: argparse.Namespace, fused) -> dict:  # noqa: ANN001
    """Every figure of one shape: times, peaks and differences, fused and core."""
    device, dtype = torch.device(args.device), DTYPES[args.precision]
    heads, d_head = (TINY_HEADS, TINY_D_HEAD) if args.tiny else (HEADS, D_HEAD)
    ops, mask, scale = operands(shape, heads, d_head, dtype, device)
    fns = {"fused": fused, "core": core}
    result: dict = {
        "shape": dict(zip(("batch", "L", "M", "clamp_len", "same_length"), shape, strict=True))
    }
    result["shape"].update(heads=heads, d_head=d_head, precision=args.precision)
    with_grad = name == "train"
    upstream = torch.randn(ops[0].shape, generator=torch.Generator().manual_seed(1))
    upstream = upstream.to(device, dtype)
    runs = {}
    for kind, fn in fns.items():
        if with_grad:
            run = lambda fn=fn: forward_backward(fn, ops, mask, scale, args.dropout, upstream)  # noqa: E731
            result[f"{kind} fwd+bwd ms"] = 1000 * median_seconds(run, args.reps, args.warmup)
            result[f"{kind} fwd+bwd peak MiB"] = peak_mib(run, device)
        only = lambda fn=fn: forward(fn, ops, mask, scale)  # noqa: E731
        result[f"{kind} fwd ms"] = 1000 * median_seconds(only, args.reps, args.warmup)
        result[f"{kind} fwd peak MiB"] = peak_mib(only, device)
        runs[kind] = forward_backward(fn, ops, mask, scale, 0.0, upstream) if with_grad else only()
    names = NAMES if with_grad else NAMES[:1]
    result["max |fused - core|"] = dict(
        zip(names, largest_differences(runs["fused"], runs["core"]), strict=True)
    )
    if dtype != torch.float32:  # both against the core in float32 on the same rounded operands
        exact = tuple(t.detach().float().requires_grad_() for t in ops)
        up32 = upstream.float()
        want = (
            forward_backward(core, exact, mask, scale, 0.0, up32)
            if with_grad
            else forward(core, exact, mask, scale)
        )
        for kind in fns:
            errors = largest_differences(runs[kind], want)
            result[f"max |{kind} - core fp32|"] = dict(zip(names, errors, strict=True))
    return result


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _shape(s: dict) -> str:
    same = ", same_length" if s["same_length"] else ""
    clamp = f", clamp {s['clamp_len']}" if s["clamp_len"] > 0 else ""
    return f"B {s['batch']}, H {s['heads']} × {s['d_head']}, L {s['L']}, M {s['M']}{clamp}{same}"


def report(record: Record, results: dict, args: argparse.Namespace) -> None:
    rows = []
    for name, r in results.items():
        for kind in ("fused", "core"):
            rows.append([
                name, kind, _fmt(r.get(f"{kind} fwd+bwd ms")), _fmt(r[f"{kind} fwd ms"]),
                _fmt(r.get(f"{kind} fwd+bwd peak MiB"), 1), _fmt(r[f"{kind} fwd peak MiB"], 1),
            ])  # fmt: skip
    record.table(
        ["shape", "kernel", "fwd+bwd ms", "fwd ms", "fwd+bwd peak MiB", "fwd peak MiB"],
        rows,
        caption=f"relative attention, {args.precision}, median of {args.reps}: "
        + "; ".join(f"{n} {_shape(r['shape'])}" for n, r in results.items()),
        align="llrrrr",
    )
    for name, r in results.items():
        for key in [k for k in r if k.startswith("max |")]:
            diffs = ", ".join(f"{what} {value:.2e}" for what, value in r[key].items())
            record.note(f"{name}: {key}: {diffs}")


def compile_for(arch: int, precision: str) -> dict[str, int]:
    """Compile the kernels for compute capability ``arch`` here (no GPU needed) and return
    each one's shared memory in bytes, at the tile size the GPU gets."""
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from highway_transformer.nn.kernels import relative_triton as rt

    dtype = DTYPES[precision]
    tname = {"fp32": "fp32", "bf16": "bf16", "fp16": "fp16"}[precision]
    block = rt.GPU_BLOCKS[dtype]
    meta = {
        "BM": block, "BN": block, "BW": triton.next_power_of_2(2 * block - 1), "BD": D_HEAD,
        "HAS_MASK": True, "DROPOUT": True, "ACC": tl.float32,
        "DOT": getattr(tl, str(dtype).removeprefix("torch.")),
        "PREC": "ieee" if dtype == torch.float32 else "tf32",
    }  # fmt: skip
    kinds = {"MASK": "*u8", "KEEP": "*i8", "LSE": "*fp32", "DELTA": "*fp32", "D_R": "*fp32"}
    floats = ("qk_scale", "scale", "p_drop")
    kernels = (rt._forward_kernel, rt._backward_keys_kernel, rt._backward_queries_kernel)
    shared = {}
    for kernel in kernels:
        signature = {}
        for arg in kernel.arg_names:
            if arg in meta:
                signature[arg] = "constexpr"
            elif arg in kinds:
                signature[arg] = kinds[arg]
            elif arg.isupper():
                signature[arg] = "*" + tname
            else:
                signature[arg] = "fp32" if arg in floats else "i32"
        constexprs = {k: v for k, v in meta.items() if k in kernel.arg_names}
        started = time.perf_counter()
        compiled = triton.compile(
            ASTSource(kernel, signature, constexprs), target=GPUTarget("cuda", arch, 32)
        )
        shared[kernel.__name__] = compiled.metadata.shared
        print(
            f"{kernel.__name__}: compiled for sm_{arch} in {time.perf_counter() - started:.1f} s, "
            f"shared memory {compiled.metadata.shared / 1024:.0f} KiB",
            flush=True,
        )
    return shared


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda", help="cuda (default) | cpu (with --interpret)")
    p.add_argument("--precision", choices=tuple(DTYPES), default="bf16")
    p.add_argument("--interpret", action="store_true", help="Triton's interpreter (CPU)")
    p.add_argument("--tiny", action="store_true", help="tiny shapes (a smoke check)")
    p.add_argument("--dropout", type=float, default=0.0, help="attention dropout (L6-XL: 0)")
    p.add_argument("--reps", type=int, default=20, help="timed repetitions (median)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--compile-for", type=int, metavar="SM", help="compile only, for sm_SM")
    add_json_argument(p)
    args = p.parse_args()
    if args.interpret:  # chosen when triton is first imported, which is below
        os.environ["TRITON_INTERPRET"] = "1"
    if args.compile_for is not None:
        if args.interpret:
            raise SystemExit("--compile-for compiles; leave out --interpret")
        shared = compile_for(args.compile_for, args.precision)
        record = Record("cpu")
        record.write(args.json, {"compile_for": args.compile_for, "shared_bytes": shared})
        return
    from highway_transformer.nn.kernels import relative_triton

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device here; --device cpu --interpret --tiny is the smoke check")
    reason = relative_triton.unavailable_reason(device)
    if reason is not None:
        raise SystemExit(f"no fused kernel here: {reason}")
    if device.type == "cpu" and not args.tiny:
        raise SystemExit("the interpreter runs tiny shapes only: add --tiny")
    print_machine(args.device)
    record = Record(args.device)
    shapes = TINY if args.tiny else SHAPES
    results = {
        name: measure(name, shape, args, relative_triton.relative_attention)
        for name, shape in shapes.items()
    }
    report(record, results, args)
    # the pair benchmarks/gpu_check_summary.py reads: evaluation's peak, fused and core
    results["eval_peak_mib"] = {k: results["eval"][f"{k} fwd peak MiB"] for k in ("fused", "core")}
    import triton

    results["versions"] = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "interpreter": relative_triton.interpreting(),
    }
    record.write(args.json, results)


if __name__ == "__main__":
    main()
