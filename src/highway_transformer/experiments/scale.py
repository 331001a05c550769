"""Scaled-down versions of the papers' configurations, uniform across a table's rows.

=============  ======  =====  ======  =======  =====  ============  =================
scale          width   heads  length  steps    batch  train tokens  valid/test tokens
=============  ======  =====  ======  =======  =====  ============  =================
``paper``      1       1      1       1        as is  all           all
``small``      1/4     1      1/4     1/100    as is  2,000,000     200,000
``tiny``       1/16    1/4    1/8     1/5000   4      20,000        2,000
``cpu``        1/4     1      1/4     1/5      as is  all           all
``cpu-short``  1/4     1      1/4     1/20     as is  all           all
``cpu-mnist``  1/4     1      1/4     1/50     as is  all           all
=============  ======  =====  ======  =======  =====  ============  =================

(``quick``: no factors of its own: each task's recipe (:data:`QUICK_RECIPES`: a width, a
budget, a learning rate) that learns in minutes a run on a 2-core laptop, fitted to each row,
with ``cpu-modern``'s optimiser and model settings; docs/tasks.md measures it per task.
``cpu-adamw``: the ``cpu`` factors with AdamW in place of every row's optimiser.
``cpu-short``: the ``cpu`` scale with a quarter of its steps and 25 periodic validations of
20,000 tokens, for tables whose runs cost hours each at ``cpu``: the 6-layer Transformer-XL
of the HT Table 5 analogue runs 2,000 steps, about 50 min, instead of 8,000.
``cpu-mnist``: the ``cpu`` scale with a tenth of its steps and 20 periodic validations of
200,704 tokens, for RT Table 1 on MNIST, whose 784-pixel sequences cost 3-8 s a step on
one CPU thread: 1,719 steps of 32, one pass over the 55,000 training images, each
validation on the first 256 validation images; about 2 h a Transformer run and 3-3.6 h an
R-Transformer run (measured), in docs/results/README.md. The RT pixel models are published
at d 32 and keep their width at every ``cpu`` scale. Unlike the other scales it *truncates*
the published run rather than compressing it: the step schedule keeps its published interval
(/10 every 10 epochs), so the run is the published run's first epoch, at Adam 1e-3
throughout. A pilot with the interval compressed like the steps (/10 every 344 steps) was at
36% of 256 validation images after 425 steps, its rate already 1e-4 and 1e-5 from step 688,
docs/results/cpu-scale-pilot.md.)

* **width** multiplies ``d_model``, ``d_inner`` and ``d_head`` (``d_head`` by width / heads,
  so ``n_heads × d_head`` keeps its ratio to ``d_model``); ``d_model`` is rounded to a
  multiple of the head count. A scale with ``min_d_model`` narrows no model below that width
  (a model published narrower keeps its width): at ``cpu``, the word-PTB models (published
  at d 128) keep d 128, since at d 32 they ended above a bigram model's perplexity.
* **length** multiplies every length: ``seq_len`` and ``context`` (the loss-free history),
  their evaluation twins, the Transformer-XL ``mem_len`` / ``clamp_len`` and their evaluation
  twins. The LocalRNN window is a property of the model and is kept.
* **steps** multiplies ``max_steps`` and ``warmup_steps`` (at least 100 steps at ``small``,
  8 at ``tiny``); ``small`` evaluates 20 times per run, ``tiny`` 4 times, on at most 50,000 /
  1,000 validation tokens each time; the final valid/test evaluation uses the capped splits.
* **annealing** rules (anneal when validation stalls) count validations, which the
  published scripts run once per epoch and a scale ``evaluations`` times per run: their
  "after N, against the last N" is compressed with the run like every step schedule, but
  spans ``N / evaluations`` of it (``cpu``: 10% for N = 5, against 5% of 100 epochs
  published; docs/fidelity.md).
* **depth** (``n_layers``) is kept at every scale: Tables 5-6 gate particular layers
  (``L1-3``, ``L3-6``, ``L1-12``) and Table 6's finding is about depth, so shrinking it would
  merge or break rows. Optimiser, schedule shape, clipping, dropout, initialisation and seed
  are kept as published; the learning rate too, except where a scale's ``lr_factors`` say
  (below).

Every row of a table shares its base hyper-parameters and differs only in the gate, so the
same rule gives every row the same budget, data and seed.

``cpu`` and ``cpu-adamw`` are budgets in which the char-PTB models *learn* on a 2-core CPU
(plain T-L3 reaches 1.90 valid bpc; a table of 4 rows x 3 seeds takes about 8.5 h for T-L3
and 15 h for RT-L3 at 2 runs in parallel, measured per step in docs/results/README.md, so it
spans several working sessions: the runner resumes): width 1/4, lengths 1/4, 1/5 of the published
steps (char PTB: 19,780 steps of 16 x 80 counted symbols, about 5 passes over the training
text), the full training split, 50 periodic validations of the first 50,000 validation
tokens (fine enough to read steps-to-target where the baseline has plateaued) and the final
valid/test evaluation on the *full* splits. Deviations from the papers, all stated in
:func:`describe_scale`:

* ``cpu``, ``cpu-short`` and ``cpu-mnist``: the published optimiser and schedule shape (SGD
  with linear decay or annealing, Adam with cosine decay) with the learning rate of narrowed
  models multiplied by ``lr_factors`` (picked by pilots, docs/results/cpu-scale-pilot.md: a 4x
  narrower model takes larger steps): SGD x2 (the published 2.0 with clip 0.15 moves the
  weights by at most 0.3 per step), Adam x4 (the Transformer-XL rows: 2.5e-4 -> 1e-3, the
  usual rate of a d-128 model); models kept wider by ``min_d_model`` (the word-PTB models,
  Nottingham) keep the published rate;
* ``cpu-adamw``: every row trained with AdamW (lr 1e-3, betas 0.9 / 0.99, weight decay
  0.01), linear warm-up over 2 % of the steps, cosine decay to 0 and clipping at 1.0 — a
  modern optimiser, asking whether the claim survives modern training. Not the papers';
* ``cpu-modern``: ``cpu-adamw`` with the pre-LN block (``model.norm=pre``, with the final
  LayerNorm pre-LN needs) and PyTorch's default initialisation (``model.init=torch``) in every
  row: HT Table 1's question under modern training as a whole.
* ``short``: the rows as configured (sizes, optimiser, schedule shape) for a twentieth of
  their steps, with 10 validations of <= 20,000 tokens: the ``gates-eras`` table's budget,
  whose ``modern/`` presets already have ``cpu-modern``'s sizes.

Precision stays fp32 at every scale (``train.precision=bf16`` is an override on CPUs with
native bf16; runs that differ in precision or thread count are not bit-identical).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..config import Config
from ..config.names import SPLIT_CAPPED_TASKS
from ..data.levels import corpus_level
from ..errors import ConfigError, unknown_choice


@dataclass(frozen=True)
class Optimiser:
    """A replacement optimiser and schedule for every row (the ``cpu-adamw`` scale)."""

    name: str
    lr: float
    betas: tuple[float, float]
    weight_decay: float
    warmup_fraction: float  # of the scaled steps
    schedule: str
    clip: float

    def describe(self) -> str:
        return (
            f"{self.name} lr {self.lr:g}, betas {self.betas[0]:g}/{self.betas[1]:g}, weight "
            f"decay {self.weight_decay:g}, {self.warmup_fraction:.0%} linear warm-up, "
            f"{self.schedule} decay to 0, clip {self.clip:g} (not the papers' optimiser)"
        )


ADAMW = Optimiser("adamw", 1e-3, (0.9, 0.99), 0.01, 0.02, "cosine", 1.0)


@dataclass(frozen=True)
class Recipe:
    """One task's ``quick`` recipe: the sizes every row of that task is brought to (widths and
    steps absolute, so presets published at different sizes all land on a budget that
    learns on a laptop); the scale turns them into each row's factors, keeping the rows'
    differences (gates, a parameter-matched ``d_inner``)."""

    d_model: int  # widths x d_model / the row's d_model (heads kept)
    steps: int
    evaluations: int
    lr: float  # AdamW's rate: the narrow synthetic-task models take larger steps
    length: float = 1.0  # factor on every length (lm windows; the other tasks' are theirs)
    eval_max_tokens: int | None = None  # each periodic validation
    settings: tuple[tuple[str, object], ...] = ()  # set as given (music: pieces a batch)

    def fitted(self, config: Config, scale: Scale) -> Scale:
        """``scale`` with this recipe's sizes as factors on ``config``'s."""
        return replace(
            scale,
            width=self.d_model / config.model.d_model,
            length=self.length,
            steps=self.steps / config.train.max_steps,
            min_steps=self.steps,
            evaluations=self.evaluations,
            eval_max_tokens=self.eval_max_tokens,
            optimiser=replace(scale.optimiser or ADAMW, lr=self.lr),
            model=scale.model + self.settings,
            recipes=(),
        )


@dataclass(frozen=True)
class Scale:
    """Factors and caps of one scale (see the module docstring)."""

    name: str
    width: float = 1.0
    heads: float = 1.0
    length: float = 1.0
    steps: float = 1.0
    min_steps: int = 1
    evaluations: int | None = None  # periodic evaluations per run (None: as configured)
    batch_size: int | None = None  # None: as configured
    min_d_model: int = 0  # no model is narrowed below this d_model (narrower ones keep theirs)
    max_train_tokens: int | None = None
    max_eval_tokens: int | None = None  # final valid/test evaluation
    eval_max_tokens: int | None = None  # each periodic validation
    # optimiser name -> factor on the published learning rate (rows with other optimisers keep it)
    lr_factors: tuple[tuple[str, float], ...] = ()
    optimiser: Optimiser | None = None  # replaces every row's optimiser and schedule
    # settings replaced in every row (``cpu-modern``: pre-LN, PyTorch initialisation)
    model: tuple[tuple[str, object], ...] = ()
    # keep the step schedule's published decay interval (the run is the published run's start)
    published_lr_step: bool = False
    # task -> its recipe (``quick``): the factors above are fitted to each row's sizes
    recipes: tuple[tuple[str, Recipe], ...] = ()
    note: str = ""  # what else deviates from the papers, for describe_scale


# Picked by the pilots recorded in docs/results/cpu-scale-pilot.md.
CPU_SGD_LR_FACTOR = 2.0
CPU_ADAM_LR_FACTOR = 4.0
CPU_LR_FACTORS = (("sgd", CPU_SGD_LR_FACTOR), ("adam", CPU_ADAM_LR_FACTOR))

#: What ``cpu-modern`` changes in every model: the pre-LN block (with the final LayerNorm it
#: needs) and PyTorch's initialisation throughout (no reference-code init settings remain).
MODERN_MODEL: tuple[tuple[str, object], ...] = (
    ("model.norm", "pre"),
    ("model.final_norm", "true"),
    ("model.init", "torch"),
    ("model.init_proj_std", None),
    ("model.init_norm", "ones"),
    ("model.init_embedding", ""),
)

CPU = Scale(
    "cpu",
    width=1 / 4,
    length=1 / 4,
    steps=1 / 5,
    min_steps=1000,
    evaluations=50,
    min_d_model=128,
    eval_max_tokens=50_000,
    lr_factors=CPU_LR_FACTORS,
    note="the published optimiser and schedule shape",
)

NO_DROPOUT: tuple[tuple[str, object], ...] = (
    ("model.dropout", 0.0),
    ("model.dropout_emb", 0.0),
    ("model.dropout_attn", 0.0),
)

#: ``quick``: each task's recipe that learns on a 2-core laptop in minutes a run (measured,
#: docs/tasks.md "Quick recipes that learn on a laptop"); AdamW, warm-up and cosine, pre-LN,
#: PyTorch's initialisation, as ``cpu-modern``.
QUICK_RECIPES: dict[str, Recipe] = {
    # char PTB 16 x 100 (20 of context), word PTB 16 x 20 (10): a quarter of the windows;
    # no dropout: a run sees under one pass of the text, where dropout only slows it
    "lm": Recipe(
        d_model=128,
        steps=2000,
        evaluations=5,
        lr=3e-3,
        length=1 / 4,
        eval_max_tokens=20_000,
        settings=NO_DROPOUT,
    ),
    # word PTB (a word-level lm: its own recipe, the char one ends at perplexity 405): 64 x 40
    # words (10 of context), tables N(0, 1/d) scaled by sqrt(d) (the tied N(0, 1) default starts
    # at 32 nats), light dropout; measured in docs/tasks.md
    "lm-word": Recipe(
        d_model=128,
        steps=2000,
        evaluations=5,
        lr=3e-3,
        eval_max_tokens=20_000,
        settings=(
            ("data.batch_size", 64),
            ("data.seq_len", 40),
            ("data.context", 10),
            ("data.eval_layout", "every"),  # XL rows: scored as the others, context and all
            ("model.dropout", 0.1),
            ("model.dropout_emb", 0.1),
            ("model.dropout_attn", 0.0),
            ("model.embedding_scale", "true"),
            ("model.init_embedding", "normal"),
            ("model.init_std", 0.088),
        ),
    ),
    # 8 whole pieces a step, not the published one: a step costs about as much and learns more
    "music": Recipe(
        d_model=64,
        steps=600,
        evaluations=5,
        lr=2e-3,
        settings=(("data.batch_size", 8), ("data.eval_batch_size", 8)),
    ),
    "pixels": Recipe(d_model=64, steps=3000, evaluations=5, lr=3e-3),
    "copy": Recipe(d_model=32, steps=1000, evaluations=5, lr=3e-3),
    "adding": Recipe(d_model=32, steps=1000, evaluations=5, lr=3e-3),
    "seq2seq": Recipe(d_model=32, steps=600, evaluations=5, lr=3e-3),
    "rl": Recipe(d_model=32, steps=400, evaluations=5, lr=2.5e-3),  # PPO minibatch steps
}

SCALES: dict[str, Scale] = {
    "paper": Scale("paper"),
    "small": Scale(
        "small",
        width=1 / 4,
        length=1 / 4,
        steps=1 / 100,
        min_steps=100,
        evaluations=20,
        max_train_tokens=2_000_000,
        max_eval_tokens=200_000,
        eval_max_tokens=50_000,
    ),
    "tiny": Scale(
        "tiny",
        width=1 / 16,
        heads=1 / 4,
        length=1 / 8,
        steps=1 / 5000,
        min_steps=8,
        evaluations=4,
        batch_size=4,
        max_train_tokens=20_000,
        max_eval_tokens=2_000,
        eval_max_tokens=1_000,
    ),
    "cpu": CPU,
    # For tables whose runs cost hours each at cpu (the L6-XL of the HT Table 5 analogue).
    "cpu-short": replace(
        CPU,
        name="cpu-short",
        steps=1 / 20,
        # 25 validations of 20,000 tokens: at 50 x 50,000 the L6-XL's periodic validation
        # (segments of 20 over a memory of 525) took 15 of a run's 55 minutes
        evaluations=25,
        eval_max_tokens=20_000,
        note=CPU.note + "; a quarter of the cpu scale's steps",
    ),
    # RT Table 1 on MNIST: at cpu its runs would take 2-3 days each on a CPU thread.
    "cpu-mnist": replace(
        CPU,
        name="cpu-mnist",
        steps=1 / 50,
        evaluations=20,
        eval_max_tokens=256 * 784,  # 256 MNIST images a periodic validation
        published_lr_step=True,
        note=CPU.note
        + "; a tenth of the cpu scale's steps, the step schedule's interval as published (the "
        "published run's first steps, not a compressed copy of it)",
    ),
    "cpu-adamw": replace(CPU, name="cpu-adamw", lr_factors=(), optimiser=ADAMW, note=""),
    "cpu-modern": replace(
        CPU, name="cpu-modern", lr_factors=(), optimiser=ADAMW, model=MODERN_MODEL, note=""
    ),
    # gates-eras: the modern presets keep their cpu-modern sizes and optimiser, for a twentieth
    # of the steps (989 for T-L3, about 3.5 min a run on one core, 16% below the trigram)
    "short": Scale(
        "short",
        steps=1 / 20,
        min_steps=100,
        evaluations=10,
        eval_max_tokens=20_000,
        note="the rows' own sizes and optimiser",
    ),
    "quick": Scale(
        "quick",
        optimiser=ADAMW,
        model=MODERN_MODEL,
        recipes=tuple(QUICK_RECIPES.items()),
        note="each task's own recipe (below), its widths and steps absolute",
    ),
}


#: The scale name of rows trained as configured, unscaled (``highway ab``'s default): like
#: ``paper``, but said of configurations that are no paper's.
AS_CONFIGURED = "none"


def get_scale(name: str) -> Scale:
    """The scale called ``name`` (one of :data:`SCALES`)."""
    if name not in SCALES:
        raise unknown_choice("scale", name, SCALES)
    return SCALES[name]


def _times(value: int, factor: float, minimum: int = 1) -> int:
    return max(minimum, round(value * factor))


def _cap(current: int | None, cap: int | None) -> int | None:
    if cap is None:
        return current
    return cap if current is None else min(current, cap)


def width_factor(d_model: int, scale: Scale) -> float:
    """The factor on the widths of a model published at ``d_model``: ``scale.width``, but
    no narrower than ``scale.min_d_model`` (and never wider than published)."""
    if not scale.min_d_model:
        return scale.width
    return max(scale.width, min(1.0, scale.min_d_model / d_model))


def _width_updates(config: Config, scale: Scale) -> dict[str, Any]:
    m = config.model
    width = width_factor(m.d_model, scale)
    heads = _times(m.n_heads, scale.heads)
    d_model = max(heads, round(m.d_model * width / heads) * heads)
    updates: dict[str, Any] = {
        "model.n_heads": heads,
        "model.d_model": d_model,
        "model.d_inner": _times(m.d_inner, width),
    }
    if m.d_head is not None:
        updates["model.d_head"] = _times(m.d_head, width / scale.heads)
    return updates


def _length_updates(config: Config, scale: Scale) -> dict[str, Any]:
    d, mem = config.data, config.model.memory
    seq_len = _times(d.seq_len, scale.length, minimum=2)
    updates: dict[str, Any] = {
        "data.seq_len": seq_len,
        "data.context": min(_times(d.context, scale.length, minimum=0), seq_len - 1),
    }
    if d.eval_seq_len is not None:
        updates["data.eval_seq_len"] = _times(d.eval_seq_len, scale.length, minimum=2)
    if d.eval_context is not None:
        eval_len = updates.get("data.eval_seq_len", seq_len)
        updates["data.eval_context"] = min(
            _times(d.eval_context, scale.length, minimum=0), eval_len - 1
        )
    for key in ("mem_len", "clamp_len", "eval_mem_len", "eval_clamp_len"):
        value = getattr(mem, key)
        if value is not None and value > 0:
            updates[f"model.memory.{key}"] = _times(value, scale.length)
    return updates


def _lr_step(lr_step: int, scale: Scale) -> int:
    if not lr_step or scale.published_lr_step:
        return lr_step
    return _times(lr_step, scale.steps)


def _budget_updates(config: Config, scale: Scale) -> dict[str, Any]:
    t, d = config.train, config.data
    steps = _times(t.max_steps, scale.steps, minimum=scale.min_steps)
    updates: dict[str, Any] = {
        "train.max_steps": steps,
        "train.warmup_steps": _times(t.warmup_steps, scale.steps, minimum=0),
        "train.lr_step": _lr_step(t.lr_step, scale),
        "train.eval_max_tokens": _cap(t.eval_max_tokens, scale.eval_max_tokens),
    }
    if config.task.name in SPLIT_CAPPED_TASKS:  # the others generate their data
        updates["data.max_train_tokens"] = _cap(d.max_train_tokens, scale.max_train_tokens)
        updates["data.max_eval_tokens"] = _cap(d.max_eval_tokens, scale.max_eval_tokens)
    if scale.evaluations:
        updates["train.eval_interval"] = max(1, steps // scale.evaluations)
        updates["train.log_interval"] = max(1, min(t.log_interval, steps // 50))
        if t.checkpoint_interval:
            updates["train.checkpoint_interval"] = updates["train.eval_interval"]
    if scale.batch_size is not None:
        updates["data.batch_size"] = min(d.batch_size, scale.batch_size)
        updates["data.eval_batch_size"] = min(d.eval_batch_size, scale.batch_size)
    return updates


def _optimiser_updates(config: Config, scale: Scale, steps: int) -> dict[str, Any]:
    t = config.train
    # The pilot's factor is for models narrowed by the scale's whole width factor (a 4x
    # narrower model takes larger steps); a model kept wider (min_d_model) keeps the
    # published rate, for which no pilot says otherwise.
    narrowed = scale.width < 1.0 and width_factor(config.model.d_model, scale) == scale.width
    factor = dict(scale.lr_factors).get(t.optimizer, 1.0) if narrowed else 1.0
    updates: dict[str, Any] = {"train.lr": t.lr * factor} if factor != 1.0 else {}
    o = scale.optimiser
    if o is not None:
        updates = {
            "train.optimizer": o.name,
            "train.lr": o.lr,
            "train.betas": o.betas,
            "train.weight_decay": o.weight_decay,
            "train.momentum": 0.0,
            "train.schedule": o.schedule,
            # The rows' own schedule settings do not apply to it.
            "train.anneal_rule": "best",
            "train.lr_step": 0,
            "train.warmup_steps": max(1, round(steps * o.warmup_fraction)),
            "train.min_lr": 0.0,
            "train.clip": o.clip,
        }
    return updates


def _recipe(config: Config, scale: Scale) -> Recipe:
    """The recipe of ``config``'s task at ``scale`` (a word-level language model's is
    ``lm-word`` where the scale has one); a task without one is an error."""
    recipes = dict(scale.recipes)
    word = f"{config.task.name}-{corpus_level(config.data)}"
    if word in recipes:
        return recipes[word]
    if config.task.name not in recipes:
        raise ConfigError(
            f"the {scale.name} scale has no recipe for task {config.task.name!r} (it has "
            f"{', '.join(recipes)})"
        )
    return recipes[config.task.name]


def scale_config(config: Config, scale: str | Scale) -> Config:
    """``config`` shrunk to ``scale`` (``paper`` returns an unchanged copy), validated."""
    from ..validation import validate  # torch: only when a config is scaled

    return validate(scaled(config, scale))


def _resolved(config: Config, scale: str | Scale) -> Scale | None:
    """The scale ``config`` is shrunk by (a recipe fitted to its task), None for none."""
    if scale == AS_CONFIGURED:
        return None
    s = get_scale(scale) if isinstance(scale, str) else scale
    if s.name == "paper":
        return None
    return _recipe(config, s).fitted(config, s) if s.recipes else s


def scaled(config: Config, scale: str | Scale) -> Config:
    """``config`` shrunk to ``scale``, not validated: for a caller that applies its overrides
    after scaling and validates the result once (``highway train --scale``, a planned run)."""
    s = _resolved(config, scale)
    if s is None:
        return config.replace()
    budget = _budget_updates(config, s)
    updates = {
        **_width_updates(config, s),
        **_length_updates(config, s),
        **budget,
        **_optimiser_updates(config, s, budget["train.max_steps"]),
        **dict(s.model),
    }
    return config.replace(**updates)


def _flat(node: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(node, dict):
        return {prefix[:-1]: node}
    return {k: v for name, sub in node.items() for k, v in _flat(sub, f"{prefix}{name}.").items()}


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    return "null" if value is None else str(value)


def _lr_reason(config: Config, s: Scale) -> str:
    """Why ``s`` gives ``config`` the learning rate it does."""
    if s.optimiser is not None:
        return f"the {s.name} scale's {s.optimiser.name}"
    factor = dict(s.lr_factors).get(config.train.optimizer, 1.0)
    return f"{config.train.optimizer} x{factor:g} for a model narrowed x{s.width:g}"


def scale_changes(before: Config, after: Config, scale: str | Scale) -> str:
    """One line naming every setting ``scale`` changed from ``before`` (the config as asked)
    to ``after`` (scaled, the overrides applied again), ``key old -> new`` with the learning
    rate's reason; ``""`` where it changed none. The factors alone (:func:`describe_scale`)
    do not say what a run trains with."""
    s = _resolved(before, scale)
    old, new = _flat(before.to_dict()), _flat(after.to_dict())
    changed = [k for k in new if k != "name" and old.get(k) != new[k]]
    if s is None or not changed:
        return ""
    shown = [f"{k} {_shown(old.get(k))} -> {_shown(new[k])}" for k in changed]
    if "train.lr" in changed:
        shown[changed.index("train.lr")] += f" ({_lr_reason(before, s)})"
    return f"scale {s.name} changed {len(changed)} settings: " + ", ".join(shown)


def _describe_recipes(s: Scale) -> str:
    """The ``quick`` line: each task's sizes, then the optimiser and model settings."""
    tasks = "; ".join(
        f"{task}: d_model {r.d_model}, lengths x{r.length:g}, {r.steps} steps, "
        f"{r.evaluations} evaluations, lr {r.lr:g}" + "".join(f", {k}={v}" for k, v in r.settings)
        for task, r in s.recipes
    )
    model = ", ".join(f"{k}={v}" for k, v in s.model)
    optimiser = s.optimiser.describe() if s.optimiser else "optimiser as configured"
    return f"{s.name}: {s.note}: {tasks}; {optimiser} (lr by task); every model with {model}, fp32"


def describe_scale(scale: str | Scale) -> str:
    """One line stating the factors of ``scale`` (for reports and logs)."""
    if scale == AS_CONFIGURED:
        return "none: each row trained as configured (no scale applied)"
    s = get_scale(scale) if isinstance(scale, str) else scale
    if s.name == "paper":
        return "paper: the published hyper-parameters, unchanged"
    if s.recipes:
        return _describe_recipes(s)
    train = "all" if s.max_train_tokens is None else f"<= {s.max_train_tokens:,}"
    final = "all" if s.max_eval_tokens is None else f"<= {s.max_eval_tokens:,}"
    periodic = "" if s.eval_max_tokens is None else f" of <= {s.eval_max_tokens:,} tokens"
    if s.optimiser is not None:
        optimiser = s.optimiser.describe()
    else:
        narrowed = f" for models narrowed x{s.width:g}" if s.min_d_model else ""
        factors = ", ".join(f"{name} learning rate x{f:g}{narrowed}" for name, f in s.lr_factors)
        optimiser = "optimiser as published" + (f" except {factors}" if factors else "")
    note = f"; {s.note}" if s.note else ""
    if s.model:
        note += "; every model with " + ", ".join(f"{k}={v}" for k, v in s.model)
    floor = f" (no narrower than d_model {s.min_d_model})" if s.min_d_model else ""
    return (
        f"{s.name}: width x{s.width:g}{floor}, heads x{s.heads:g}, lengths x{s.length:g}, "
        f"steps x{s.steps:g} (min {s.min_steps}), {s.evaluations} evaluations{periodic} "
        "(anneal-when-stalled rules count these, not epochs), "
        f"batch {s.batch_size or 'as published'}, {train} train / {final} valid-test tokens, "
        f"depth as published, {optimiser}{note}, fp32"
    )
