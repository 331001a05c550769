"""Validation: every rule a configuration must satisfy, in one place.

This module sits above every registry the rules read (gates and norms in ``nn``, families,
attention kinds and initialisations in ``models``, tasks, parallel strategies) and is the only
module that knows them all. A config is validated once, at the boundary where it enters:
:func:`build_config` (files and ``key=value`` overrides), the trainer, the checked entry
points of :mod:`highway_transformer.api`, a checkpoint being read
(:func:`checkpoint_config`). Constructors below check only their own arguments.

Every failure is a :class:`~highway_transformer.errors.ConfigError` (a
:class:`~highway_transformer.errors.CheckpointError` for a checkpoint's config) whose one
line names the field and the fix.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Collection
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import (
    ANNEAL_RULES,
    COMPILE_MODES,
    DIST_BACKENDS,
    FINAL_WEIGHTS,
    FLAGS,
    LEVELS,
    OPTIMIZERS,
    POSITIONALS,
    PRECISIONS,
    SCHEDULES,
    SUBWORD_LEVELS,
    Config,
    DataConfig,
    MemoryConfig,
    ModelConfig,
    apply_overrides,
    names,
)
from .errors import CheckpointError, ConfigError, HighwayError, unknown_choice
from .nn.layer_spec import parse_layer_spec
from .storage.folder import CONFIG_FILE, read_config, resolve

if TYPE_CHECKING:
    from .models.families import Family

# The registries (gates, norms, families, tasks, ...) live beside the torch modules they name,
# so the checks reading them import them inside. The forms of a config (keys, types, ranges,
# and every name, from the registries' names in config.names) are checked first, without
# torch, and a typo answers at once.


def _choice(what: str, value: str, choices: Collection[str]) -> None:
    if value not in choices:
        raise unknown_choice(what, value, choices)


# --------------------------------------------------------------------------- boundaries


def build_config(
    base: Config, file: str | Path | None = None, overrides: list[str] | None = None
) -> Config:
    """``base`` updated by a config file and then by ``key=value`` overrides, validated."""
    return validate(apply_overrides(base, file, overrides))


def validate_model(model: ModelConfig) -> ModelConfig:
    """Check a model config on its own (what :func:`validate` checks of ``model``)."""
    validate(Config(model=model))
    return model


def checkpoint_config(folder: str | Path) -> Config:
    """A checkpoint's config, verified against its manifest and validated like a user's
    (a failure is a :class:`CheckpointError` naming the file)."""
    config = read_config(folder)
    try:
        return validate(config)
    except HighwayError as exc:
        path = resolve(folder) / CONFIG_FILE
        raise CheckpointError(f"{path} is not a valid config for this version: {exc}") from None


def validate(config: Config) -> Config:
    """Check every field that can be checked without data; raise ConfigError naming the fix."""
    check_form(config)
    check_task(config)  # first: a task that cannot use a setting says so before the family
    check_model(config.model)
    check_data(config.data)
    check_training(config)
    return config


# --------------------------------------------------------------------------- types and ranges


def check_overrides(
    base: Config, file: str | Path | None = None, overrides: list[str] | None = None
) -> Config:
    """``base`` updated by ``file`` and ``overrides``, its forms checked (:func:`check_form`):
    the typos of a file or an override answered before anything imports torch, where the
    whole config is validated later (after scaling, or against a checkpoint's config)."""
    return check_form(apply_overrides(base, file, overrides))


def check_form(config: Config) -> Config:
    """Types, ranges and names, the checks that import no torch: what :func:`validate`
    checks first."""
    check_types(config)
    check_ranges(config)
    check_names(config)
    return config


@dataclass(frozen=True)
class Range:
    """Allowed values of a numeric field: ``low <= value`` (``<`` when ``open_low``), likewise
    ``high``; ``fix`` says what to write instead."""

    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    fix: str = ""

    def describe(self) -> str:
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.open_low else '>='} {self.low:g}")
        if self.high is not None:
            parts.append(f"{'<' if self.open_high else '<='} {self.high:g}")
        return " and ".join(parts) or "a finite number"

    def admits(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.low is not None and (value < self.low or (self.open_low and value == self.low)):
            return False
        return not (
            self.high is not None and (value > self.high or (self.open_high and value == self.high))
        )


_AT_LEAST_1 = Range(1)
_NON_NEGATIVE = Range(0)
_PROBABILITY = Range(0, 1, open_high=True, fix="a dropout of 0.1 drops 10%")

#: Every numeric field's allowed values, listed once; :func:`validate` checks them all first.
#: ``None`` (where a field allows it) means "as another field" and is always accepted.
FIELD_RANGES: dict[str, Range] = {
    "model.vocab_size": Range(0, fix="0 takes it from the data"),
    "model.d_model": _AT_LEAST_1,
    "model.n_layers": _AT_LEAST_1,
    "model.n_heads": _AT_LEAST_1,
    "model.d_head": Range(1, fix="leave it unset (null) for d_model // n_heads"),
    "model.d_inner": _AT_LEAST_1,
    "model.dropout": _PROBABILITY,
    "model.dropout_emb": _PROBABILITY,
    "model.dropout_attn": _PROBABILITY,
    "model.dropout_pos": _PROBABILITY,
    "model.dropout_out": _PROBABILITY,
    "model.init_range": Range(0, open_low=True, fix="e.g. 0.1"),
    "model.init_std": Range(0, open_low=True, fix="e.g. 0.02"),
    "model.init_proj_std": Range(0, open_low=True, fix="e.g. 0.01, or unset it"),
    "model.shaw_clip": _AT_LEAST_1,
    "model.rope_theta": Range(0, open_low=True, fix="e.g. 10000, the RoFormer/Llama base"),
    "model.adaptive_cutoffs": _AT_LEAST_1,
    "model.adaptive_div": Range(1, fix="e.g. 4"),
    "model.gate.bias": Range(-100, 100, fix="gate biases are small, e.g. 0 or 2"),
    "model.local_rnn.window": _AT_LEAST_1,
    "model.local_rnn.per_block": _AT_LEAST_1,
    "model.memory.mem_len": _NON_NEGATIVE,
    "model.memory.clamp_len": Range(-1, fix="0 or -1 means no clamping"),
    "model.memory.eval_mem_len": _NON_NEGATIVE,
    "model.memory.eval_clamp_len": Range(-1, fix="0 or -1 means no clamping"),
    "data.batch_size": _AT_LEAST_1,
    "data.seq_len": _AT_LEAST_1,
    "data.context": _NON_NEGATIVE,
    "data.eval_batch_size": _AT_LEAST_1,
    "data.eval_seq_len": Range(1, fix="leave it unset (null) to use data.seq_len"),
    "data.eval_context": Range(0, fix="leave it unset (null) to use data.context"),
    "data.max_train_tokens": Range(2, fix="leave it unset (null) to use the whole stream"),
    "data.max_eval_tokens": Range(2, fix="leave it unset (null) to use the whole splits"),
    "data.subword_vocab_size": Range(256, fix="the 256 bytes are tokens; e.g. 1000"),
    "train.lr": Range(0, open_low=True, fix="e.g. 2.0 for SGD, 2.5e-4 for Adam"),
    "train.warmup_steps": Range(0, fix="0 disables warm-up"),
    "train.min_lr": _NON_NEGATIVE,
    "train.anneal_factor": Range(0, 1, open_low=True, fix="e.g. 0.25"),
    "train.lr_step": _NON_NEGATIVE,
    "train.anneal_patience": _NON_NEGATIVE,
    "train.anneal_window": _AT_LEAST_1,
    "train.anneal_after": _NON_NEGATIVE,
    "train.momentum": Range(0, 1, open_high=True),
    "train.weight_decay": _NON_NEGATIVE,
    "train.betas": Range(0, 1, open_high=True, fix="e.g. [0.9, 0.999]"),
    "train.clip": Range(0, fix="0 disables clipping"),
    "train.max_steps": _AT_LEAST_1,
    "train.eval_interval": _AT_LEAST_1,
    "train.eval_max_tokens": Range(1, fix="leave it unset (null) for the whole split"),
    "train.log_interval": Range(1, fix="log every N steps, e.g. 10"),
    "train.checkpoint_interval": Range(0, fix="0 checkpoints at each evaluation"),
    "train.keep_checkpoints": Range(1, fix="1 keeps checkpoint/ alone, the newest"),
    "train.seed": Range(0, 2**63 - 1),
    "train.threads": Range(0, fix="0 leaves the thread count as it is"),
    "train.accumulate": Range(1, fix="1 disables gradient accumulation"),
    "train.dist_timeout": Range(0, open_low=True, fix="seconds, e.g. 600"),
    "task.length": _AT_LEAST_1,
    "task.max_len": Range(0, fix="0 means no limit"),
    "task.beam_size": _AT_LEAST_1,
}


def _field_value(config: Config, dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        node = getattr(node, part)
    return node


def _type_fits(value: Any, hint: Any) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_type_fits(value, a) for a in args)
    if hint is type(None):
        return value is None
    if origin is tuple:
        items = args[:1] * len(value) if len(args) == 2 and args[1] is Ellipsis else args
        return (
            isinstance(value, tuple)
            and len(items) == len(value)
            and all(_type_fits(v, a) for v, a in zip(value, items, strict=True))
        )
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if is_dataclass(hint):
        return isinstance(value, hint)
    return isinstance(value, hint) if isinstance(hint, type) else True


def check_types(obj: Any, prefix: str = "") -> None:
    """Every field of a (nested) config dataclass has its declared type (API-built configs
    are not coerced the way files and overrides are)."""
    for name, hint in typing.get_type_hints(type(obj)).items():
        value = getattr(obj, name)
        if not _type_fits(value, hint):
            wanted = getattr(hint, "__name__", str(hint).replace("typing.", ""))
            raise ConfigError(f"{prefix}{name} must be of type {wanted}, got {value!r}")
        if is_dataclass(value):
            check_types(value, f"{prefix}{name}.")


def check_ranges(config: Config) -> None:
    """Every field of :data:`FIELD_RANGES` within its range; the error names field and fix."""
    for name, allowed in FIELD_RANGES.items():
        value = _field_value(config, name)
        for item in value if isinstance(value, tuple) else (value,):
            if item is None or allowed.admits(item):
                continue
            fix = f" ({allowed.fix})" if allowed.fix else ""
            raise ConfigError(f"{name} must be {allowed.describe()}, got {item}{fix}")


# --------------------------------------------------------------------------- names


def check_names(config: Config) -> None:
    """Every name the config chooses is one a registry knows (read from
    :mod:`highway_transformer.config.names`, so no torch is imported)."""
    _check_model_names(config.model)
    _check_data_names(config.data)
    _check_task_names(config)
    _check_training_names(config)


def _check_model_names(m: ModelConfig) -> None:
    _choice("model family", m.family, names.FAMILY_NAMES)
    if m.attention is not None:
        _choice("attention", m.attention, names.ATTENTION_NAMES)
    _choice("local RNN cell", m.local_rnn.cell, names.CELL_NAMES)
    _choice("positional encoding", m.positional, POSITIONALS)
    _choice("feed-forward sublayer (model.ffn)", m.ffn, names.FFN_NAMES)
    _choice(
        "attention-output gate (model.attn_output_gate)",
        m.attn_output_gate,
        names.ATTN_OUTPUT_GATES,
    )
    _choice(
        "attention kernel (model.attention_kernel)", m.attention_kernel, names.ATTENTION_KERNELS
    )
    _choice("layer norm (model.layer_norm)", m.layer_norm, names.NORM_NAMES)
    for name in ("final_norm", "embedding_scale"):
        _choice(f"model.{name} value", str(getattr(m, name)).lower(), FLAGS)
    _choice("initialisation", m.init, names.SCHEMES)
    _choice("LayerNorm initialisation", m.init_norm, names.NORM_INITS)
    _choice("token table initialisation", m.init_embedding, names.EMBEDDING_SCHEMES)
    _choice("norm position", m.norm, names.NORM_POSITIONS)
    if m.gate.kind in ("attn-output", "attn_output", "attention-output"):
        raise ConfigError(
            f"model.gate.kind={m.gate.kind}: the attention-output gate is its own key, so it "
            "combines with the connection gates; set model.attn_output_gate=elementwise or headwise"
        )
    _choice("gate", m.gate.kind, names.GATE_NAMES)
    _choice("gate activation", m.gate.activation, names.ACTIVATION_NAMES)
    for sub in m.gate.sublayers:
        _choice("gated sublayer kind", sub, names.GATEABLE_NAMES)


def _check_data_names(d: DataConfig) -> None:
    _choice("corpus (data.corpus)", d.corpus, names.CORPUS_NAMES)
    _choice("corpus level", d.level, LEVELS)
    _choice("vocabulary splits (data.vocab_splits)", d.vocab_splits, names.VOCAB_SPLITS)
    _choice("evaluation layout (data.eval_layout)", d.eval_layout, names.EVAL_LAYOUT_NAMES)


def _check_task_names(config: Config) -> None:
    task = config.task
    _choice("task", task.name, names.TASK_NAMES)
    _choice("task.pooling", task.pooling, names.POOLING_NAMES)
    names.normalize_score(task.score)
    if task.name == "pixels" and task.dataset.strip():
        _choice("pixel data set (task.dataset)", task.dataset.strip().lower(), names.PIXEL_DATASETS)


def _check_training_names(config: Config) -> None:
    t = config.train
    _choice("optimizer", t.optimizer, OPTIMIZERS)
    _choice("learning-rate schedule", t.schedule, SCHEDULES)
    _choice("anneal rule", t.anneal_rule, ANNEAL_RULES)
    _choice("final weights", t.final_weights, FINAL_WEIGHTS)
    _choice("precision", t.precision, PRECISIONS)
    _choice("distributed backend", t.dist_backend, DIST_BACKENDS)
    _choice("training strategy (train.strategy)", t.strategy, names.STRATEGY_NAMES)
    names.check_device_name(t.device)
    # an earlier version's boolean reads as true / false
    _choice("train.compile value", str(t.compile).lower(), FLAGS)
    _choice("torch.compile mode (train.compile_mode)", t.compile_mode, COMPILE_MODES)


# --------------------------------------------------------------------------- model


def check_model(config: ModelConfig) -> None:
    """The settings that apply to some families only, read from the registries."""
    from .models.families import family_of

    family = family_of(config)
    _check_attention(config, family)
    _check_memory(config, family)
    _check_fidelity_options(config, family)
    _check_initialisation(config)
    _check_gate(config)
    _check_rope(config, family)
    if config.d_head is None and config.d_model % config.n_heads:
        raise ConfigError(
            f"model.d_model={config.d_model} does not divide into model.n_heads="
            f"{config.n_heads} heads; choose n_heads dividing d_model or set model.d_head"
        )
    if list(config.adaptive_cutoffs) != sorted(set(config.adaptive_cutoffs)):
        raise ConfigError("model.adaptive_cutoffs must be strictly increasing")


def _check_attention(config: ModelConfig, family: Family) -> None:
    if config.attention is not None and config.attention not in family.attentions:
        raise ConfigError(
            f"model.family={config.family} takes model.attention="
            f"{' or '.join(family.attentions)}, got {config.attention}; "
            "change the family or leave model.attention unset"
        )
    kind = config.attention or family.attentions[0]
    if kind != "relative" and config.attention_kernel != "auto":
        raise ConfigError(
            f"model.attention_kernel applies to relative attention (model.family=xl), not to "
            f"{kind} attention of model.family={config.family}; remove it"
        )
    inner = config.head_dim * config.n_heads
    if kind == "shaw" and config.d_head is not None and inner != config.d_model:
        raise ConfigError("Shaw attention needs d_head * n_heads == d_model; unset model.d_head")


def _check_rope(config: ModelConfig, family: Family) -> None:
    """RoPE rotates the queries and keys of dot-product attention, in pairs of features."""
    if config.positional != "rope":
        if config.rope_theta != ModelConfig.rope_theta:
            raise ConfigError(
                "model.rope_theta applies to model.positional=rope; remove it or set "
                "model.positional=rope"
            )
        return
    kind = config.attention or family.attentions[0]
    if kind != "dot":
        raise ConfigError(
            f"model.positional=rope applies to dot-product attention; {kind} attention encodes "
            f"distances itself: use model.positional=none with attention={kind}"
        )
    if config.head_dim % 2:
        raise ConfigError(
            f"model.positional=rope rotates pairs of features: the head size {config.head_dim} "
            "must be even; set model.d_head (or n_heads) to make it even"
        )


def _check_memory(config: ModelConfig, family: Family) -> None:
    if family.memory:
        return
    default = MemoryConfig()
    for f in fields(default):
        if getattr(config.memory, f.name) != getattr(default, f.name):
            raise ConfigError(
                f"model.memory.{f.name} applies to model.family=xl only (segment memory), "
                f"not to {config.family}; remove it or use model.family=xl"
            )


def _check_fidelity_options(config: ModelConfig, family: Family) -> None:
    """The reference-code options (docs/fidelity.md) that apply to XL only."""
    if not family.memory:
        for name, value in (("dropout_pos", config.dropout_pos), ("untie_r", config.untie_r)):
            if value not in (None, False):
                raise ConfigError(
                    f"model.{name} applies to model.family=xl only (relative attention), "
                    f"not to {config.family}; remove it or use model.family=xl"
                )


def _check_initialisation(config: ModelConfig) -> None:
    if config.init == "torch" and config.init_proj_std is not None:
        raise ConfigError("model.init_proj_std needs model.init=uniform or normal; unset it")


def _check_gate(config: ModelConfig) -> None:
    from .nn.connections import combiner_class

    gate = config.gate
    combiner = combiner_class(gate.kind)
    if gate.activation not in combiner.activations:  # HT eq. 26 and the authors' code
        raise ConfigError(
            f"the {gate.kind} gate's T is a sigmoid (HT eq. 26 and the authors' code); "
            f"remove model.gate.activation={gate.activation} or use the sdu gate"
        )
    if combiner.pre_ln_only and config.norm != "pre":
        raise ConfigError(
            f"the {gate.kind} gate needs the identity-map reordering: set model.norm=pre "
            "(GTrXL gates work with pre-LN only; SDU/highway/gated work with both)"
        )
    if gate.bias is not None and not math.isfinite(gate.bias):
        raise ConfigError(f"model.gate.bias must be a finite number, got {gate.bias}")
    if not str(gate.layers).strip():
        raise ConfigError(
            "model.gate.layers is empty; write all, none, 1-3, 1,2 or 1-6\\FFN (1-based layers)"
        )
    parse_layer_spec(gate.layers, config.n_layers)


# --------------------------------------------------------------------------- data


def check_data(d: DataConfig) -> None:
    """The file-corpus settings, the vocabulary splits and the windows."""
    from .data.corpora import COUNTED_VOCABULARIES

    check_file_corpus_config(d)
    if d.vocab_splits != "auto" and d.corpus not in COUNTED_VOCABULARIES:
        raise ConfigError(
            f"data.vocab_splits applies to data.corpus={' or '.join(COUNTED_VOCABULARIES)} "
            f"(a vocabulary counted from the corpus), not {d.corpus}; remove it"
        )
    for ctx_name, len_name in (("context", "seq_len"), ("eval_context", "eval_seq_len")):
        ctx = getattr(d, ctx_name)
        length = getattr(d, len_name) or d.seq_len
        if ctx is not None and not 0 <= ctx < length:
            raise ConfigError(f"data.{ctx_name}={ctx} must be in [0, {len_name}={length})")


def check_file_corpus_config(d: DataConfig) -> None:
    """Subword levels and the token cache apply to user files only; sizes to subword levels."""
    if d.level in SUBWORD_LEVELS and d.corpus != "file":
        raise ConfigError(
            f"data.level={d.level} trains a tokenizer on your own text: use it with "
            f"data.corpus=file (the {d.corpus} corpus has its published vocabulary)"
        )
    if d.cache is not None and d.corpus != "file":
        raise ConfigError(f"data.cache applies to data.corpus=file, not {d.corpus}; remove it")
    if d.subword_vocab_size is not None and d.level not in SUBWORD_LEVELS:
        raise ConfigError(
            f"data.subword_vocab_size applies to data.level={' or '.join(SUBWORD_LEVELS)}, "
            f"not {d.level}; remove it or choose a subword level"
        )


# --------------------------------------------------------------------------- task


def check_task(config: Config) -> None:
    """The ``task`` section, and the model settings the task cannot use."""
    from .tasks import TASKS

    task = config.task
    if task.name == "adding" and task.length < 2:
        raise ConfigError("the adding problem needs task.length >= 2")
    memory = config.model.memory
    if not TASKS[task.name].supports_memory and (memory.mem_len or memory.eval_mem_len):
        raise ConfigError(
            f"task.name={task.name} has no segment memory but model.memory.mem_len="
            f"{memory.mem_len} (eval_mem_len={memory.eval_mem_len}); set them to 0 or train "
            "task.name=lm"
        )
    data = config.data
    if task.name not in names.SPLIT_CAPPED_TASKS and (
        data.max_train_tokens or data.max_eval_tokens
    ):
        raise ConfigError(
            f"data.max_train_tokens / data.max_eval_tokens cap the splits of the tasks "
            f"{', '.join(names.SPLIT_CAPPED_TASKS)}; task.name={task.name} generates its data: "
            "remove them"
        )
    if config.model.dropout_out is not None and task.name != "lm":
        raise ConfigError(
            f"model.dropout_out applies to language models only; remove it for "
            f"task.name={task.name}"
        )
    _check_scored_attention(config)
    _check_eval_layout(config)


def _check_scored_attention(config: Config) -> None:
    """The encoder-decoder's attention is its own (task.score): the options of the dot,
    Shaw and relative attention modules do not reach it."""
    m = config.model
    if config.task.name != "seq2seq":
        return
    chosen = {
        "positional=rope": m.positional == "rope",
        f"attn_output_gate={m.attn_output_gate}": m.attn_output_gate != "none",
        "bias=false": not m.bias,
    }
    for setting, misfit in chosen.items():
        if misfit:
            raise ConfigError(
                f"model.{setting} applies to the dot, Shaw and relative attention of the "
                "language and sequence models, not task.name=seq2seq's scored attention; remove it"
            )


def _check_eval_layout(config: Config) -> None:
    """The reference layout is Transformer-XL's data iterator: an XL language model's,
    without history-only positions (the XL scripts' ``ext_len`` 0)."""
    from .models.families import family_of

    d = config.data
    if d.eval_layout != "reference":
        return
    if config.task.name != "lm":
        raise ConfigError(
            "data.eval_layout=reference applies to language models (task.name=lm), not "
            f"task.name={config.task.name}; remove it"
        )
    if not family_of(config.model).memory:
        raise ConfigError(
            "data.eval_layout=reference is Transformer-XL's data iterator: it applies to "
            f"model.family=xl, not {config.model.family}; remove it or use model.family=xl"
        )
    context = d.context if d.eval_context is None else d.eval_context
    if context:
        raise ConfigError(
            f"data.eval_layout=reference has no history-only positions but the evaluation "
            f"context is {context}; set data.eval_context=0 or use data.eval_layout=every"
        )


# --------------------------------------------------------------------------- training


def check_training(config: Config) -> None:
    """Optimiser, schedule, precision and the parallel settings that apply together."""
    t = config.train
    if t.anneal_rule != "best" and t.schedule != "anneal":
        raise ConfigError(
            f"train.anneal_rule={t.anneal_rule} applies to train.schedule=anneal only, "
            f"not {t.schedule}; drop it or set train.schedule=anneal"
        )
    if (t.schedule == "step") != (t.lr_step > 0):
        raise ConfigError(
            f"train.lr_step={t.lr_step} with train.schedule={t.schedule}: the step schedule "
            "needs train.lr_step >= 1 (steps between decays), the others take none; set both "
            "or neither"
        )
    if t.compile_mode != "default" and str(t.compile).lower() == "false":
        raise ConfigError(
            f"train.compile_mode={t.compile_mode} applies to a compiled model, and "
            "train.compile=false does not compile; set train.compile=auto or true, or drop "
            "compile_mode"
        )
    if t.fused_optimizer and t.optimizer == "sgd":
        raise ConfigError(
            "train.fused_optimizer applies to adam and adamw only; set train.optimizer=adamw "
            "or leave fused_optimizer off"
        )
