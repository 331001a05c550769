"""Our Transformer-XL training step against the reference code's ``MemTransformerLM``, in one run.

The reference is Transformer-XL's own PyTorch code (``kimiyoung/transformer-xl``,
``pytorch/mem_transformer.py`` with ``pytorch/utils/proj_adaptive_softmax.py`` and
``pytorch/utils/log_uniform_sampler.py``), read from a folder outside the package
(``--reference``, default ``.reference/transformer-xl/pytorch``, ignored by git); without it
the benchmark prints one line and stops. The reference files are used as they are; what
today's torch needs of 2019 code is shimmed here: its module-level ``torch.version.cuda``
read (None on a CPU build), and its ``uint8`` attention masks, which ``masked_fill`` now
refuses (turned into the boolean masks they stand for, while the reference trains only).

Both models have the shape of ``--preset`` (default the HT Table 5 L6-XL: 6 layers, d 512, 8
heads of 64, d_inner 2048, dropout 0.1, segment 512, memory 512, batch 22, tied softmax),
``--vocab`` symbols (default 204, enwik8's), the weights drawn as the reference's
``train.py`` draws them (normal, std 0.02) and ours as the preset says. A step is the
trainer's: forward over a segment with the previous segment's memory under autocast
(``--precision``), the mean NLL, backward, gradient clipping at the preset's ``train.clip``,
an Adam update (``--fused-optimizer``: the fused kernel, for both); both read the same
random segments. Each model is built afresh in every round and timed over ``--steps``
steps after ``--warmup``; reported per model: the median tokens/s over rounds, the MFU
against the matmul peak of the same precision measured in the same run (the same FLOP count
for both: they compute the same products), and on a GPU the peak memory the training added
(``torch.cuda.max_memory_allocated`` less what was allocated before the model was built).

    python benchmarks/bench_xl_reference.py --device cuda --precision bf16
    python benchmarks/bench_xl_reference.py --device cpu --batch 2 --seq-len 16 --mem-len 16 \\
        --set model.d_model=32 model.n_heads=2 model.d_head=16 model.d_inner=64 --steps 2
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Record, add_json_argument, matmul_peak_flops, print_machine  # noqa: E402

from highway_transformer.config import PRECISIONS, Config  # noqa: E402
from highway_transformer.models.lm import LanguageModel, count_flops_per_token  # noqa: E402
from highway_transformer.presets import get_preset  # noqa: E402
from highway_transformer.runtime.device import AUTOCAST_DTYPES, autocast_context  # noqa: E402
from highway_transformer.validation import build_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / ".reference" / "transformer-xl" / "pytorch"
#: kimiyoung/transformer-xl at commit 44781ed, pytorch/: each file's SHA-256. Code is imported
#: only when every file is exactly this (nothing read can run code we have not read).
REFERENCE_SHA256 = {
    "mem_transformer.py": "38cbc93a8f7b06b85976e88e161349b34f2ac226b8a7796bd6d82c30dc592827",
    "utils/proj_adaptive_softmax.py": (
        "fe7ff45785c24c200462f181206efed632036d658fa5a77a4968a987c3b924f4"
    ),
    "utils/log_uniform_sampler.py": (
        "48ef19d323485065a9b69f0dad5dbc3926926e1f6af9379ce9e3b5331c44b458"
    ),
}
REFERENCE_FILES = tuple(REFERENCE_SHA256)


def missing_reference(folder: Path) -> list[str]:
    return [name for name in REFERENCE_FILES if not (folder / name).is_file()]


def check_reference(folder: Path) -> None:
    """Refuse (one line) reference files whose content is not the pinned commit's."""
    for name, digest in REFERENCE_SHA256.items():
        if hashlib.sha256((folder / name).read_bytes()).hexdigest() != digest:
            raise SystemExit(
                f"{folder / name} is not kimiyoung/transformer-xl@44781ed's file (SHA-256 "
                "differs); put the unmodified file there"
            )


def import_reference(folder: Path) -> type[nn.Module]:
    """``MemTransformerLM`` from ``folder`` (its modules import each other by bare name and
    read ``torch.version.cuda`` when imported: given a placeholder on a CPU build)."""
    for path in (folder / "utils", folder):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    placeholder = torch.version.cuda is None
    if placeholder:
        torch.version.cuda = "0.0"  # read, split and never used by the code paths timed here
    try:
        import mem_transformer
    finally:
        if placeholder:
            torch.version.cuda = None
    return mem_transformer.MemTransformerLM


@contextlib.contextmanager
def boolean_masks() -> Iterator[None]:
    """``masked_fill(_)`` given a ``uint8`` mask uses it as the boolean mask it stands for
    (torch >= 1.2 deprecated, later refused, byte masks; the reference builds them)."""
    originals = torch.Tensor.masked_fill, torch.Tensor.masked_fill_

    def as_bool(mask: Tensor) -> Tensor:
        return mask.bool() if mask.dtype == torch.uint8 else mask

    torch.Tensor.masked_fill = lambda self, mask, value: originals[0](self, as_bool(mask), value)
    torch.Tensor.masked_fill_ = lambda self, mask, value: originals[1](self, as_bool(mask), value)
    try:
        yield
    finally:
        torch.Tensor.masked_fill, torch.Tensor.masked_fill_ = originals


def our_config(args: argparse.Namespace) -> Config:
    extra = [f"model.vocab_size={args.vocab}", f"train.precision={args.precision}"]
    if args.batch:
        extra.append(f"data.batch_size={args.batch}")
    if args.seq_len:
        extra.append(f"data.seq_len={args.seq_len}")
    if args.mem_len:
        extra.append(f"model.memory.mem_len={args.mem_len}")
    return build_config(get_preset(args.preset), None, [*extra, *args.set])


def reference_model(reference: type[nn.Module], config: Config) -> nn.Module:
    """``MemTransformerLM`` of ``config``'s shape, drawn as the reference ``train.py`` draws it
    (``--init normal --init_std 0.02``; LayerNorm weights N(1, 0.02), biases 0)."""
    m, d = config.model, config.data
    model = reference(
        m.vocab_size, m.n_layers, m.n_heads, m.d_model, m.head_dim, m.d_inner, m.dropout,
        m.dropout_attn, tie_weight=m.tie_weights, d_embed=m.d_model, div_val=1,
        tie_projs=[False], pre_lnorm=m.norm == "pre", tgt_len=d.seq_len, ext_len=0,
        mem_len=m.memory.mem_len, cutoffs=[], same_length=m.memory.same_length, attn_type=0,
        clamp_len=m.memory.clamp_len,
    )  # fmt: skip
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm.weight" in name:
                nn.init.normal_(p, 1.0, 0.02)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)
            else:
                nn.init.normal_(p, 0.0, 0.02)
    return model


Step = Callable[[Tensor, Tensor], float]


def _optimizer(model: nn.Module, config: Config, fused: bool) -> torch.optim.Optimizer:
    extra = {"fused": True} if fused else {}
    return torch.optim.Adam(model.parameters(), lr=config.train.lr, **extra)


def our_step(model: nn.Module, config: Config, device: torch.device, fused: bool) -> Step:
    """One training step of ours on a ``[B, L]`` segment (batch-major), carrying memory."""
    optimizer, state = _optimizer(model, config, fused), {"memory": None}

    def step(x: Tensor, y: Tensor) -> float:
        with autocast_context(device, config.train.precision):
            out = model(x, memory=state["memory"], targets=y, reduction="mean")
        out.loss.backward()
        state["memory"] = out.memory
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.train.clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return out.loss.detach()

    return step


def reference_step(model: nn.Module, config: Config, device: torch.device, fused: bool) -> Step:
    """One training step of the reference on the same segment (it reads ``[L, B]``)."""
    optimizer, state = _optimizer(model, config, fused), {"mems": ()}

    def step(x: Tensor, y: Tensor) -> float:
        with boolean_masks(), autocast_context(device, config.train.precision):
            loss, *mems = model(x.t().contiguous(), y.t().contiguous(), *state["mems"])
            loss = loss.float().mean()
        loss.backward()
        state["mems"] = tuple(mems)
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.train.clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    return step


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_model(
    build: Callable[[], tuple[nn.Module, Step]],
    segments: list[tuple[Tensor, Tensor]],
    warmup: int,
    device: torch.device,
) -> dict[str, float | int | None]:
    """Build a model, train it over ``segments`` (the first ``warmup`` untimed): tokens/s of
    the timed steps, the first and last loss, the peak memory the training added (GPU)."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
    model, step = build()
    parameters = sum(p.numel() for p in model.parameters())  # tied weights once
    losses = [float(step(*segments[i])) for i in range(warmup)]
    _synchronize(device)
    start = time.perf_counter()
    timed = [step(*segment) for segment in segments[warmup:]]
    _synchronize(device)
    seconds = time.perf_counter() - start
    losses += [float(loss) for loss in timed]
    tokens = sum(x.numel() for x, _ in segments[warmup:])
    peak = None
    if device.type == "cuda":
        peak = (torch.cuda.max_memory_allocated(device) - before) / 2**20
    del model, step
    return {
        "tokens_per_second": tokens / seconds,
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "peak_mib": peak,
        "parameters": parameters,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precision", choices=PRECISIONS, default="bf16")
    parser.add_argument("--preset", default="ht-table5/l6-xl", help="the shape (an XL preset)")
    parser.add_argument("--reference", type=Path, default=REFERENCE, help="the code's pytorch/")
    parser.add_argument("--vocab", type=int, default=204, help="symbols (enwik8: 204)")
    parser.add_argument("--batch", type=int, default=0, help="rows (0: the preset's)")
    parser.add_argument("--seq-len", type=int, default=0, help="segment (0: the preset's)")
    parser.add_argument("--mem-len", type=int, default=0, help="memory (0: the preset's)")
    parser.add_argument("--set", nargs="*", default=[], help="more key=value settings")
    parser.add_argument("--fused-optimizer", action="store_true", help="fused Adam, both")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per round")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--rounds", type=int, default=2, help="rounds, the order alternating")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    missing = missing_reference(args.reference)
    if missing:
        print(
            f"skipped: the Transformer-XL reference code is not in {args.reference} (missing "
            f"{', '.join(missing)}; kimiyoung/transformer-xl's pytorch/ folder goes there)"
        )
        return 0
    device = torch.device(args.device)
    config = our_config(args)
    if config.model.family != "xl":
        raise SystemExit(f"--preset {args.preset} is not a Transformer-XL (model.family=xl)")
    check_reference(args.reference)
    reference = import_reference(args.reference)
    print_machine(args.device)
    record = Record(args.device)
    dtype = AUTOCAST_DTYPES.get(args.precision, torch.float32)
    peak = matmul_peak_flops(dtype, args.device)
    rows, length = config.data.batch_size, config.data.seq_len
    generator = torch.Generator().manual_seed(0)
    stream = torch.randint(0, args.vocab, (rows, (args.warmup + args.steps) * length + 1),
                           generator=generator).to(device)  # fmt: skip
    segments = [
        (stream[:, i * length : (i + 1) * length], stream[:, i * length + 1 : (i + 1) * length + 1])
        for i in range(args.warmup + args.steps)
    ]

    def ours() -> tuple[nn.Module, Step]:
        torch.manual_seed(0)
        model = LanguageModel(config.model).to(device).train()
        return model, our_step(model, config, device, args.fused_optimizer)

    def theirs() -> tuple[nn.Module, Step]:
        torch.manual_seed(0)
        model = reference_model(reference, config).to(device).train()
        return model, reference_step(model, config, device, args.fused_optimizer)

    builds = {"ours": ours, "reference MemTransformerLM": theirs}
    runs: dict[str, list[dict]] = {name: [] for name in builds}
    for round_ in range(args.rounds):
        order = list(builds) if round_ % 2 == 0 else list(builds)[::-1]
        for name in order:
            runs[name].append(time_model(builds[name], segments, args.warmup, device))
    flops = count_flops_per_token(config.model, length)
    rates = {
        name: statistics.median(r["tokens_per_second"] for r in rs) for name, rs in runs.items()
    }
    first = rates["ours"]
    table = []
    for name, rs in runs.items():
        peaks = [r["peak_mib"] for r in rs if r["peak_mib"] is not None]
        table.append([
            name, f"{rs[0]['parameters']:,}", f"{rates[name]:,.0f}", f"{first / rates[name]:.2f}",
            f"{rates[name] * flops / peak:.1%}", f"{max(peaks):,.0f}" if peaks else "-",
            f"{rs[-1]['first_loss']:.3f} → {rs[-1]['last_loss']:.3f}",
        ])  # fmt: skip
    m = config.model
    record.table(
        [
            "model",
            "params",
            "tokens/s",
            "ours ÷ this (tokens/s)",
            "MFU",
            "peak MiB",
            "loss first → last",
        ],
        table,
        caption=f"Transformer-XL training step at the {args.preset} shape: {m.n_layers} layers, "
        f"d {m.d_model}, {m.n_heads} heads of {m.head_dim}, d_inner {m.d_inner}, batch {rows} x "
        f"{length}, memory {m.memory.mem_len}, vocabulary {args.vocab}, {args.device} "
        f"{args.precision}, fused Adam {args.fused_optimizer}; matmul peak {peak / 1e12:.3f} "
        f"TFLOP/s; median of {args.rounds} rounds of {args.steps} steps after {args.warmup}",
        align="lrrrrrl",
    )
    record.write(
        args.json,
        {
            "matmul_peak_flops": peak,
            "flops_per_token": flops,
            "tokens_per_second": rates,
            "ours_over_reference": first / rates["reference MemTransformerLM"],
            "peak_mib": {
                name: max((r["peak_mib"] for r in rs if r["peak_mib"] is not None), default=None)
                for name, rs in runs.items()
            },
            "runs": runs,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
