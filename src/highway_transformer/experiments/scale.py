"""Scaled-down versions of the papers' configurations, uniform across a table's rows.

==========  ======  =====  ======  =======  =====  ============  =================
scale       width   heads  length  steps    batch  train tokens  valid/test tokens
==========  ======  =====  ======  =======  =====  ============  =================
``paper``   1       1      1       1        as is  all           all
``small``   1/4     1      1/4     1/100    as is  2,000,000     200,000
``tiny``    1/16    1/4    1/8     1/5000   4      20,000        2,000
==========  ======  =====  ======  =======  =====  ============  =================

* **width** multiplies ``d_model``, ``d_inner`` and ``d_head`` (``d_head`` by width / heads,
  so ``n_heads × d_head`` keeps its ratio to ``d_model``); ``d_model`` is rounded to a
  multiple of the head count.
* **length** multiplies every length: ``seq_len`` and ``context`` (the loss-free history),
  their evaluation twins, the Transformer-XL ``mem_len`` / ``clamp_len`` and their evaluation
  twins. The LocalRNN window is a property of the model and is kept.
* **steps** multiplies ``max_steps`` and ``warmup_steps`` (at least 100 steps at ``small``,
  8 at ``tiny``); ``small`` evaluates 20 times per run, ``tiny`` 4 times, on at most 50,000 /
  1,000 validation tokens each time; the final valid/test evaluation uses the capped splits.
* **depth** (``n_layers``) is kept at every scale: Tables 5-6 gate particular layers
  (``L1-3``, ``L3-6``, ``L1-12``) and Table 6's finding is about depth, so shrinking it would
  merge or break rows. Optimiser, learning rate, schedule, clipping, dropout, initialisation
  and seed are kept as published.

Every row of a table shares its base hyper-parameters and differs only in the gate, so the
same rule gives every row the same budget, data and seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config import Config
from ..errors import unknown_choice


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
    max_train_tokens: int | None = None
    max_eval_tokens: int | None = None  # final valid/test evaluation
    eval_max_tokens: int | None = None  # each periodic validation


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
}


def get_scale(name: str) -> Scale:
    """The scale called ``name`` (paper | small | tiny)."""
    if name not in SCALES:
        raise unknown_choice("scale", name, SCALES)
    return SCALES[name]


def _times(value: int, factor: float, minimum: int = 1) -> int:
    return max(minimum, round(value * factor))


def _cap(current: int | None, cap: int | None) -> int | None:
    if cap is None:
        return current
    return cap if current is None else min(current, cap)


def _width_updates(config: Config, scale: Scale) -> dict[str, Any]:
    m = config.model
    heads = _times(m.n_heads, scale.heads)
    d_model = max(heads, round(m.d_model * scale.width / heads) * heads)
    updates: dict[str, Any] = {
        "model.n_heads": heads,
        "model.d_model": d_model,
        "model.d_inner": _times(m.d_inner, scale.width),
    }
    if m.d_head is not None:
        updates["model.d_head"] = _times(m.d_head, scale.width / scale.heads)
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


def _budget_updates(config: Config, scale: Scale) -> dict[str, Any]:
    t, d = config.train, config.data
    steps = _times(t.max_steps, scale.steps, minimum=scale.min_steps)
    updates: dict[str, Any] = {
        "train.max_steps": steps,
        "train.warmup_steps": _times(t.warmup_steps, scale.steps, minimum=0),
        "train.eval_max_tokens": _cap(t.eval_max_tokens, scale.eval_max_tokens),
        "data.max_train_tokens": _cap(d.max_train_tokens, scale.max_train_tokens),
        "data.max_eval_tokens": _cap(d.max_eval_tokens, scale.max_eval_tokens),
    }
    if scale.evaluations:
        updates["train.eval_interval"] = max(1, steps // scale.evaluations)
        updates["train.log_interval"] = max(1, min(t.log_interval, steps // 50))
        if t.checkpoint_interval:
            updates["train.checkpoint_interval"] = updates["train.eval_interval"]
    if scale.batch_size is not None:
        updates["data.batch_size"] = min(d.batch_size, scale.batch_size)
        updates["data.eval_batch_size"] = min(d.eval_batch_size, scale.batch_size)
    return updates


def scale_config(config: Config, scale: str | Scale) -> Config:
    """``config`` shrunk to ``scale`` (``paper`` returns an unchanged, validated copy)."""
    scale = get_scale(scale) if isinstance(scale, str) else scale
    if scale.name == "paper":
        return config.replace().validate()
    updates = {
        **_width_updates(config, scale),
        **_length_updates(config, scale),
        **_budget_updates(config, scale),
    }
    return config.replace(**updates).validate()


def describe_scale(scale: str | Scale) -> str:
    """One line stating the factors of ``scale`` (for reports and logs)."""
    s = get_scale(scale) if isinstance(scale, str) else scale
    if s.name == "paper":
        return "paper: the published hyper-parameters, unchanged"
    return (
        f"{s.name}: width x{s.width:g}, heads x{s.heads:g}, lengths x{s.length:g}, "
        f"steps x{s.steps:g} (min {s.min_steps}), {s.evaluations} evaluations, "
        f"batch {s.batch_size or 'as published'}, <= {s.max_train_tokens:,} train / "
        f"{s.max_eval_tokens:,} valid-test tokens, depth and optimiser as published"
    )
