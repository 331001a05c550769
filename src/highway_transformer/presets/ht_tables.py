"""Presets for the Highway Transformer paper's tables (Chai et al., ACL 2020).

Hyper-parameters come from the paper's Appendix A and the authors' / R-Transformer code,
as digested in the project's reference notes; each preset's ``source`` says which. The
authors published their Transformer-XL code only; the PTB rows follow the R-Transformer code
(``DSE-MSU/R-transformer``): no embedding scale, no final LayerNorm, and for the
R-Transformer its own LayerNorm (unbiased std + 1e-6, ``model.layer_norm=rt``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..config import Config, DataConfig, GateConfig, LocalRNNConfig, ModelConfig, TrainConfig

# Char PTB: 5,059,550 training symbols / (16 rows * 320 counted positions) = 989 steps/epoch.
CHAR_PTB_STEPS_PER_EPOCH = 989
# Word PTB: 929,589 training tokens / (16 rows * 40 counted positions) = 1,453 steps/epoch.
WORD_PTB_STEPS_PER_EPOCH = 1453

GATE_VARIANTS: dict[str, GateConfig] = {
    "": GateConfig(kind="none"),
    "+sigmoid": GateConfig(kind="sdu", activation="sigmoid"),
    "+tanh": GateConfig(kind="sdu", activation="tanh"),
}


def _code_norms(family: str) -> dict[str, str]:
    """The RT code's normalisation choices: its own LayerNorm for the R-Transformer, no final
    LayerNorm and no embedding scale for either family."""
    layer_norm = "rt" if family == "rtransformer" else "torch"
    return {"layer_norm": layer_norm, "final_norm": "false", "embedding_scale": "false"}


def _attention_dropout(family: str, dropout: float) -> float:
    """The RT code's ``MHPooling`` drops the attention weights at the sublayer rate; the T-L3
    rows have no reference code and keep dropout to the sublayer outputs, the FFN and the
    embeddings (docs/fidelity.md)."""
    return dropout if family == "rtransformer" else 0.0


def char_ptb(family: str, gate: GateConfig) -> Config:
    """T-L3 / RT-L3 on char PTB (HT A.1; RT code language_char defaults)."""
    model = ModelConfig(
        family=family,
        d_model=512,
        n_layers=3,
        n_heads=8,
        d_inner=2048,  # RT code: d_ff = 4 * d_model
        dropout=0.15,
        dropout_attn=_attention_dropout(family, 0.15),
        init="uniform",
        init_range=0.1,
        tie_weights=True,  # RT code language_char/model.py: decoder.weight = encoder.weight
        positional="none" if family == "rtransformer" else "sinusoidal",
        **_code_norms(family),
        gate=gate,
        local_rnn=LocalRNNConfig(cell="gru", window=7, per_block=1),
    )
    data = DataConfig(corpus="ptb-char", batch_size=16, seq_len=400, context=80, eval_batch_size=16)
    train = TrainConfig(
        optimizer="sgd",
        lr=2.0,
        schedule="linear",
        clip=0.15,
        max_steps=100 * CHAR_PTB_STEPS_PER_EPOCH,
        eval_interval=CHAR_PTB_STEPS_PER_EPOCH,
        log_interval=100,
        seed=1111,
    )
    return Config(
        source="HT Appendix A.1 (batch 16, clip 0.15, 3 layers, d 512, 8 heads, len 400, dropout "
        "0.15, SGD lr 2 linear decay, U(-0.1, 0.1)); HT section 4.1.1: 100 epochs; RT code "
        "language_char defaults: loss on the last 320 positions, tied embeddings, d_ff = 4 d, "
        "GRU window 7; for RT-L3 the RT LayerNorm (unbiased std + 1e-6) and dropout 0.15 on "
        "the attention weights",
        model=model,
        data=data,
        train=train,
    )


def word_ptb(family: str, gate: GateConfig) -> Config:
    """T-L3 / RT-L3 on word PTB (HT A.2; RT code language_word defaults)."""
    model = ModelConfig(
        family=family,
        d_model=128,
        n_layers=3,
        n_heads=8,
        d_inner=512,  # RT code: d_ff = 4 * d_model
        dropout=0.35,
        dropout_emb=0.15,
        dropout_attn=_attention_dropout(family, 0.35),
        init="uniform",
        init_range=0.01,
        tie_weights=True,
        positional="none" if family == "rtransformer" else "sinusoidal",
        **_code_norms(family),
        gate=gate,
        local_rnn=LocalRNNConfig(cell="lstm", window=9, per_block=1),
    )
    data = DataConfig(corpus="ptb-word", batch_size=16, seq_len=80, context=40, eval_batch_size=16)
    train = TrainConfig(
        optimizer="sgd",
        lr=2.0,
        schedule="anneal",  # RT code language_word: halve when no better than the last 5
        anneal_factor=0.5,
        anneal_rule="window",
        anneal_window=5,
        anneal_after=5,
        clip=0.35,
        max_steps=100 * WORD_PTB_STEPS_PER_EPOCH,
        eval_interval=WORD_PTB_STEPS_PER_EPOCH,
        log_interval=100,
        seed=1111,
    )
    return Config(
        source="HT Appendix A.2 (dropout 0.35 sublayers / 0.15 embeddings, SGD lr 2 'annealed', "
        "clip 0.35, d 128, 8 heads, len 80, U(-0.01, 0.01)); HT section 4.1.2: 100 epochs; RT code "
        "language_word defaults: loss on the last 40 positions, tied embeddings, d_ff = 4 d, "
        "LSTM window 9, lr halved when validation is no better than the worst of the last 5 "
        "epochs, after epoch 5; for RT-L3 the RT LayerNorm (unbiased std + 1e-6) and dropout "
        "0.35 on the attention weights",
        model=model,
        data=data,
        train=train,
    )


def _table(
    prefix: str, family: str, builder: Callable[[str, GateConfig], Config], what: str
) -> dict[str, tuple[str, Callable[[], Config]]]:
    out: dict[str, tuple[str, Callable[[], Config]]] = {}
    base = "t-l3" if family == "transformer" else "rt-l3"
    for suffix, gate in GATE_VARIANTS.items():
        label = {"": "plain", "+sigmoid": "σ-gate SDU", "+tanh": "tanh-gate SDU"}[suffix]
        out[f"{prefix}/{base}{suffix}"] = (
            f"{what}, {label}",
            lambda g=gate: builder(family, GateConfig(**g.__dict__)),
        )
    return out


def rt_paper(builder: Callable[[str, GateConfig], Config], family: str = "rtransformer") -> Config:
    """The R-Transformer paper's PTB rows (RT Tables 3-4) as its code runs them: pre-LN, dropout
    on the attention weights (``MHPooling``), PyTorch's initialisation but for the tied token
    table, and its schedules (char: lr / 10 when validation is worse than the worst of the last
    3 epochs; word: halved when no better than the worst of the last 5; both after epoch 5).
    The char rows read the code's character stream (``ptb-char-rt``)."""
    config = builder(family, GateConfig())
    model = config.model
    model.norm = "pre"
    model.dropout_attn = model.dropout  # also the Transformer rows: RT's block without LocalRNN
    model.init = "torch"
    config.source += (
        "; RT code: pre-LN sublayer connections (x + Dropout(f(LN(x)))), dropout on the "
        "attention weights, PyTorch's default initialisation but for the tied token table"
    )
    if config.data.corpus == "ptb-char":
        model.init_embedding = "uniform"  # language_char/model.py: U(-0.1, 0.1), bias 0
        config.data.corpus, config.data.eval_batch_size = "ptb-char-rt", 1
        # constant lr, / 10 on a worse validation; the test figure is the last epoch's model
        config.train = replace(config.train, schedule="anneal", anneal_rule="window-strict",
                               anneal_window=3, anneal_after=5, anneal_factor=0.1,
                               final_weights="last")  # fmt: skip
        config.source += (
            "; RT code language_char: the word files' characters with <eos> spelled out, "
            "token table U(-0.1, 0.1), constant lr 2, / 10 on a worse validation, evaluation "
            "as one row, test of the last epoch's weights"
        )
    else:
        model.init_embedding, model.init_std = "normal", 0.01  # language_word/model.py
        config.data.eval_batch_size = 10
        config.source += "; RT code language_word: token table N(0, 0.01), evaluation in 10 rows"
    return config


PRESETS: dict[str, tuple[str, Callable[[], Config]]] = {
    "rt-paper/char-ptb": ("R-Transformer paper Table 3: char PTB", lambda: rt_paper(char_ptb)),
    "rt-paper/word-ptb": ("R-Transformer paper Table 4: word PTB", lambda: rt_paper(word_ptb)),
    "rt-paper/char-ptb-transformer": (
        "R-Transformer paper Table 3: char PTB, Transformer (RT code settings)",
        lambda: rt_paper(char_ptb, "transformer"),
    ),
    "rt-paper/word-ptb-transformer": (
        "R-Transformer paper Table 4: word PTB, Transformer (RT code settings)",
        lambda: rt_paper(word_ptb, "transformer"),
    ),
    **_table("ht-table1", "transformer", char_ptb, "HT Table 1: 3-layer Transformer, char PTB"),
    **_table("ht-table2", "rtransformer", char_ptb, "HT Table 2: 3-layer R-Transformer, char PTB"),
    **_table("ht-table3", "transformer", word_ptb, "HT Table 3: 3-layer Transformer, word PTB"),
    **_table("ht-table4", "rtransformer", word_ptb, "HT Table 4: 3-layer R-Transformer, word PTB"),
}
