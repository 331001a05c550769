"""The registry of paper rows (``experiments/registry.py``) checked against the papers: every
table's rows, their settings and published numbers (HT Tables 5-6 in full, with the printed
decimals, the RT tables), and unknown names answered with the closest."""

from __future__ import annotations

import pytest

from highway_transformer.errors import ConfigError
from highway_transformer.experiments import (
    get_experiment,
    list_experiments,
    resolve_experiments,
    table_experiments,
)
from highway_transformer.experiments.registry import CONTRASTS
from highway_transformer.presets import PRESETS
from highway_transformer.validation import build_config

# HT Table 6 as printed: row -> (eval bpc, test bpc).
TABLE6 = {
    "": (1.090, 1.07160), "+tanh-l1-12": (1.143, 1.12797), "+tanh-l1-6": (1.100, 1.08234),
    "+tanh-l1-3": (1.090, 1.07140), "+tanh-l1-2": (1.089, 1.06904), "+tanh-l1": (1.089, 1.06960),
    "+tanh-l6-12": (1.092, 1.07313), "+tanh-l1-12-noffn": (1.116, 1.09920),
    "+sigmoid-l1-12": (1.118, 1.10462), "+sigmoid-l1-6": (1.101, 1.08283),
    "+sigmoid-l1-3": (1.094, 1.07383), "+sigmoid-l1-2": (1.090, 1.07148),
    "+sigmoid-l1": (1.090, 1.07157), "+sigmoid-l6-12": (1.094, 1.07607),
    "+sigmoid-l1-12-noffn": (1.103, 1.08652), "+highway": (1.120, 1.10922),
    "+gated": (1.117, 1.10292),
}  # fmt: skip


def test_table6_has_all_17_rows_with_published_values() -> None:
    rows = {e.row.removeprefix("l12-xl"): e.published for e in table_experiments("ht-table6")}
    assert rows == {k: {"eval_bpc": e, "test_bpc": t} for k, (e, t) in TABLE6.items()}


@pytest.mark.parametrize(
    ("row", "layers"),
    [("+tanh-l6-12", "6-12"), ("+sigmoid-l1", "1"), ("+tanh-l1-12-noffn", "1-12\\FFN")],
)
def test_table6_new_rows_gate_the_named_layers(row: str, layers: str) -> None:
    gate = get_experiment(f"ht-table6/l12-xl{row}").config().model.gate
    assert (gate.kind, gate.layers) == ("sdu", layers)


def test_table5_keeps_five_decimals_so_sigma_l3_6_beats_the_baseline() -> None:
    base = get_experiment("ht-table5/l6-xl").published["test_bpc"]
    row = get_experiment("ht-table5/l6-xl+sigmoid-l3-6").published["test_bpc"]
    assert (base, row) == (1.24339, 1.24261)
    assert row < base


def test_table5_ablations_carry_their_eval_column_and_protocols() -> None:
    e = get_experiment("ht-table5/l6-xl+tanh-l1-3")
    assert e.published == {"eval_bpc": 1.249, "test_bpc": 1.22039}
    assert "during training" in e.protocols["eval_bpc"]
    assert "segment 80" in e.protocols["test_bpc"]
    config = build_config(e.config(), None, list(e.eval_overrides))
    memory = config.model.memory
    assert config.data.eval_seq_len == 128
    assert (memory.eval_mem_len, memory.eval_clamp_len, memory.eval_same_length) == (896, -1, False)
    # the parameter-matched control is validated the paper's way too, like its baseline
    matched, plain = (
        get_experiment("ht-table5/l6-xl+param-matched"),
        get_experiment("ht-table5/l6-xl"),
    )
    assert matched.eval_overrides == plain.eval_overrides != ()
    assert matched.protocols == plain.protocols and matched.published == {}
    assert get_experiment("ht-table1/t-l3+param-matched").eval_overrides == ()


@pytest.mark.parametrize("table", ["ht-table1", "ht-table3"])
def test_param_matched_baseline_has_the_gated_rows_parameter_count(table: str) -> None:
    from highway_transformer.experiments import experiment_config
    from highway_transformer.experiments.param_match import count_parameters

    rows = {e.row.split("+")[-1]: e for e in table_experiments(table)}
    matched = rows["param-matched"]
    assert matched.baseline == matched.preset == f"{table}/t-l3" and matched.published == {}
    configs = {k: experiment_config(rows[k], "tiny") for k in ("t-l3", "sigmoid", "param-matched")}
    plain, gated, wide = (count_parameters(c.model) for c in configs.values())
    assert plain < gated
    step = (
        count_parameters(
            configs["t-l3"].model.__class__(
                **{**configs["t-l3"].model.__dict__, "d_inner": configs["t-l3"].model.d_inner + 1}
            )
        )
        - plain
    )
    assert abs(wide - gated) <= step / 2
    assert configs["param-matched"].model.gate.kind == "none"
    assert configs["param-matched"].model.d_inner > configs["t-l3"].model.d_inner


def test_wt103_preset_evaluates_as_the_reference_script() -> None:
    from highway_transformer.presets import get_preset

    config = get_preset("xl-paper/wt103-base")
    memory = config.model.memory
    assert (config.data.eval_seq_len, memory.eval_mem_len, memory.eval_clamp_len) == (64, 640, 400)
    assert memory.eval_same_length is True
    # run_wt103_base.sh: --adaptive with train.py's div_val 1, tied (tie_weight, tie_projs).
    assert config.model.tie_weights is True and config.model.adaptive_div == 1
    assert "tied" in config.source


# The R-Transformer code (models/RTransformer.py) drops the attention weights in MHPooling at
# the sublayer rate; its language models tie the token tables (language_char, language_word).
@pytest.mark.parametrize(
    ("preset", "attention_dropout"),
    [
        ("ht-table2/rt-l3", 0.15), ("ht-table2/rt-l3+tanh", 0.15), ("ht-table4/rt-l3", 0.35),
        ("rt-paper/char-ptb", 0.15), ("rt-paper/word-ptb", 0.35),
        ("rt-paper/char-ptb-transformer", 0.15), ("rt-paper/word-ptb-transformer", 0.35),
        ("ht-table1/t-l3", 0.0), ("ht-table3/t-l3", 0.0),
    ],
)  # fmt: skip
def test_ptb_presets_follow_the_rt_language_code(preset: str, attention_dropout: float) -> None:
    from highway_transformer.presets import get_preset

    model = get_preset(preset).model
    assert model.dropout_attn == attention_dropout
    assert model.tie_weights is True


def test_rt_paper_rows_initialise_and_read_data_as_the_rt_code() -> None:
    from highway_transformer.presets import get_preset

    char, word = get_preset("rt-paper/char-ptb"), get_preset("rt-paper/word-ptb")
    assert char.data.corpus == "ptb-char-rt" and word.data.corpus == "ptb-word"
    assert (char.model.init, char.model.init_embedding, char.model.init_range) == (
        "torch", "uniform", 0.1
    )  # fmt: skip
    assert (word.model.init, word.model.init_embedding, word.model.init_std) == (
        "torch", "normal", 0.01
    )  # fmt: skip
    assert (char.data.eval_batch_size, word.data.eval_batch_size) == (1, 10)
    assert (char.train.final_weights, word.train.final_weights) == ("last", "best")
    # The HT rows keep the HT appendix's U(-a, a) on every weight and Mikolov's char files.
    ht = get_preset("ht-table2/rt-l3")
    assert (ht.model.init, ht.model.init_embedding, ht.data.corpus) == ("uniform", "", "ptb-char")


def test_row_against_row_claims_name_rows_of_their_table() -> None:
    """Every registered claim compares two rows of its own table, neither its baseline."""
    for table, contrasts in CONTRASTS.items():
        rows = {e.name: e for e in table_experiments(table)}
        for c in contrasts:
            assert c.row in rows and c.other in rows, c
            assert not rows[c.row].is_baseline and not rows[c.other].is_baseline, c
    claims = {(c.row, c.other) for c in CONTRASTS["ht-table5"]}
    assert ("ht-table5/l6-xl+tanh-l1-3", "ht-table5/l6-xl+tanh-l3-6") in claims
    assert ("ht-table5/l6-xl+sigmoid", "ht-table5/l6-xl+sigmoid-l1-6-noffn") in claims
    # the gated rows against the parameter-matched plain row, in every table that has one
    assert ("ht-table2/rt-l3+tanh", "ht-table2/rt-l3+param-matched") in set(
        (c.row, c.other) for c in CONTRASTS["ht-table2"]
    )
    # ... only rows gated on every layer: an ablation has fewer parameters than the match
    matched = "ht-table5/l6-xl+param-matched"
    assert ("ht-table5/l6-xl+highway", matched) in claims
    assert ("ht-table5/l6-xl+tanh-l1-3", matched) not in claims
    assert ("ht-table5/l6-xl+sigmoid-l1-6-noffn", matched) not in claims


def test_every_table_has_its_rows() -> None:
    counts = {
        "ht-table1": 4, "ht-table2": 4, "ht-table3": 4, "ht-table4": 4, "ht-table5": 12,
        "ht-table6": 17, "ht-table7": 5, "rt-table1": 2, "rt-table2": 2, "rt-table3": 2,
        "rt-table4": 2, "gtrxl-rl": 11, "gtrxl-rl-long": 11, "gates-eras": 10,
    }  # fmt: skip
    for table, count in counts.items():
        assert len(table_experiments(table)) == count, table
    assert len(list_experiments()) == 85
    for e in list_experiments():
        assert e.preset in PRESETS
        assert get_experiment(e.baseline).table == e.table
        tasks = {"rt-table1": ("accuracy", "nll"), "rt-table2": ("accuracy", "nll"),
                 "gtrxl-rl": ("success",), "gtrxl-rl-long": ("success",)}  # fmt: skip
        assert e.metric in tasks.get(e.table, ("bpc", "ppl"))


def test_char_ptb_rows_carry_appendix_a1() -> None:
    for e in table_experiments("ht-table1") + table_experiments("ht-table2"):
        c = e.config()
        assert (c.model.d_model, c.model.n_layers, c.model.n_heads) == (512, 3, 8)
        assert (c.data.seq_len, c.data.context, c.data.batch_size) == (400, 80, 16)
        assert (c.train.optimizer, c.train.lr, c.train.clip) == ("sgd", 2.0, 0.15)
        assert c.model.dropout == 0.15 and c.model.init_range == 0.1
    assert get_experiment("ht-table2/rt-l3+tanh").config().model.family == "rtransformer"
    gate = get_experiment("ht-table1/t-l3+sigmoid").config().model.gate
    assert (gate.kind, gate.activation) == ("sdu", "sigmoid")


def test_word_ptb_and_xl_rows() -> None:
    c = get_experiment("ht-table3/t-l3+tanh").config()
    assert (c.model.d_model, c.model.dropout, c.model.dropout_emb) == (128, 0.35, 0.15)
    assert (c.model.init, c.model.init_range, c.train.clip) == ("uniform", 0.01, 0.35)
    assert (c.data.seq_len, c.data.context) == (80, 40)
    rt = get_experiment("rt-table4/rtransformer").config()
    assert rt.model.family == "rtransformer" and rt.model.local_rnn.cell == "lstm"
    assert rt.model.local_rnn.window == 9
    xl = get_experiment("ht-table5/l6-xl+sigmoid-l1-3").config()
    assert (xl.model.n_layers, xl.model.memory.mem_len, xl.model.memory.eval_clamp_len) == (
        6,
        512,
        820,
    )
    assert (xl.train.optimizer, xl.train.lr, xl.train.max_steps) == ("adam", 2.5e-4, 40_000)
    assert (xl.model.gate.activation, xl.model.gate.layers) == ("sigmoid", "1-3")
    assert get_experiment("ht-table6/l12-xl+tanh-l1-12").config().model.n_layers == 12


def test_published_numbers() -> None:
    assert get_experiment("ht-table1/t-l3+sigmoid").published == {
        "eval_bpc": 1.410,
        "test_bpc": 1.371,
    }
    assert get_experiment("ht-table4/rt-l3+tanh").published["test_ppl"] == 84.92
    assert get_experiment("ht-table3/t-l3").metric == "ppl"
    assert get_experiment("ht-table5/l6-xl+gated").published["train_hours"] == 21.10
    assert get_experiment("ht-table5/l6-xl+tanh-l3-6").published == {
        "eval_bpc": 1.277,
        "test_bpc": 1.24420,
    }
    assert get_experiment("ht-table6/l12-xl+tanh-l1-12").published == {
        "eval_bpc": 1.143,
        "test_bpc": 1.12797,
    }
    assert get_experiment("rt-table3/rtransformer").published == {"test_bpc": 1.24}
    assert get_experiment("rt-table4/transformer").published == {"test_ppl": 122.37}
    assert get_experiment("rt-table3/rtransformer").baseline == "rt-table3/transformer"
    hours = [e.published["train_hours"] for e in table_experiments("ht-table7")]
    assert hours == [21.16, 21.45, 21.87, 21.93, 21.10]


def test_unknown_names_suggest_the_closest() -> None:
    with pytest.raises(ConfigError, match="Did you mean 'ht-table1/t-l3\\+sigmoid'"):
        get_experiment("ht-table1/t-l3+sigmod")
    with pytest.raises(ConfigError, match="Did you mean 'ht-table5'"):
        table_experiments("ht-tabel5")
    with pytest.raises(ConfigError, match="unknown table or experiment"):
        resolve_experiments(["ht-table1", "nonsense"])
    names = [e.name for e in resolve_experiments(["ht-table1/t-l3", "ht-table1"])]
    assert names == [
        "ht-table1/t-l3",
        "ht-table1/t-l3+sigmoid",
        "ht-table1/t-l3+tanh",
        "ht-table1/t-l3+param-matched",
    ]


def test_task_tables_are_listed_with_the_rt_paper_figures() -> None:
    mnist = {e.row: e for e in table_experiments("rt-table1")}
    assert mnist["rtransformer"].published == {"test_accuracy": 99.1}
    assert mnist["rtransformer"].config().task.name == "pixels"
    nottingham = {e.row: e for e in table_experiments("rt-table2")}
    assert nottingham["transformer"].published == {"test_nll": 3.34}
    assert nottingham["rtransformer"].config().model.local_rnn.window == 6


def test_gtrxl_rl_rows_differ_only_in_the_memory_and_share_the_budget() -> None:
    """GTrXL's comparison on the corridor: each row's norm, gate and policy as the paper names
    them, every row at one budget, against GTrXL-GRU, TrXL-I also against TrXL."""
    rows = {e.row: build_config(e.config()) for e in table_experiments("gtrxl-rl")}
    expected = {
        "trxl": ("post", "none", "transformer"), "trxl-i": ("pre", "none", "transformer"),
        "gtrxl-gru": ("pre", "gtrxl-gru", "transformer"),
        "gtrxl-input": ("pre", "gtrxl-input", "transformer"),
        "gtrxl-output": ("pre", "gtrxl-output", "transformer"),
        "gtrxl-highway": ("pre", "gtrxl-highway", "transformer"),
        "gtrxl-sigmoid-tanh": ("pre", "gtrxl-sigmoid-tanh", "transformer"),
        "sdu-sigmoid": ("pre", "sdu", "transformer"), "sdu-tanh": ("pre", "sdu", "transformer"),
    }  # fmt: skip
    for row, (norm, gate, policy) in expected.items():
        c = rows[row]
        assert (c.model.norm, c.model.gate.kind, c.task.rl.policy) == (norm, gate, policy), row
        assert c.task.rl.memory_length >= c.task.rl.corridor_length  # the window reaches the cue
    assert rows["gtrxl-gru"].model.gate.bias == 2.0 and rows["trxl-i"].model.gate.bias is None
    assert (rows["sdu-tanh"].model.gate.activation, rows["sdu-sigmoid"].model.gate.activation) == (
        "tanh",
        "sigmoid",
    )
    assert (rows["lstm"].task.rl.policy, rows["mlp"].task.rl.policy) == ("lstm", "mlp")
    budgets = {
        (c.task.rl.env, c.task.rl.corridor_length, c.task.rl.eval_episodes, c.train.max_steps,
         c.train.lr, c.train.seed)
        for c in rows.values()
    }  # fmt: skip
    assert budgets == {("corridor", 16, 64, 480, 2.5e-3, 1111)}
    assert {e.baseline for e in table_experiments("gtrxl-rl")} == {"gtrxl-rl/gtrxl-gru"}
    claims = {(c.row, c.other) for c in CONTRASTS["gtrxl-rl"]}
    assert claims == {("gtrxl-rl/trxl-i", "gtrxl-rl/trxl")}


def test_gtrxl_rl_long_is_the_same_rows_on_a_longer_corridor() -> None:
    """The rows of gtrxl-rl, each at the long budget: the window reaches the cue 32 steps
    back (the LSTM and MLP have none), 100 greedy episodes an evaluation."""
    short = {e.row: build_config(e.config()) for e in table_experiments("gtrxl-rl")}
    long = {e.row: build_config(e.config()) for e in table_experiments("gtrxl-rl-long")}
    assert long.keys() == short.keys()
    for row, c in long.items():
        assert (c.model.norm, c.model.gate, c.task.rl.policy) == (
            short[row].model.norm, short[row].model.gate, short[row].task.rl.policy,
        ), row  # fmt: skip
        assert (c.task.rl.corridor_length, c.task.rl.eval_episodes, c.train.max_steps) == (
            32, 100, 320,
        ), row  # fmt: skip
        if c.task.rl.policy == "transformer":
            assert c.task.rl.memory_length == 32, row
    assert {e.baseline for e in table_experiments("gtrxl-rl-long")} == {"gtrxl-rl-long/gtrxl-gru"}
    claims = {(c.row, c.other) for c in CONTRASTS["gtrxl-rl-long"]}
    assert claims == {("gtrxl-rl-long/trxl-i", "gtrxl-rl-long/trxl")}
