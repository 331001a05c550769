"""Named A/Bs: an A/B whose rows are declared here as data, run by the code of ``highway ab``.

``highway demo`` is :data:`DEMO`: a plain, a σ-SDU and a tanh-SDU 3-layer Transformer on the
embedded corpus over seeds. Each row's config is the default config with the A/B's ``base``
settings and the row's own; :func:`plan_named` writes it to ``OUT/configs/ROW/config.yaml``
(a folder holding the A/B with another configuration is an error) and plans the rows as
``highway ab`` rows of those files, into ``OUT/ab/none/ROW/seed<N>``, judged by the
comparison frozen into every run before it trains (each variant minus the first row, paired
by seed, 95% t-interval).

This module imports no torch: the command line reads the budget (:data:`DEMO`'s ``steps`` and
``seeds``) from it when it builds its parser.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config import Config
    from .ab import AbPlan


@dataclass(frozen=True)
class NamedAB:
    """An A/B declared as data: its rows (the first the baseline), budget and front page."""

    name: str
    title: str
    source: str
    steps: int  # training steps a run (the default of --steps)
    seeds: int  # seeds a row (the default of --seeds)
    base: dict[str, Any]  # dotted settings every row shares, over the default config
    rows: dict[str, dict[str, Any]]  # row name -> its own dotted settings
    tiny: dict[str, Any]  # ``--tiny``: settings that shrink every row alike
    tiny_note: str
    intro: str  # the front page's first paragraph; ``{steps}`` is the budget
    prompt: str  # where the generated samples start
    sample_seed: int  # the seed whose best weights write them


DEMO = NamedAB(
    name="demo",
    title="Demo: plain vs σ-SDU vs tanh-SDU Transformer (embedded corpus, char level)",
    source="scaled-down HT Table 1 (3-layer Transformer, char level) on the embedded corpus",
    steps=600,
    seeds=3,
    # PyTorch's default initialisation (embeddings N(0, 1): token identity is not drowned by
    # the unit-size sinusoidal positions as with U(-0.1, 0.1)) and AdamW with warm-up, so
    # that the plain model learns from the first steps. The paper's U(-0.1, 0.1) with Adam
    # keeps it on the unigram plateau (~4.8 bpc) for most of a short budget: the comparison
    # would then measure leaving the plateau, not the gate.
    base={
        "model.d_model": 128,
        "model.n_layers": 3,
        "model.n_heads": 4,
        "model.d_inner": 512,
        "model.dropout": 0.1,
        "model.init": "torch",
        "model.tie_weights": False,
        "data.corpus": "pydoc",
        "data.batch_size": 16,
        "data.seq_len": 128,
        "data.context": 32,
        "data.eval_batch_size": 32,
        "train.optimizer": "adamw",
        "train.lr": 3e-3,
        "train.weight_decay": 0.01,
        "train.schedule": "cosine",
        "train.warmup_steps": 40,
        "train.clip": 0.5,
        "train.eval_max_tokens": 8000,
        "train.log_interval": 10,
        "train.seed": 1111,
    },  # fmt: skip
    rows={
        "plain": {"model.gate.kind": "none"},
        "sdu-sigmoid": {"model.gate.kind": "sdu", "model.gate.activation": "sigmoid"},
        "sdu-tanh": {"model.gate.kind": "sdu", "model.gate.activation": "tanh"},
    },
    # d 16 on a slice of the corpus: the whole command runs in seconds
    tiny={
        "model.d_model": 16,
        "model.n_heads": 2,
        "model.d_inner": 32,
        "data.seq_len": 32,
        "data.context": 8,
        "data.batch_size": 4,
        "data.eval_batch_size": 4,
        "data.max_train_tokens": 20_000,
        "data.max_eval_tokens": 2_000,
        "train.eval_max_tokens": 1_000,
    },  # fmt: skip
    tiny_note=(
        "**Tiny demo** (`--tiny`): d-16 models on 20,000 training characters, a check that the "
        "installation works; its numbers say nothing about the gates."
    ),
    intro=(
        "Each model trains for {steps:,} steps, once per seed; seed N trains every model with "
        "the same seed and data order. The runs are `highway ab` rows "
        "(`configs/VARIANT/config.yaml`, plain the baseline), judged by its comparison, "
        "frozen into every run before it trained: each gate minus plain, paired by seed, with "
        "the 95% Student-t interval of the mean difference. *better* / *worse*: the interval "
        "excludes 0; *no detectable difference*: it does not, the difference is inside the "
        "seed-to-seed noise at this budget."
    ),
    prompt="The ",
    sample_seed=1,
)

NAMED_ABS: dict[str, NamedAB] = {DEMO.name: DEMO}


def row_config(named: NamedAB, row: str, steps: int) -> Config:
    """Row ``row`` of ``named`` trained ``steps`` steps, evaluated every tenth of them."""
    from ..config import Config

    settings = {
        "name": f"{named.name}-{row}",
        "source": named.source,
        **named.base,
        **named.rows[row],
        "train.max_steps": steps,
        "train.eval_interval": max(steps // 10, 1),
    }
    return Config().replace(**settings)


def default_jobs(runs: int) -> int:
    """Runs trained at once when ``--jobs`` is not given: one a CPU core (each on one thread,
    as the runner launches them), at most ``runs``."""
    return max(1, min(os.cpu_count() or 1, runs))


def plan_named(
    named: NamedAB, out: str | Path, steps: int, seeds: int, tiny: bool = False
) -> AbPlan:
    """``named`` as an A/B: each row's config file written under ``out/configs`` (after every
    row is checked against what the folder holds), then every (row, seed) run planned."""
    from ..config import save_config
    from ..errors import ConfigError
    from ..storage import runfolder
    from .ab import AbRow, plan_ab
    from .scale import AS_CONFIGURED

    for option, value in (("seeds", seeds), ("steps", steps)):
        if value < 1:
            raise ConfigError(f"--{option} must be >= 1, got {value}")
    out = Path(out)
    configs = {row: row_config(named, row, steps) for row in named.rows}
    if tiny:
        configs = {row: config.replace(**named.tiny) for row, config in configs.items()}
    holder = f"{out} holds the {named.name}"
    for row, config in configs.items():
        runfolder.refuse_other_config(out / "configs" / row, config, holder)
    rows = []
    for row, config in configs.items():
        path = out / "configs" / row / runfolder.CONFIG_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        save_config(config, path)
        rows.append(AbRow(row, "", str(path), (), str(path)))
    return plan_ab(rows, out, AS_CONFIGURED, seeds)
