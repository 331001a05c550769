"""The modern baseline's training step against the code users would write or install instead.

Ours is the ``modern/transformer`` preset (pre-LN RMSNorm, RoPE θ 10000, SwiGLU of hidden 344
for ``d_inner`` 512, no biases, tied output) at d 128, 3 layers, 8 heads of 16, batch 16 × 100
tokens of 50 symbols, fp32, on the CPU with one thread by default, dropout 0. It is timed
beside:

* ``nanoGPT-style Llama``: the same architecture written plainly here (:class:`PlainLlama`:
  separate q/k/v/o and gate/up/down Linears, ``F.scaled_dot_product_attention``), holding a
  copy of our weights; before any timing the two losses must agree to 1e-5;
* ``x-transformers`` (when installed): ``TransformerWrapper(Decoder(rotary_pos_emb=True,
  use_rmsnorm=True, ff_glu=True, ff_swish=True, ff_no_bias=True, attn_flash=True))`` at the same
  sizes, for speed only: its own initialisation, RMSNorm written as ``F.normalize · √d · g``,
  rotary features per its defaults;
* ours with the attention-output gate (``+attn-output``, ``+attn-output-headwise``), whose extra
  time per step is set against the gate's FLOP bound: ``2·d·(H·dh)`` (elementwise) or ``2·d·H``
  (headwise) per token and layer for ``W_θ``, plus the sigmoid and the multiply on ``H·dh``
  features, times 3 for forward and backward, at the rate our own step reaches.

A step is forward, cross-entropy, backward and an AdamW update (lr 1e-3, weight decay 0.01).
The variants alternate over ``--rounds`` rounds of ``--steps`` steps (the machine may be
shared); tokens/s are by this process's CPU time per step (median of the rounds), and each
ratio ours/theirs is the median over the rounds of the two CPU times measured in that round.

    python benchmarks/modern_baseline.py
    python benchmarks/modern_baseline.py --rounds 7 --steps 5 \
        --json docs/benchmarks/modern_baseline.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Record, add_json_argument, print_machine  # noqa: E402

from highway_transformer.config import ModelConfig  # noqa: E402
from highway_transformer.models.lm import LanguageModel, count_flops_per_token  # noqa: E402
from highway_transformer.nn.feedforward import swiglu_hidden  # noqa: E402
from highway_transformer.presets import get_preset  # noqa: E402

VOCAB = 50
OURS = "ours modern/transformer"
PLAIN = "nanoGPT-style Llama"
XT = "x-transformers"
GATED = {"ours +attn-output": "elementwise", "ours +attn-output-headwise": "headwise"}


def our_config(args: argparse.Namespace, attn_output_gate: str = "none") -> ModelConfig:
    config = get_preset("modern/transformer").model
    config.vocab_size, config.d_model, config.n_layers = VOCAB, args.d_model, args.layers
    config.n_heads, config.d_inner = args.heads, args.d_inner
    config.dropout, config.dropout_emb, config.dropout_attn = 0.0, 0.0, 0.0
    config.attn_output_gate = attn_output_gate
    return config


# --------------------------------------------------------------------------- the plain Llama


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(d))

    def forward(self, x: Tensor) -> Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Llama's rotate-half RoPE on ``[B, H, L, dh]``."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


class PlainBlock(nn.Module):
    """``x + o(attn(rms(x)))``, then ``+ down(silu(gate(h)) ⊙ up(h))``, no biases."""

    def __init__(self, d: int, n_heads: int, hidden: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.attn_norm, self.mlp_norm = RMSNorm(d), RMSNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.gate = nn.Linear(d, hidden, bias=False)
        self.up = nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        b, length, d = x.shape
        h = self.attn_norm(x)
        q, k, v = (f(h).view(b, length, self.n_heads, -1).transpose(1, 2) for f in self.qkv())
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, length, d))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))

    def qkv(self) -> tuple[nn.Linear, nn.Linear, nn.Linear]:
        return self.q, self.k, self.v


class PlainLlama(nn.Module):
    """Embedding, blocks, final RMSNorm, output tied to the embedding."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d, hidden = config.d_model, swiglu_hidden(config.d_inner)
        self.theta, self.d_head = config.rope_theta, config.head_dim
        self.embed = nn.Embedding(config.vocab_size, d)
        self.blocks = nn.ModuleList(
            PlainBlock(d, config.n_heads, hidden) for _ in range(config.n_layers)
        )
        self.norm = RMSNorm(d)

    def rope_tables(self, length: int) -> tuple[Tensor, Tensor]:
        inv_freq = self.theta ** -(torch.arange(0, self.d_head, 2).float() / self.d_head)
        angles = torch.outer(torch.arange(length).float(), inv_freq)
        angles = torch.cat([angles, angles], dim=-1)
        return angles.cos(), angles.sin()

    def forward(self, tokens: Tensor) -> Tensor:
        cos, sin = self.rope_tables(tokens.shape[1])
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.norm(x) @ self.embed.weight.T


@torch.no_grad()
def copy_ours_into(ours: LanguageModel, plain: PlainLlama) -> None:
    plain.embed.weight.copy_(ours.embedding.weight)
    plain.norm.weight.copy_(ours.final_norm.weight)
    for block, mine in zip(plain.blocks, ours.blocks, strict=True):
        attn, ffn = mine.sublayers[0].attention, mine.sublayers[1]
        for linear, w in zip(block.qkv(), attn.qkv.weight.chunk(3), strict=True):
            linear.weight.copy_(w)
        block.o.weight.copy_(attn.out.weight)
        block.gate.weight.copy_(ffn.fc1.weight)
        block.up.weight.copy_(ffn.fc3.weight)
        block.down.weight.copy_(ffn.fc2.weight)
        block.attn_norm.weight.copy_(mine.connections[0].norm.weight)
        block.mlp_norm.weight.copy_(mine.connections[1].norm.weight)


def plain_loss(model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
    return F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))


def same_loss(ours: LanguageModel, plain: PlainLlama, x: Tensor, y: Tensor) -> tuple[float, float]:
    """Both losses on ``(x, y)``; they must agree to 1e-5, else nothing is timed."""
    with torch.no_grad():
        mine, theirs = ours(x, targets=y).loss.item(), plain_loss(plain, x, y).item()
    if abs(mine - theirs) > 1e-5:
        raise SystemExit(f"the plain Llama's loss {theirs} is not ours {mine}: not the same model")
    return mine, theirs


# --------------------------------------------------------------------------- x-transformers


def x_transformers_model(args: argparse.Namespace) -> nn.Module | None:
    """x-transformers' modern decoder at our sizes, or None when it is not installed."""
    try:
        from x_transformers import Decoder, TransformerWrapper
    except ImportError:
        return None
    hidden = swiglu_hidden(args.d_inner)
    return TransformerWrapper(
        num_tokens=VOCAB,
        max_seq_len=args.seq_len,
        use_abs_pos_emb=False,
        tie_embedding=True,
        attn_layers=Decoder(
            dim=args.d_model,
            depth=args.layers,
            heads=args.heads,
            attn_dim_head=args.d_model // args.heads,
            rotary_pos_emb=True,
            use_rmsnorm=True,
            ff_glu=True,
            ff_swish=True,
            ff_no_bias=True,
            ff_mult=hidden / args.d_model,  # its inner width int(d · mult): SwiGLU's 344
            attn_flash=True,
        ),
    )


# --------------------------------------------------------------------------- timing


def training_step(model: nn.Module, loss_of: Callable[[], Tensor]) -> Callable[[], None]:
    """Forward, cross-entropy, backward and an AdamW update of ``model``."""
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)

    def step() -> None:
        loss_of().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def variants(args: argparse.Namespace, x: Tensor, y: Tensor) -> tuple[dict, list[str]]:
    """The steps to time, and notes on what was checked before."""
    torch.manual_seed(0)
    ours = LanguageModel(our_config(args))
    plain = PlainLlama(our_config(args))
    copy_ours_into(ours, plain)
    mine, theirs = same_loss(ours.eval(), plain.eval(), x, y)
    notes = [f"same weights, same loss: ours {mine:.6f}, plain Llama {theirs:.6f}"]
    steps = {
        OURS: training_step(ours, lambda: ours(x, targets=y).loss),
        PLAIN: training_step(plain, lambda: plain_loss(plain, x, y)),
    }
    xt = x_transformers_model(args)
    if xt is None:
        notes.append("x-transformers is not installed: its row is left out")
    else:
        steps[XT] = training_step(xt, lambda: plain_loss(xt, x, y))
    for name, gate in GATED.items():
        torch.manual_seed(0)
        model = LanguageModel(our_config(args, gate))
        steps[name] = training_step(model, lambda m=model: m(x, targets=y).loss)
    return steps, notes


def cpu_seconds_per_step(step: Callable[[], None], steps: int) -> float:
    step()  # warm-up
    start = time.process_time()
    for _ in range(steps):
        step()
    return (time.process_time() - start) / steps


def alternate(calls: dict[str, Callable[[], None]], rounds: int, steps: int) -> dict[str, list]:
    """CPU seconds per step of each call, round by round, the calls in turn in each round."""
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            seconds[name].append(cpu_seconds_per_step(call, steps))
    return seconds


def ratio_cell(mine: list[float], theirs: list[float]) -> str:
    ratios = [m / t for m, t in zip(mine, theirs, strict=True)]
    return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"


def gate_bound_seconds(args: argparse.Namespace, gate: str, rate: float) -> float:
    """The gate's FLOPs per step (forward + backward = 3 × forward) at ``rate`` FLOP/s."""
    d, features = args.d_model, args.d_model  # H · dh = d here
    width = features if gate == "elementwise" else args.heads
    per_token = 2 * d * width + 2 * features  # W_θ, then the sigmoid and the multiply
    return 3 * per_token * args.layers * args.batch * args.seq_len / rate


def report(args: argparse.Namespace, seconds: dict[str, list], record: Record) -> dict:
    tokens = args.batch * args.seq_len
    median = {name: statistics.median(s) for name, s in seconds.items()}
    rows = [
        [
            name,
            f"{tokens / median[name]:,.0f}",
            f"{median[name] * 1e3:.1f}",
            "—" if name == OURS else ratio_cell(seconds[OURS], s),
        ]
        for name, s in seconds.items()
    ]
    record.table(
        ["variant", "tokens/s (CPU time)", "CPU ms/step", "ours/this CPU time: median (range)"],
        rows,
        caption=f"modern baseline step (forward, backward, AdamW), d {args.d_model}, "
        f"{args.layers} layers, {args.heads} heads, SwiGLU hidden {swiglu_hidden(args.d_inner)}, "
        f"batch {args.batch} x {args.seq_len}, cpu fp32, {args.threads} thread(s); median of "
        f"{args.rounds} alternating rounds of {args.steps} steps",
    )
    rate = count_flops_per_token(our_config(args), args.seq_len) * tokens / median[OURS]
    gate_rows = []
    for name, gate in GATED.items():
        extra = [g - o for g, o in zip(seconds[name], seconds[OURS], strict=True)]
        bound = gate_bound_seconds(args, gate, rate)
        gate_rows.append([
            gate, f"{statistics.median(extra) * 1e3:.2f}", f"{bound * 1e3:.2f}",
            f"{statistics.median(extra) / median[OURS]:.1%}",
        ])  # fmt: skip
    record.table(
        ["attention-output gate", "extra CPU ms/step (median)", "FLOP bound ms/step",
         "extra / ours"],
        gate_rows,
        caption=f"the gate's cost against its FLOP bound at our step's rate "
        f"({rate / 1e9:.2f} GFLOP/s)",
    )  # fmt: skip
    return {"cpu_seconds": seconds, "tokens": tokens, "flops_per_second": rate}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--d-inner", type=int, default=512)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print_machine()
    record = Record()
    generator = torch.Generator().manual_seed(1)
    x = torch.randint(0, VOCAB, (args.batch, args.seq_len), generator=generator)
    y = torch.randint(0, VOCAB, (args.batch, args.seq_len), generator=generator)
    steps, notes = variants(args, x, y)
    for note in notes:
        record.note(note)
    results = report(args, alternate(steps, args.rounds, args.steps), record)
    record.write(args.json, results)


if __name__ == "__main__":
    main()
