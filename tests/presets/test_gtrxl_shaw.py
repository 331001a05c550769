"""The GTrXL and Shaw presets (``presets/gtrxl_shaw.py``): GTrXL gating on the L6-XL sizes,
pre-LN with a final norm and ``b_g = 2``; Shaw attention on the T-L3 rows without absolute
positions."""

from __future__ import annotations

import pytest

from highway_transformer.presets import get_preset


@pytest.mark.parametrize(
    ("name", "kind", "corpus"),
    [("gtrxl/char-ptb-gru", "gtrxl-gru", "ptb-char"),
     ("gtrxl/char-ptb-output", "gtrxl-output", "ptb-char"),
     ("gtrxl/enwik8-gru", "gtrxl-gru", "enwik8-xl"),
     ("gtrxl/enwik8-output", "gtrxl-output", "enwik8-xl")],
)  # fmt: skip
def test_gtrxl_gates_the_l6_xl_in_pre_ln(name: str, kind: str, corpus: str) -> None:
    config = get_preset(name)
    m = config.model
    assert (m.family, m.n_layers, m.d_model) == ("xl", 6, 512)
    assert (m.gate.kind, m.gate.bias, m.norm, m.final_norm) == (kind, 2.0, "pre", "true")
    assert config.data.corpus == corpus
    if corpus == "ptb-char":  # the memory provides the history
        assert (config.data.seq_len, config.data.context, m.memory.mem_len) == (320, 0, 320)


@pytest.mark.parametrize(
    ("name", "gate", "d_model"),
    [("shaw/t-l3-char-ptb", "none", 512), ("shaw/t-l3-char-ptb+sigmoid", "sdu", 512),
     ("shaw/t-l3-word-ptb", "none", 128)],
)  # fmt: skip
def test_shaw_replaces_the_positions_of_the_t_l3_rows(name: str, gate: str, d_model: int) -> None:
    m = get_preset(name).model
    assert (m.attention, m.positional, m.shaw_clip) == ("shaw", "none", 16)
    assert (m.family, m.gate.kind, m.d_model, m.n_layers) == ("transformer", gate, d_model, 3)
    assert "Shaw et al. 2018" in get_preset(name).source
