"""Presets for Gated Transformer-XL and Shaw relative-position attention.

GTrXL (Parisotto et al. 2019): identity-map reordering (pre-LN) with gating layers in place of
the residual additions; the GRU gate's bias b_g = 2 (the GTrXL paper's value) starts each
layer near the identity. Shaw et al. (2018): learned relative-position embeddings of the
clipped distance (k = 16, the paper's translation setting) on the 3-layer Transformer.
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import Config, GateConfig
from .ht_tables import char_ptb, word_ptb
from .xl_tables import xl_enwik8


def gtrxl(gate: str, corpus: str) -> Config:
    """L6-XL sizes (HT A.3) with GTrXL gating; on char PTB with the T-L3 data settings."""
    config = xl_enwik8(6, GateConfig(kind=gate, bias=2.0), 40_000)
    config.model.norm = "pre"
    config.model.final_norm = "true"  # the GTrXL paper normalises the last block's output
    if corpus == "ptb-char":
        ptb = char_ptb("transformer", GateConfig())
        config.data = ptb.data
        config.data.context = 0  # the memory provides the history
        config.data.seq_len = 320
        config.model.memory.eval_mem_len = None
        config.model.memory.eval_clamp_len = None
        config.model.memory.eval_same_length = None
        config.model.memory.mem_len = 320
        config.data.eval_seq_len = None
    config.source = (
        f"GTrXL (Parisotto et al. 2019) {gate} gating, b_g 2, identity-map reordering, on the "
        "L6-XL sizes of HT A.3"
        + (" with char-PTB data" if corpus == "ptb-char" else "")
        + "; final LayerNorm (GTrXL paper), the XL code's embedding scale and dropout sites"
    )
    return config


def shaw(builder: Callable[[str, GateConfig], Config], gate: GateConfig) -> Config:
    config = builder("transformer", gate)
    config.model.attention = "shaw"
    config.model.positional = "none"
    config.model.shaw_clip = 16
    config.source += "; Shaw et al. 2018 relative positions, clip k = 16, no absolute PE"
    return config


PRESETS: dict[str, tuple[str, Callable[[], Config]]] = {
    "gtrxl/char-ptb-gru": (
        "GTrXL-GRU, L6-XL sizes, char PTB",
        lambda: gtrxl("gtrxl-gru", "ptb-char"),
    ),
    "gtrxl/char-ptb-output": (
        "GTrXL-output, L6-XL sizes, char PTB",
        lambda: gtrxl("gtrxl-output", "ptb-char"),
    ),
    "gtrxl/enwik8-gru": ("GTrXL-GRU, L6-XL sizes, enwik8", lambda: gtrxl("gtrxl-gru", "enwik8")),
    "gtrxl/enwik8-output": (
        "GTrXL-output, L6-XL sizes, enwik8",
        lambda: gtrxl("gtrxl-output", "enwik8"),
    ),
    "shaw/t-l3-char-ptb": (
        "Shaw relative attention, 3-layer Transformer, char PTB",
        lambda: shaw(char_ptb, GateConfig()),
    ),
    "shaw/t-l3-char-ptb+sigmoid": (
        "Shaw relative attention + σ-SDU, 3-layer Transformer, char PTB",
        lambda: shaw(char_ptb, GateConfig(kind="sdu")),
    ),
    "shaw/t-l3-word-ptb": (
        "Shaw relative attention, 3-layer Transformer, word PTB",
        lambda: shaw(word_ptb, GateConfig()),
    ),
}
