"""Every config key with its default and meaning (``highway config``).

The meaning of a key is the comment on its field in :mod:`highway_transformer.config.schema`
(one source of truth); the fields whose names say too little there get a line here.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import MISSING, Field, fields, is_dataclass
from functools import cache
from typing import Any

from ..errors import ConfigError
from .schema import Config

#: What a field is, where its comment in config/schema.py only explains special values (or
#: is absent).
MEANINGS = {
    "model.family": "transformer | rtransformer | xl",
    "model.vocab_size": "symbols in the vocabulary",
    "model.d_head": "width per attention head",
    "model.dropout_emb": "dropout on the embeddings",
    "model.norm": "where LayerNorm sits around each sublayer",
    "model.tie_weights": (
        "share the input embedding and the output layer weights (adaptive: each cluster's "
        "table and the tail projections, as the Transformer-XL reference)"
    ),
    "model.memory.clamp_len": "largest relative distance used",
    "model.memory.same_length": "every query attends to the same number of keys",
    "model.memory.eval_mem_len": "memory length in evaluation",
    "data.eval_seq_len": "tokens per evaluation window",
    "data.eval_context": "history-only positions of each evaluation window",
    "train.checkpoint_interval": "steps between checkpoints",
    "train.keep_checkpoints": (
        "checkpoints kept: checkpoint/ (the newest, what --resume reads) and the K - 1 before "
        "it in checkpoints/step-N/, the oldest dropped at each save"
    ),
    "name": "run name (default run folder runs/NAME)",
    "model.d_model": "width of the residual stream",
    "model.n_layers": "number of blocks",
    "model.n_heads": "attention heads",
    "model.d_inner": "hidden width of the feed-forward sublayer",
    "model.shaw_clip": "Shaw attention: largest relative distance with its own embedding",
    "model.adaptive_div": (
        "adaptive input/softmax: width divisor per cluster (1: one full table, no projections)"
    ),
    "model.gate.layers": "gated layers, 1-based as the paper writes them: all, none, 1-3, 1-6\\FFN",
    "model.local_rnn.window": "LocalRNN window size k (positions each local RNN reads)",
    "model.memory.mem_len": "Transformer-XL memory length in training (0: no memory)",
    "model.memory.eval_clamp_len": "clamp_len for evaluation (None: as clamp_len)",
    "model.memory.eval_same_length": "same_length for evaluation (None: as same_length)",
    "data.batch_size": "training rows per step",
    "data.seq_len": "tokens per training window",
    "data.context": "leading positions of each window that are history only (no loss)",
    "data.eval_batch_size": "rows in evaluation",
    "data.eval_layout": (
        "evaluation rows: every scores each target once; reference drops the remainder of "
        "len // eval_batch_size and each row's first target (<= 2B - 2), as the XL code"
    ),
    "data.vocab_splits": "splits whose symbols the vocabulary counts",
    "train.optimizer": "sgd | adam | adamw",
    "train.lr": "peak learning rate",
    "train.warmup_steps": "linear warm-up steps before the schedule",
    "train.min_lr": "floor of the linear / cosine schedules",
    "train.momentum": "SGD momentum",
    "train.weight_decay": "L2 penalty (decoupled for adamw)",
    "train.betas": "Adam betas",
    "train.max_steps": "training steps",
    "train.eval_interval": "steps between validation evaluations (and checkpoints)",
    "train.log_interval": "steps between training log lines",
    "train.seed": "seed of the weights, data order and dropout",
    "train.compile": (
        "torch.compile the training step (on a CPU it has not been shown to pay; an earlier "
        "version's true / false means the same)"
    ),
    "train.compile_mode": "torch.compile's mode; CUDA graphs (reduce-overhead) are not offered",
}

_COMMENT = re.compile(r"^\s+(\w+)\s*:[^#]*#\s*(.+)$")


@cache
def _field_comments(cls: type) -> dict[str, str]:
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):  # pragma: no cover - source not shipped
        return {}
    return {m[1]: m[2].strip() for line in source.splitlines() if (m := _COMMENT.match(line))}


def _default(f: Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return None  # pragma: no cover - every config field has a default


def config_keys(cls: type = Config, prefix: str = "") -> list[tuple[str, Any, str]]:
    """``(dotted key, default, meaning)`` for every leaf field of ``cls``, in field order."""
    out: list[tuple[str, Any, str]] = []
    comments = _field_comments(cls)
    for f in fields(cls):
        key = f"{prefix}{f.name}"
        default = _default(f)
        if is_dataclass(default):
            out += config_keys(type(default), f"{key}.")
            continue
        parts = (MEANINGS.get(key), comments.get(f.name))
        out.append((key, default, "; ".join(p for p in parts if p)))
    return out


def format_keys(section: str | None = None) -> str:
    """The table ``highway config`` prints (one section, e.g. ``train``, or all)."""
    rows = [r for r in config_keys() if section is None or r[0].startswith(f"{section}.")]
    if not rows:
        sections = sorted({k.split(".")[0] for k, _, _ in config_keys() if "." in k})
        raise ConfigError(f"no config section {section!r}; choose one of: {', '.join(sections)}")
    width = max(len(k) for k, _, _ in rows)
    shown = [(k, "None" if d is None else repr(d), m) for k, d, m in rows]
    dwidth = min(max(len(d) for _, d, _ in shown), 20)
    return "\n".join(f"{k:<{width}}  {d:<{dwidth}}  {m}".rstrip() for k, d, m in shown)
