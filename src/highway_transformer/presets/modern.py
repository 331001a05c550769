"""The modern baseline (a 2025 Llama/Qwen3-style block) on char PTB, with and without gates.

Pre-LN with RMSNorm, RoPE, a SwiGLU FFN, no biases, a final norm, N(0, 0.02) weights (the
Llama / Qwen3 ``initializer_range``), AdamW with warm-up and cosine decay, at the sizes and
steps of the ``cpu-modern`` scale's T-L3 (``experiments/scale.py``: d 128, 8 heads of 16,
windows of 100 with 20 of history, 19,780 steps, 50 validations of 50,000 tokens). Its gated
variants add the SDU of HT eqs. 21-24 on the connections, the attention-output gate of Qiu
et al. 2025 (G1) inside attention, or both.
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import Config, DataConfig, GateConfig, ModelConfig, TrainConfig
from .ht_tables import CHAR_PTB_STEPS_PER_EPOCH

#: cpu-modern's steps for T-L3: a fifth of HT A.1's 100 epochs.
STEPS = 20 * CHAR_PTB_STEPS_PER_EPOCH


#: Where each connection gate of the presets below comes from (for the config's ``source``).
_GATE_SOURCES = {
    "sdu": "SDU gate (HT eqs. 21-24)",
    "highway": "highway gate (HT eqs. 26-29)",
    "gated": "gated MHDPA (HT eqs. 30-31)",
    "gtrxl-gru": "GTrXL GRU gate (Parisotto et al. 2020, eq. 14)",
}


def modern_transformer(gate: GateConfig, attn_output_gate: str = "none") -> Config:
    """The modern baseline with the connection gate ``gate`` and the attention-output gate
    ``attn_output_gate`` (none | elementwise | headwise)."""
    model = ModelConfig(
        family="transformer",
        d_model=128,
        n_layers=3,
        n_heads=8,
        d_inner=512,  # SwiGLU hidden 344 (the 2/3 rule): the parameters of a 512 ReLU FFN
        dropout=0.15,
        norm="pre",
        final_norm="true",
        layer_norm="rmsnorm",
        positional="rope",
        ffn="swiglu",
        bias=False,
        init="normal",
        init_std=0.02,
        tie_weights=True,
        embedding_scale="false",
        gate=gate,
        attn_output_gate=attn_output_gate,
    )
    data = DataConfig(corpus="ptb-char", batch_size=16, seq_len=100, context=20, eval_batch_size=16)
    train = TrainConfig(
        optimizer="adamw",
        lr=1e-3,
        betas=(0.9, 0.99),
        weight_decay=0.01,
        schedule="cosine",
        warmup_steps=STEPS // 50,  # 2 %, as the cpu-adamw optimiser
        clip=1.0,
        max_steps=STEPS,
        eval_interval=STEPS // 50,
        eval_max_tokens=50_000,
        log_interval=100,
        seed=1111,
    )
    return Config(
        source="modern baseline (pre-LN, RMSNorm, RoPE θ 10000, SwiGLU, no biases, N(0, 0.02); "
        "Llama / Qwen3 style) at the cpu-modern scale's T-L3 sizes on char PTB, AdamW lr 1e-3 "
        "betas 0.9/0.99, weight decay 0.01, 2% warm-up, cosine, clip 1"
        + (f"; {_GATE_SOURCES[gate.kind]}" if gate.kind != "none" else "")
        + (
            f"; {attn_output_gate} attention-output gate (Qiu et al. 2025, G1)"
            if attn_output_gate != "none"
            else ""
        ),
        model=model,
        data=data,
        train=train,
    )


_SDU_TANH = GateConfig(kind="sdu", activation="tanh")

PRESETS: dict[str, tuple[str, Callable[[], Config]]] = {
    "modern/transformer": (
        "modern baseline (RMSNorm, RoPE, SwiGLU, no biases), char PTB, cpu-modern sizes",
        lambda: modern_transformer(GateConfig()),
    ),
    "modern/transformer+sdu-sigmoid": (
        "modern baseline + SDU (sigmoid) on every sublayer",
        lambda: modern_transformer(GateConfig(kind="sdu", activation="sigmoid")),
    ),
    "modern/transformer+sdu-tanh": (
        "modern baseline + SDU (tanh) on every sublayer",
        lambda: modern_transformer(_SDU_TANH),
    ),
    "modern/transformer+attn-output": (
        "modern baseline + elementwise attention-output gate (Qiu et al. 2025)",
        lambda: modern_transformer(GateConfig(), "elementwise"),
    ),
    "modern/transformer+attn-output-headwise": (
        "modern baseline + headwise attention-output gate (Qiu et al. 2025)",
        lambda: modern_transformer(GateConfig(), "headwise"),
    ),
    "modern/transformer+sdu-tanh+attn-output": (
        "modern baseline + SDU (tanh) + elementwise attention-output gate",
        lambda: modern_transformer(_SDU_TANH, "elementwise"),
    ),
    "modern/transformer+highway": (
        "modern baseline + highway gate (HT eqs. 26-29) on every sublayer",
        lambda: modern_transformer(GateConfig(kind="highway")),
    ),
    # HT's gated MHDPA gates the attention sublayer (HT section 3.3)
    "modern/transformer+gated-mhdpa": (
        "modern baseline + gated MHDPA (HT eqs. 30-31) on the attention sublayers",
        lambda: modern_transformer(GateConfig(kind="gated", sublayers=("attn",))),
    ),
    "modern/transformer+gtrxl-gru": (
        "modern baseline + GTrXL's GRU gate (b_g = 2) on every sublayer",
        lambda: modern_transformer(GateConfig(kind="gtrxl-gru")),
    ),
}
