"""Named experiments: every model row of HT Tables 1-7 and R-Transformer Tables 1-4.

Each :class:`Experiment` names the preset that trains it, the table it belongs to, the row
it is compared with (its baseline) and the published figures. Row names reuse the preset
names (``ht-table1/t-l3+sigmoid``, ``ht-table5/l6-xl+sigmoid-l1-3``). HT Table 7 (training
hours of the 6-layer XL variants) has no runs of its own: its figures are attached to the
Table 5 rows (``published["train_hours"]``) and ``table_experiments("ht-table7")`` returns
those rows. R-Transformer Tables 3-4 (char / word PTB) train the ``rt-paper/`` presets: the
R-Transformer code's settings (its pre-LN block and its annealing schedules) for both models.
HT Tables 1-5 also hold a ``+param-matched`` row that is not in the paper: the plain model with
``d_inner`` raised to the sigma row's parameter count (see ``param_match``).

``gtrxl-rl`` is GTrXL's comparison (Parisotto et al. 2019: TrXL, TrXL-I, the GTrXL gates, an
LSTM) on the rl task's corridor, with the SDU gates and a memoryless MLP added; the paper's
figures are for DMLab-30 and Numpad, so its rows carry none. ``gtrxl-rl-long`` holds the same
rows on a corridor of length 32 with a 32-step memory, evaluated over 100 greedy episodes.

``gates-eras`` sets the gates of 2019-2025 side by side on one modern baseline (pre-RMSNorm,
RoPE, SwiGLU, no biases; ``presets/modern.py``): SDU sigma / tanh, highway and gated MHDPA
(HT), GTrXL's GRU gate, the attention-output gate of Qiu et al. 2025 (elementwise, headwise)
and SDU + that gate, with a parameter-matched plain row. No paper measured these rows on this
baseline, so none carries a published figure.

Published keys: ``eval_bpc`` / ``test_bpc`` (bits per character; HT Tables 1-2 call them
"ppl"), ``eval_ppl`` / ``test_ppl`` (word perplexity), ``train_hours`` (HT Table 7).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..config import Config, apply_overrides
from ..errors import ConfigError, unknown_choice
from ..presets import PRESETS, get_preset, xl_tables
from ..presets import rl as rl_presets

# accuracy / nll: RT Tables 1-2 (tasks); success: the greedy success rate of gtrxl-rl
METRICS = ("bpc", "ppl", "accuracy", "nll", "success")


@dataclass(frozen=True)
class Experiment:
    """One model row of a paper table, trainable from ``preset``."""

    name: str
    table: str
    preset: str
    published: dict[str, float]
    metric: str  # bpc | ppl
    baseline: str
    description: str = ""
    also_in: tuple[str, ...] = field(default=())  # other tables quoting this row
    # How each published column was measured (``eval_bpc`` -> label), where a table says.
    protocols: dict[str, str] = field(default_factory=dict)
    # Overrides that make `highway eval` measure the published eval column the paper's way.
    eval_overrides: tuple[str, ...] = field(default=())
    # A parameter-matched baseline: the gated row whose parameter count d_inner is raised to.
    match_params_of: str | None = None
    # Rows not in the registry (``highway ab``): a config file applied on top of the preset
    # (the default config when ``preset`` is empty), and the row's own overrides, applied
    # after the scale and the request's overrides.
    config_file: str | None = None
    overrides: tuple[str, ...] = field(default=())

    @property
    def row(self) -> str:
        """The row part of the name (``t-l3+sigmoid``), used as a folder name."""
        return self.name.split("/", 1)[1]

    @property
    def is_baseline(self) -> bool:
        return self.name == self.baseline

    def config(self) -> Config:
        """A fresh paper-scale Config for this row (named after the experiment): its preset
        and config file, not yet validated (its ``overrides`` come after the scale)."""
        config = get_preset(self.preset) if self.preset else Config()
        if self.config_file is not None:
            config = apply_overrides(config, self.config_file)
        config.name = self.name.replace("/", "_")
        return config


#: Table -> (what it reports, the metric of its "ppl" / bpc columns).
TABLES: dict[str, tuple[str, str]] = {
    "ht-table1": ("HT Table 1: 3-layer Transformer, char PTB (bpc)", "bpc"),
    "ht-table2": ("HT Table 2: 3-layer R-Transformer, char PTB (bpc)", "bpc"),
    "ht-table3": ("HT Table 3: 3-layer Transformer, word PTB (perplexity)", "ppl"),
    "ht-table4": ("HT Table 4: 3-layer R-Transformer, word PTB (perplexity)", "ppl"),
    "ht-table5": ("HT Table 5: 6-layer Transformer-XL, enwik8 (bpc)", "bpc"),
    "ht-table6": ("HT Table 6: 12-layer Transformer-XL, enwik8 (test bpc)", "bpc"),
    "ht-table7": ("HT Table 7: training hours of the 6-layer XL variants (Table 5 runs)", "bpc"),
    "rt-table1": (
        "RT Table 1: pixel-by-pixel MNIST accuracy (%), Transformer vs R-Transformer",
        "accuracy",
    ),
    "rt-table2": ("RT Table 2: Nottingham NLL per time step, Transformer vs R-Transformer", "nll"),
    "rt-table3": ("RT Table 3: char PTB NLL (bpc), Transformer vs R-Transformer", "bpc"),
    "rt-table4": ("RT Table 4: word PTB perplexity, Transformer vs R-Transformer", "ppl"),
    "gtrxl-rl": (
        "GTrXL's comparison on the rl corridor: greedy success rate, PPO, 16 steps of memory",
        "success",
    ),
    "gtrxl-rl-long": (
        "GTrXL's comparison on the rl corridor of length 32: greedy success rate over 100 "
        "episodes, PPO, 32 steps of memory",
        "success",
    ),
    "gates-eras": (
        "Gates across eras: 2019-2025 gates on the modern baseline (RMSNorm, RoPE, SwiGLU), "
        "char PTB (bpc)",
        "bpc",
    ),
}

METRIC_OF = {table: metric for table, (_, metric) in TABLES.items()}

#: Table -> the HT paper's figures of its training and validation curves, which a report's
#: convergence figures reproduce (the RT paper draws no curves).
PAPER_FIGURES: dict[str, str] = {
    "ht-table1": "HT Figure 4",
    "ht-table2": "HT Figure 5",
    "ht-table3": "HT Figure 6",
    "ht-table4": "HT Figure 7",
    "ht-table5": "HT Figures 8 and 10",
    "ht-table6": "HT Figures 9, 11 and 12",
}

# (row suffix, eval, test) of HT Tables 1-4; the first row is the baseline.
_SMALL_TABLES: dict[str, tuple[str, str, list[tuple[str, float, float]]]] = {
    "ht-table1": ("t-l3", "bpc", [("", 1.541, 1.495), ("+sigmoid", 1.410, 1.371),
                                  ("+tanh", 1.401, 1.364)]),
    "ht-table2": ("rt-l3", "bpc", [("", 1.283, 1.250), ("+tanh", 1.312, 1.274),
                                   ("+sigmoid", 1.279, 1.245)]),
    "ht-table3": ("t-l3", "ppl", [("", 139.4, 130.43), ("+sigmoid", 138.9, 130.30),
                                  ("+tanh", 148.5, 139.53)]),
    "ht-table4": ("rt-l3", "ppl", [("", 97.63, 92.31), ("+sigmoid", 92.91, 87.88),
                                   ("+tanh", 89.97, 84.92)]),
}  # fmt: skip

# HT Tables 5-6: row suffix -> (eval bpc, test bpc) as printed (test bpc with the paper's five
# decimals: at three, sigma L3-6 would equal the baseline although the paper marks it improved).
# Table 5's "eval" column is validation measured during training (xl_tables.DURING_TRAINING_EVAL),
# not the 80 / 2100 test protocol; Table 6 states no protocol for its eval column.
_TABLE5: dict[str, tuple[float, float]] = {
    "": (1.276, 1.24339),
    "+tanh": (1.241, 1.21424),
    "+sigmoid": (1.237, 1.21123),
    "+highway": (1.254, 1.22177),
    "+gated": (1.253, 1.22398),
    "+tanh-l1-6-noffn": (1.258, 1.22866),
    "+tanh-l1-3": (1.249, 1.22039),
    "+tanh-l3-6": (1.277, 1.24420),
    "+sigmoid-l1-6-noffn": (1.263, 1.23332),
    "+sigmoid-l1-3": (1.268, 1.23589),
    "+sigmoid-l3-6": (1.276, 1.24261),
}
_TABLE7_HOURS: dict[str, float] = {
    "": 21.16,
    "+tanh": 21.45,
    "+sigmoid": 21.87,
    "+highway": 21.93,
    "+gated": 21.10,
}
# HT Table 6, all 17 rows in the paper's order.
_TABLE6: dict[str, tuple[float, float]] = {
    "": (1.090, 1.07160),
    "+tanh-l1-12": (1.143, 1.12797),
    "+tanh-l1-6": (1.100, 1.08234),
    "+tanh-l1-3": (1.090, 1.07140),
    "+tanh-l1-2": (1.089, 1.06904),
    "+tanh-l1": (1.089, 1.06960),
    "+tanh-l6-12": (1.092, 1.07313),
    "+tanh-l1-12-noffn": (1.116, 1.09920),
    "+sigmoid-l1-12": (1.118, 1.10462),
    "+sigmoid-l1-6": (1.101, 1.08283),
    "+sigmoid-l1-3": (1.094, 1.07383),
    "+sigmoid-l1-2": (1.090, 1.07148),
    "+sigmoid-l1": (1.090, 1.07157),
    "+sigmoid-l6-12": (1.094, 1.07607),
    "+sigmoid-l1-12-noffn": (1.103, 1.08652),
    "+highway": (1.120, 1.10922),
    "+gated": (1.117, 1.10292),
}
# RT Tables 1-4: row -> (preset, published test figure).
_RT_TABLES: dict[str, tuple[str, dict[str, tuple[str, float]]]] = {
    "rt-table1": ("accuracy", {"transformer": ("rt-table1/transformer", 98.2),
                               "rtransformer": ("rt-table1/rtransformer", 99.1)}),
    "rt-table2": ("nll", {"transformer": ("rt-table2/transformer", 3.34),
                          "rtransformer": ("rt-table2/rtransformer", 2.37)}),
    "rt-table3": ("bpc", {"transformer": ("rt-paper/char-ptb-transformer", 1.45),
                          "rtransformer": ("rt-paper/char-ptb", 1.24)}),
    "rt-table4": ("ppl", {"transformer": ("rt-paper/word-ptb-transformer", 122.37),
                          "rtransformer": ("rt-paper/word-ptb", 84.38)}),
}  # fmt: skip


def _description(preset: str) -> str:
    return PRESETS[preset].description if preset in PRESETS else preset


def _ht_small() -> list[Experiment]:
    out = []
    for table, (base, metric, rows) in _SMALL_TABLES.items():
        baseline = f"{table}/{base}"
        for suffix, eval_value, test_value in rows:
            name = f"{baseline}{suffix}"
            published = {f"eval_{metric}": eval_value, f"test_{metric}": test_value}
            out.append(
                Experiment(name, table, name, published, metric, baseline, _description(name))
            )
    return out


def _xl_rows(table: str, base: str, rows: dict[str, tuple[float, float]]):
    baseline = f"{table}/{base}"
    out = []
    for suffix, (eval_value, test_value) in rows.items():
        name = f"{baseline}{suffix}"
        published = {"eval_bpc": eval_value, "test_bpc": test_value}
        also: tuple[str, ...] = ()
        protocols: dict[str, str] = {"test_bpc": xl_tables.TEST_EVAL_LABEL}
        eval_overrides: tuple[str, ...] = ()
        if table == "ht-table5":
            protocols["eval_bpc"] = xl_tables.DURING_TRAINING_EVAL_LABEL
            eval_overrides = xl_tables.DURING_TRAINING_EVAL
            if suffix in _TABLE7_HOURS:
                published["train_hours"] = _TABLE7_HOURS[suffix]
                also = ("ht-table7",)
        out.append(
            Experiment(
                name,
                table,
                name,
                published,
                "bpc",
                baseline,
                _description(name),
                also,
                protocols,
                eval_overrides,
            )  # fmt: skip
        )
    return out


# Tables with a parameter-matched plain row (matched to the sigma-SDU row; tanh has the same size).
_PARAM_MATCHED: dict[str, str] = {
    "ht-table1": "t-l3",
    "ht-table2": "rt-l3",
    "ht-table3": "t-l3",
    "ht-table4": "rt-l3",
    "ht-table5": "l6-xl",
}


def _param_matched_rows(built: dict[str, Experiment]) -> list[Experiment]:
    """The parameter-matched plain row of each table in ``_PARAM_MATCHED``, validated the
    way its baseline is (HT Table 5: the paper's eval protocol too), so it compares on
    every column."""
    out = []
    for table, base in _PARAM_MATCHED.items():
        baseline, gated = f"{table}/{base}", f"{table}/{base}+sigmoid"
        description = (
            f"{_description(baseline)}, d_inner raised to the parameter count of {gated} "
            "(not in the paper)"
        )
        plain = built[baseline]
        out.append(
            Experiment(f"{baseline}+param-matched", table, baseline, {},
                       METRIC_OF[table], baseline, description,
                       protocols=dict(plain.protocols), eval_overrides=plain.eval_overrides,
                       match_params_of=gated)
        )  # fmt: skip
    return out


def _rt_rows() -> list[Experiment]:
    out = []
    for table, (metric, rows) in _RT_TABLES.items():
        baseline = f"{table}/transformer"
        for row, (preset, value) in rows.items():
            what = TABLES[table][0].split(": ", 1)[1].split(",")[0]
            description = f"RT Table {table[-1]}: {what}, {row} (trained as {preset})"
            published = {f"test_{metric}": value}
            out.append(
                Experiment(
                    f"{table}/{row}", table, preset, published, metric, baseline, description
                )  # fmt: skip
            )
    return out


#: gtrxl-rl's baseline: GTrXL-GRU, the gate the paper proposes and sets every variant against.
GTRXL_RL_BASELINE = "gtrxl-rl/gtrxl-gru"


def _gtrxl_rl_rows(table: str = "gtrxl-rl") -> list[Experiment]:
    return [
        Experiment(f"{table}/{row}", table, f"{table}/{row}", {}, "success",
                   f"{table}/gtrxl-gru", _description(f"{table}/{row}"))
        for row in rl_presets.TABLE_ROWS
    ]  # fmt: skip


#: gates-eras: row -> the modern preset it trains (``presets/modern.py``); the first is the
#: baseline, the parameter-matched plain row is added to it.
GATES_ERAS_ROWS: dict[str, str] = {
    "plain": "modern/transformer",
    "sdu-sigmoid": "modern/transformer+sdu-sigmoid",
    "sdu-tanh": "modern/transformer+sdu-tanh",
    "highway": "modern/transformer+highway",
    "gated-mhdpa": "modern/transformer+gated-mhdpa",
    "gtrxl-gru": "modern/transformer+gtrxl-gru",
    "attn-output": "modern/transformer+attn-output",
    "attn-output-headwise": "modern/transformer+attn-output-headwise",
    "sdu-tanh+attn-output": "modern/transformer+sdu-tanh+attn-output",
}


def _gates_eras_rows() -> list[Experiment]:
    baseline = "gates-eras/plain"
    out = [
        Experiment(f"gates-eras/{row}", "gates-eras", preset, {}, "bpc", baseline,
                   _description(preset))
        for row, preset in GATES_ERAS_ROWS.items()
    ]  # fmt: skip
    out.append(
        Experiment("gates-eras/plain+param-matched", "gates-eras", GATES_ERAS_ROWS["plain"], {},
                   "bpc", baseline, f"{_description(GATES_ERAS_ROWS['plain'])}, d_inner raised "
                   "to the parameter count of gates-eras/sdu-sigmoid",
                   match_params_of="gates-eras/sdu-sigmoid")
    )  # fmt: skip
    return out


def _build() -> dict[str, Experiment]:
    rows = _ht_small()
    rows += _xl_rows("ht-table5", "l6-xl", _TABLE5)
    rows += _xl_rows("ht-table6", "l12-xl", _TABLE6)
    rows += _param_matched_rows({e.name: e for e in rows})
    rows += _rt_rows()
    rows += _gtrxl_rl_rows()
    rows += _gtrxl_rl_rows("gtrxl-rl-long")
    rows += _gates_eras_rows()
    return {e.name: e for e in rows}


EXPERIMENTS: dict[str, Experiment] = _build()


@dataclass(frozen=True)
class Contrast:
    """A claim that sets one row against another row rather than the baseline: the report
    gives ``row - other`` seed by seed with its interval, beside the published difference."""

    claim: str
    row: str
    other: str


def _contrasts() -> dict[str, tuple[Contrast, ...]]:
    out: dict[str, list[Contrast]] = {}
    # Every row gated on all layers, against its table's parameter-matched plain row: the gate,
    # or its parameters? (Our question, not the papers'.) Layer ablations ("+tanh-l1-3",
    # "\FFN") have fewer parameters, so they are left out: read from each row's config.
    for matched in (e for e in EXPERIMENTS.values() if e.match_params_of):
        base = matched.row.split("+")[0] + "+"  # t-l3+sigmoid -> sigmoid; sdu-tanh stays
        out[matched.table] = [
            Contrast(f"{e.row.removeprefix(base)}: the gate, not its parameters", e.name,
                     matched.name)
            for e in EXPERIMENTS.values()
            if e.table == matched.table and not e.is_baseline and e is not matched
            and e.config().model.gate.layers == "all"
        ]  # fmt: skip
    # HT Table 5's findings about where to gate (HT section 4.2): the lower layers, and the
    # FFN sublayers too.
    for act in ("tanh", "sigmoid"):
        row = f"ht-table5/l6-xl+{act}"
        out["ht-table5"] += [
            Contrast(f"{act}: gate the lower layers (L1-3 below L3-6)", f"{row}-l1-3",
                     f"{row}-l3-6"),
            Contrast(f"{act}: gate the FFN sublayers too (L1-6 below L1-6 \\FFN)", row,
                     f"{row}-l1-6-noffn"),
        ]  # fmt: skip
    # GTrXL's first finding (Parisotto et al. section 4): the identity map reordering alone
    # makes the Transformer trainable in RL.
    for table in ("gtrxl-rl", "gtrxl-rl-long"):
        out[table] = [
            Contrast("TrXL-I against TrXL: the identity map reordering", f"{table}/trxl-i",
                     f"{table}/trxl"),
        ]  # fmt: skip
    # Qiu et al. 2025 against HT 2019, and whether the two gates add up (our questions).
    out["gates-eras"] += [
        Contrast("attention-output gate against SDU tanh: 2025's gate against 2019's",
                 "gates-eras/attn-output", "gates-eras/sdu-tanh"),
        Contrast("SDU tanh + attention-output against SDU tanh alone",
                 "gates-eras/sdu-tanh+attn-output", "gates-eras/sdu-tanh"),
        Contrast("SDU tanh + attention-output against the attention-output gate alone",
                 "gates-eras/sdu-tanh+attn-output", "gates-eras/attn-output"),
        Contrast("headwise against elementwise attention-output gate",
                 "gates-eras/attn-output-headwise", "gates-eras/attn-output"),
    ]  # fmt: skip
    return {table: tuple(contrasts) for table, contrasts in out.items()}


#: Table -> the claims comparing two of its rows (neither the baseline); the report reads it.
CONTRASTS: dict[str, tuple[Contrast, ...]] = _contrasts()


def list_experiments() -> list[Experiment]:
    """Every registered row, table by table."""
    return list(EXPERIMENTS.values())


def get_experiment(name: str) -> Experiment:
    """The row called ``name``; an unknown name raises ConfigError naming the closest."""
    if name not in EXPERIMENTS:
        raise unknown_choice("experiment", name, EXPERIMENTS)
    return EXPERIMENTS[name]


def table_experiments(table: str) -> list[Experiment]:
    """The rows of ``table`` (``ht-table7``: the Table 5 rows with published hours)."""
    if table not in TABLES:
        raise unknown_choice("table", table, TABLES)
    return [e for e in EXPERIMENTS.values() if e.table == table or table in e.also_in]


def resolve_experiments(
    names_or_tables: str | Iterable[str | Experiment],
) -> list[Experiment]:
    """Experiments named by table names and/or row names (or given as Experiment objects),
    in order, without repeats."""
    items = [names_or_tables] if isinstance(names_or_tables, str) else list(names_or_tables)
    out: dict[str, Experiment] = {}
    for item in items:
        if isinstance(item, Experiment):  # a row built for one request (``highway ab``)
            found = [item]
        elif item in TABLES:
            found = table_experiments(item)
        elif item in EXPERIMENTS:
            found = [EXPERIMENTS[item]]
        else:
            raise unknown_choice("table or experiment", item, [*TABLES, *EXPERIMENTS])
        out.update((e.name, e) for e in found)
    if not out:
        raise ConfigError("name at least one table (e.g. ht-table1) or experiment row")
    return list(out.values())
