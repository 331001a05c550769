"""The Highway Transformer PTB presets (``presets/ht_tables.py``): HT Tables 1-4 rows with the
settings of HT Appendix A.1-A.2 and the RT code, and the RT paper's own PTB rows."""

from __future__ import annotations

import pytest

from highway_transformer.presets import get_preset, ht_tables

GATES = {"": ("none", "sigmoid"), "+sigmoid": ("sdu", "sigmoid"), "+tanh": ("sdu", "tanh")}


@pytest.mark.parametrize(
    ("table", "row", "corpus"),
    [("ht-table1", "t-l3", "ptb-char"), ("ht-table2", "rt-l3", "ptb-char"),
     ("ht-table3", "t-l3", "ptb-word"), ("ht-table4", "rt-l3", "ptb-word")],
)  # fmt: skip
def test_each_table_has_its_three_gates_on_its_corpus(table: str, row: str, corpus: str) -> None:
    for suffix, gate in GATES.items():
        config = get_preset(f"{table}/{row}{suffix}")
        assert (config.model.gate.kind, config.model.gate.activation) == gate
        assert config.data.corpus == corpus and config.model.n_layers == 3
        rt = row == "rt-l3"
        assert config.model.family == ("rtransformer" if rt else "transformer")
        assert config.model.layer_norm == ("rt" if rt else "torch")  # the RT code's own
        assert config.model.positional == ("none" if rt else "sinusoidal")


def test_char_ptb_is_appendix_a1() -> None:
    config = get_preset("ht-table1/t-l3")
    m, d, t = config.model, config.data, config.train
    assert (m.d_model, m.n_heads, m.d_inner, m.dropout, m.init_range) == (512, 8, 2048, 0.15, 0.1)
    assert (d.batch_size, d.seq_len, d.context) == (16, 400, 80)  # loss on the last 320
    assert (t.optimizer, t.lr, t.schedule, t.clip) == ("sgd", 2.0, "linear", 0.15)
    assert t.max_steps == 100 * ht_tables.CHAR_PTB_STEPS_PER_EPOCH  # 100 epochs
    assert m.dropout_attn == 0.0 and get_preset("ht-table2/rt-l3").model.dropout_attn == 0.15


def test_word_ptb_is_appendix_a2() -> None:
    m = get_preset("ht-table3/t-l3").model
    assert (m.d_model, m.d_inner, m.dropout, m.dropout_emb, m.init_range) == (
        128, 512, 0.35, 0.15, 0.01
    )  # fmt: skip
    assert get_preset("ht-table3/t-l3").data.corpus == "ptb-word"


def test_the_rt_papers_rows_run_as_its_code() -> None:
    for name in ("rt-paper/char-ptb", "rt-paper/word-ptb"):
        config = get_preset(name)
        assert config.model.family == "rtransformer" and config.model.norm == "pre"
    assert get_preset("rt-paper/char-ptb").data.corpus == "ptb-char-rt"
    assert get_preset("rt-paper/char-ptb-transformer").model.family == "transformer"
