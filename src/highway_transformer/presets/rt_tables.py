"""Presets for the R-Transformer paper's tasks (Wang et al. 2019, Tables 1-2) and small tasks.

RT Table 1 (pixel MNIST) and Table 2 (Nottingham) with the settings of the RT paper and the
authors' code (``image/experiment.py``, ``audio/experiment.py``, ``models/RTransformer.py``),
as digested in the project's reference notes: the code normalises first (pre-LN), uses
``d_ff = 4 d``, dropout on the attention weights equal to the sublayer dropout and PyTorch's
default initialisation and, for the R-Transformer, its own LayerNorm (unbiased std + 1e-6:
``model.layer_norm=rt``) and no final LayerNorm. Each table has the plain model and
``+sigmoid`` / ``+tanh`` variants with the self-dependency unit on every sublayer (HT eqs.
21-24).

The ``digits/``, ``copy/``, ``adding/`` and ``seq2seq/`` presets are small CPU-sized runs
(minutes) of the same code paths.
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import (
    Config,
    DataConfig,
    GateConfig,
    LocalRNNConfig,
    ModelConfig,
    TaskConfig,
    TrainConfig,
)

# MNIST: 55,000 training images (5,000 held out for validation) / batch 32.
MNIST_STEPS_PER_EPOCH = 1719
# Nottingham: 694 training pieces, one piece per step as in the RT code.
NOTTINGHAM_STEPS_PER_EPOCH = 694
# The RT code's SGD rate 5e-5 is for the NLL *summed* over a piece's steps; the loss here is
# the mean per step, so the rate is scaled by the mean counted length (176,561 - 694) / 694.
NOTTINGHAM_MEAN_STEPS = 253.4

GATE_VARIANTS: dict[str, tuple[str, GateConfig]] = {
    "": ("plain", GateConfig(kind="none")),
    "+sigmoid": ("σ-gate SDU", GateConfig(kind="sdu", activation="sigmoid")),
    "+tanh": ("tanh-gate SDU", GateConfig(kind="sdu", activation="tanh")),
}


def _rt_model(
    family: str,
    d_model: int,
    n_layers: int,
    n_heads: int,
    dropout: float,
    gate: GateConfig,
    local_rnn: LocalRNNConfig,
) -> ModelConfig:
    return ModelConfig(
        family=family,
        d_model=d_model,
        n_layers=n_layers,
        n_heads=n_heads,
        d_inner=4 * d_model,
        dropout=dropout,
        dropout_attn=dropout,
        norm="pre",
        layer_norm="rt" if family == "rtransformer" else "torch",
        # The RT code's RTransformer defines a final norm it never applies; the Transformer
        # rows keep the pre-LN Transformer's final norm.
        final_norm="false" if family == "rtransformer" else "true",
        embedding_scale="false",
        init="torch",
        tie_weights=False,
        positional="none" if family == "rtransformer" else "sinusoidal",
        gate=gate,
        local_rnn=local_rnn,
    )


def rt_mnist(family: str, gate: GateConfig) -> Config:
    """RT Table 1: pixel-by-pixel MNIST (784 steps of one pixel, class at the last step)."""
    model = _rt_model(
        family, 32, 8, 2, 0.05, gate, LocalRNNConfig(cell="gru", window=7, per_block=2)
    )
    return Config(
        source="RT Table 1 and RT code image/experiment.py: 8 layers, d 32, 2 heads, GRU window "
        "7, 2 LocalRNN per block, Adam lr 1e-3 divided by 10 every 10 epochs, batch 32, dropout "
        "0.05, no clipping, 50 epochs, last position classified",
        model=model,
        data=DataConfig(batch_size=32, eval_batch_size=256),
        train=TrainConfig(
            optimizer="adam",
            lr=1e-3,
            schedule="step",
            anneal_factor=0.1,
            lr_step=10 * MNIST_STEPS_PER_EPOCH,
            clip=0.0,
            max_steps=50 * MNIST_STEPS_PER_EPOCH,
            eval_interval=MNIST_STEPS_PER_EPOCH,
            log_interval=100,
            seed=1111,
        ),
        task=TaskConfig(name="pixels", dataset="mnist", pooling="last", max_len=784),
    )


def rt_nottingham(family: str, gate: GateConfig) -> Config:
    """RT Table 2: Nottingham polyphonic music, NLL per time step."""
    model = _rt_model(
        family, 160, 3, 4, 0.1, gate, LocalRNNConfig(cell="gru", window=6, per_block=1)
    )
    return Config(
        source="RT Table 2 and RT code audio/experiment.py: 3 layers, d 160, 4 heads, GRU window "
        "6, dropout 0.1, one piece per step, SGD lr 5e-5 on the per-piece summed NLL "
        f"(here x {NOTTINGHAM_MEAN_STEPS} for the per-step mean), no gradient clipping (the "
        "script's clip 0.15 runs before backward and clips nothing), lr / 10 when a validation "
        "is worse than each of the previous 3 after epoch 10, 100 epochs",
        model=model,
        data=DataConfig(batch_size=1, eval_batch_size=8),
        train=TrainConfig(
            optimizer="sgd",
            lr=5e-5 * NOTTINGHAM_MEAN_STEPS,
            schedule="anneal",
            anneal_factor=0.1,
            anneal_rule="window-strict",
            anneal_window=3,
            anneal_after=10,
            # The script calls clip_grad_norm_ between zero_grad() and backward(): on zero
            # gradients, so its training is unclipped (docs/fidelity.md).
            clip=0.0,
            max_steps=100 * NOTTINGHAM_STEPS_PER_EPOCH,
            eval_interval=NOTTINGHAM_STEPS_PER_EPOCH,
            log_interval=100,
            seed=1111,
        ),
        task=TaskConfig(name="music", dataset="nottingham"),
    )


def _small_model(family: str, d_model: int = 32, n_layers: int = 2, window: int = 7) -> ModelConfig:
    return ModelConfig(
        family=family,
        d_model=d_model,
        n_layers=n_layers,
        n_heads=2,
        d_inner=2 * d_model,
        dropout=0.0,
        norm="pre",
        layer_norm="rt" if family == "rtransformer" else "torch",  # the family's code
        init="torch",
        tie_weights=False,
        positional="none" if family == "rtransformer" else "sinusoidal",
        local_rnn=LocalRNNConfig(cell="gru", window=window, per_block=1),
    )


def _adam(max_steps: int, eval_interval: int, lr: float = 3e-3) -> TrainConfig:
    return TrainConfig(
        optimizer="adam",
        lr=lr,
        schedule="cosine",
        clip=1.0,
        max_steps=max_steps,
        eval_interval=eval_interval,
        log_interval=50,
        seed=1111,
    )


def digits(family: str) -> Config:
    """Pixel-by-pixel 8x8 digits (scikit-learn, offline): a small stand-in for RT Table 1."""
    return Config(
        source="small preset of this project: RT Table 1's task on scikit-learn's 8x8 digits "
        "(64 steps), Adam with cosine decay",
        model=_small_model(family),
        data=DataConfig(batch_size=32, eval_batch_size=270),
        train=_adam(1500, 250),
        task=TaskConfig(name="pixels", dataset="digits", pooling="last", max_len=64),
    )


def copy_memory(family: str) -> Config:
    """Copy memory with a delay of 20 steps (TCN suite, scaled down)."""
    return Config(
        source="small preset of this project: the TCN copy-memory task (8 symbols, 10 copied) "
        "with delay 20, Adam with cosine decay",
        model=_small_model(family),
        data=DataConfig(batch_size=32, eval_batch_size=256),
        train=_adam(1500, 250),
        task=TaskConfig(name="copy", length=20),
    )


def adding(family: str) -> Config:
    """The adding problem over 50 steps (TCN suite, scaled down)."""
    return Config(
        source="small preset of this project: the adding problem (Hochreiter & Schmidhuber 1997) "
        "over 50 steps, mean pooling, Adam with cosine decay",
        model=_small_model(family),
        data=DataConfig(batch_size=32, eval_batch_size=256),
        train=_adam(1500, 250),
        task=TaskConfig(name="adding", length=50, pooling="mean"),
    )


def seq2seq_toy() -> Config:
    """The toy reversal-translation task with a small encoder-decoder."""
    return Config(
        source="small preset of this project: encoder-decoder Transformer (slides) on the toy "
        "reverse-and-substitute pairs of up to 8 symbols, scaled dot score, greedy decoding",
        model=_small_model("transformer", d_model=32, n_layers=2),
        data=DataConfig(batch_size=32, eval_batch_size=256),
        train=_adam(600, 200, lr=3e-3),
        task=TaskConfig(name="seq2seq", length=8, score="scaled_dot", beam_size=1),
    )


def _table(
    prefix: str, builder: Callable[[str, GateConfig], Config], what: str
) -> dict[str, tuple[str, Callable[[], Config]]]:
    out: dict[str, tuple[str, Callable[[], Config]]] = {}
    for family in ("transformer", "rtransformer"):
        label = "Transformer" if family == "transformer" else "R-Transformer"
        for suffix, (gate_label, gate) in GATE_VARIANTS.items():
            out[f"{prefix}/{family}{suffix}"] = (
                f"{what}, {label}, {gate_label}",
                lambda f=family, g=gate: builder(f, GateConfig(**g.__dict__)),
            )
    return out


def _small(
    prefix: str, builder: Callable[[str], Config], what: str
) -> dict[str, tuple[str, Callable[[], Config]]]:
    return {
        f"{prefix}/{family}": (f"{what}, {family}", lambda f=family: builder(f))
        for family in ("transformer", "rtransformer")
    }


PRESETS: dict[str, tuple[str, Callable[[], Config]]] = {
    **_table("rt-table1", rt_mnist, "RT Table 1: pixel MNIST, 8 layers d 32"),
    **_table("rt-table2", rt_nottingham, "RT Table 2: Nottingham, 3 layers d 160"),
    **_small("digits", digits, "pixel-by-pixel 8x8 digits (offline)"),
    **_small("copy", copy_memory, "copy memory, delay 20"),
    **_small("adding", adding, "adding problem, 50 steps"),
    "seq2seq/toy": ("toy translation, encoder-decoder (2+2 layers, d 32)", seq2seq_toy),
}
