"""The Transformer-XL presets (``presets/xl_tables.py``): HT Tables 5-6 rows named by their
gates and layers, the L6-XL settings of HT A.3, and the XL paper's base settings."""

from __future__ import annotations

import pytest

from highway_transformer.presets import get_preset, xl_tables


@pytest.mark.parametrize(
    ("row", "kind", "activation", "layers"),
    [("", "none", "sigmoid", "all"), ("+tanh", "sdu", "tanh", "all"),
     ("+sigmoid-l1-3", "sdu", "sigmoid", "1-3"), ("+tanh-l1-6-noffn", "sdu", "tanh", "1-6\\FFN"),
     ("+highway", "highway", "sigmoid", "all"), ("+gated", "gated", "sigmoid", "all")],
)  # fmt: skip
def test_a_rows_name_says_its_gate(row: str, kind: str, activation: str, layers: str) -> None:
    gate = get_preset(f"ht-table5/l6-xl{row}").model.gate
    assert (gate.kind, gate.activation, gate.layers) == (kind, activation, layers)


def test_tables_5_and_6_have_their_rows() -> None:
    names = list(xl_tables.PRESETS)
    assert sum(n.startswith("ht-table5/") for n in names) == len(xl_tables.L6_ROWS) == 11
    assert sum(n.startswith("ht-table6/") for n in names) == len(xl_tables.L12_ROWS) == 17
    assert get_preset("ht-table6/l12-xl+sigmoid-l6-12").model.gate.layers == "6-12"


def test_l6_xl_is_appendix_a3() -> None:
    config = get_preset("ht-table5/l6-xl")
    m, d, t = config.model, config.data, config.train
    assert (m.family, m.n_layers, m.n_heads, m.d_head, m.d_model, m.d_inner) == (
        "xl", 6, 8, 64, 512, 2048
    )  # fmt: skip
    assert (m.dropout, m.memory.mem_len, d.seq_len, d.batch_size) == (0.1, 512, 512, 22)
    assert (t.optimizer, t.lr, t.schedule, t.clip, t.max_steps) == (
        "adam", 2.5e-4, "cosine", 0.25, 40_000
    )  # fmt: skip
    assert (d.eval_seq_len, m.memory.eval_mem_len, m.memory.eval_clamp_len) == (80, 2100, 820)
    assert m.memory.eval_same_length is True  # the test protocol
    assert "data.eval_seq_len=128" in xl_tables.DURING_TRAINING_EVAL


def test_the_xl_papers_bases_name_their_corpus() -> None:
    for corpus, name in (("enwik8", "enwik8"), ("text8", "text8"), ("wikitext-103", "wt103")):
        assert get_preset(f"xl-paper/{name}-base").data.corpus.startswith(corpus)
    assert get_preset("xl-paper/enwik8-base").data.corpus == "enwik8-xl"  # as the XL code reads it


@pytest.mark.parametrize("name", sorted(xl_tables.PRESETS))
def test_xl_presets_evaluate_through_the_reference_iterator(name: str) -> None:
    """eval.py and train.py read valid/test through LMOrderedIterator: the presets' test
    protocol and the HT Table 5 "eval" protocol use its layout."""
    assert get_preset(name).data.eval_layout == "reference"
    assert "data.eval_layout=reference" in xl_tables.DURING_TRAINING_EVAL
