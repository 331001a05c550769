"""Validation: every rule a configuration must satisfy, in one place.

This module sits above every registry the rules read (gates and norms in ``nn``, families,
attention kinds and initialisations in ``models``, tasks, parallel strategies) and is the only
module that knows them all. A config is validated once, at the boundary where it enters:
:func:`build_config` (files and ``key=value`` overrides), the trainer, the checked entry
points of :mod:`highway_transformer.api`, a checkpoint being read
(:func:`checkpoint_config`); within one entry point (:func:`validating_once`: a command, an
API call) a config that passed one boundary is not checked again at the next. Constructors
below check only their own arguments.

Every failure is a :class:`~highway_transformer.errors.ConfigError` (a
:class:`~highway_transformer.errors.CheckpointError` for a checkpoint's config) whose one
line names the field and the fix.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import (
    SUBWORD_LEVELS,
    Config,
    DataConfig,
    GateConfig,
    MemoryConfig,
    ModelConfig,
    RLConfig,
    apply_overrides,
    names,
)
from .config.keys import choices_of, declared_keys, key_ranges
from .config.schema import Key
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


#: The configs (by value: ``repr`` tells ``"3"`` from ``3`` and a tuple from a list) that
#: passed :func:`check_all` in the entry point running (:func:`validating_once`), or None
#: outside one. The rules read the values and the registries, which an entry point does not
#: change, so a config crossing a second boundary (``build_config``, then the trainer) or
#: planned twice (an A/B's rows, then its runs) is not checked again.
_PASSED: ContextVar[dict[str, None] | None] = ContextVar("validated", default=None)


@contextmanager
def validating_once() -> Iterator[None]:
    """An entry point (a command, an API call): within it :func:`validate` checks each config
    once; nested, the outer one's record is kept."""
    token = _PASSED.set({} if _PASSED.get() is None else _PASSED.get())
    try:
        yield
    finally:
        _PASSED.reset(token)


def validate(config: Config) -> Config:
    """Check every field that can be checked without data; raise ConfigError naming the fix.

    Within an entry point (:func:`validating_once`) a config whose values passed before is
    returned unchecked: it is validated once, however many boundaries it then crosses."""
    passed = _PASSED.get()
    seen = repr(config) if passed is not None else ""
    if passed is None or seen not in passed:
        check_all(config)
        if passed is not None:
            passed[seen] = None
    return config


def check_all(config: Config) -> None:
    """Every rule, every time (:func:`validate` calls it once per config)."""
    check_form(config)
    check_task(config)  # first: a task that cannot use a setting says so before the family
    check_model(config.model)
    check_data(config.data)
    check_training(config)


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


def _items(value: Any) -> tuple[Any, ...]:
    """The values a key's check reads: each item of a tuple; ``None`` (as another field) none."""
    return value if isinstance(value, tuple) else () if value is None else (value,)


def check_ranges(config: Config) -> None:
    """Every numeric key within its declared range (``config/schema.py``); the error names
    field and fix."""
    for name, allowed in key_ranges().items():
        for item in _items(_field_value(config, name)):
            if not allowed.admits(item):
                fix = f" ({allowed.fix})" if allowed.fix else ""
                raise ConfigError(f"{name} must be {allowed.describe()}, got {item}{fix}")


# --------------------------------------------------------------------------- names


def check_names(config: Config) -> None:
    """Every name the config chooses is one its key declares (a registry's names, read from
    :mod:`highway_transformer.config.names` now, so no torch is imported), and the forms
    that are no list of names."""
    kind = config.model.gate.kind
    if kind in ("attn-output", "attn_output", "attention-output"):
        raise ConfigError(
            f"model.gate.kind={kind}: the attention-output gate is its own key, so it "
            "combines with the connection gates; set model.attn_output_gate=elementwise or headwise"
        )
    if kind in names.ATTN_OUTPUT_GATES and kind != "none":
        raise ConfigError(
            f"model.gate.kind={kind}: the connection gates have no granularity; {kind} is the "
            f"attention-output gate's: set model.attn_output_gate={kind}"
        )
    for declared in declared_keys():
        if declared.spec and declared.spec.choices:
            for item in _items(_field_value(config, declared.name)):
                _check_choice(declared.name, declared.spec, item)
    names.check_device_name(config.train.device)
    task = config.task  # the data sets a task may name depend on the task
    if task.name == "pixels" and task.dataset.strip():
        _choice("pixel data set (task.dataset)", task.dataset.strip().lower(), names.PIXEL_DATASETS)


def _check_choice(name: str, spec: Key, value: Any) -> None:
    read = names.READERS.get(spec.choices or "")  # FLAGS read booleans, SCORES aliases
    _choice(spec.what or f"{name} value", read(value) if read else value, choices_of(spec))


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
    _check_swiglu(config)
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
    _check_no_connection_gate(config)


def _check_no_connection_gate(config: ModelConfig) -> None:
    """``model.gate.layers`` and ``sublayers`` place the connection gate; with none of those
    (kind none) they would not reach the attention-output gate, which is on every layer."""
    gate, default = config.gate, GateConfig()
    if gate.kind != "none" or config.attn_output_gate == "none":
        return
    for name in ("layers", "sublayers"):
        if getattr(gate, name) != getattr(default, name):
            raise ConfigError(
                f"model.gate.{name} places the connection gate (model.gate.kind, here none), "
                f"not model.attn_output_gate, which gates every attention sublayer; remove it "
                "or choose a connection gate (model.gate.kind=sdu, highway, gated, gtrxl-...)"
            )


def _check_swiglu(config: ModelConfig) -> None:
    """``d_inner`` is the width of the ReLU FFN whose parameters SwiGLU matches with a
    hidden width of 2/3 of it, rounded up to a multiple of 8: a ``d_inner`` where that
    rounding makes the hidden width exceed ``d_inner`` itself (1-7, 13-15) contradicts the
    rule, and a multiple of 12 gives exactly 2/3."""
    from .nn.feedforward import swiglu_hidden

    if config.ffn != "swiglu":
        return
    hidden = swiglu_hidden(config.d_inner)
    if hidden > config.d_inner:
        fit = max(12, config.d_inner // 12 * 12)
        raise ConfigError(
            f"model.ffn=swiglu: model.d_inner={config.d_inner} is the width of the ReLU FFN "
            f"it matches, and 2/3 of it rounded up to a multiple of 8 is {hidden}, wider than "
            f"that; set model.d_inner={fit} (hidden {fit * 2 // 3}, exactly 2/3) or 16 or more"
        )


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
    _check_rl(config)


def _changed_rl_keys(config: Config) -> list[str]:
    default = RLConfig()
    return [
        f.name
        for f in fields(default)
        if getattr(config.task.rl, f.name) != getattr(default, f.name)
    ]


def _check_rl(config: Config) -> None:
    """PPO's settings apply to task.name=rl, and the rl task builds its own policies."""
    rl, changed = config.task.rl, _changed_rl_keys(config)
    if config.task.name != "rl":
        if changed:
            raise ConfigError(
                f"task.rl.{changed[0]} applies to task.name=rl only, not {config.task.name}; "
                "remove it or set task.name=rl"
            )
        return
    if "memory_length" in changed and rl.policy != "transformer":
        raise ConfigError(
            f"task.rl.memory_length applies to task.rl.policy=transformer, not {rl.policy}; "
            "remove it"
        )
    if "corridor_length" in changed and rl.env != "corridor":
        raise ConfigError(
            f"task.rl.corridor_length applies to task.rl.env=corridor, not {rl.env}; remove it"
        )
    m = config.model
    _check_rl_modern_options(m, rl.policy)
    if m.family != "transformer" or m.attention not in (None, "dot"):
        raise ConfigError(
            "task.name=rl builds its memory policy from transformer blocks with dot attention "
            "over [memory; current]; set model.family=transformer and leave model.attention unset"
        )
    _check_rl_minibatch(rl)
    if config.train.accumulate != 1:
        raise ConfigError(
            "task.name=rl takes one optimizer step per PPO minibatch; set train.accumulate=1 "
            "(raise task.rl.num_envs or num_steps for larger minibatches)"
        )


def _check_rl_minibatch(rl: RLConfig) -> None:
    """A minibatch of whole rollouts divides the environments; one of steps divides the
    rollout's steps and needs a policy without a recurrent state to replay."""
    if rl.minibatch == "steps":
        if rl.policy in ("lstm", "gru"):
            raise ConfigError(
                f"task.rl.minibatch=steps draws single steps, and task.rl.policy={rl.policy} "
                "replays whole rollouts from its state; set task.rl.minibatch=envs"
            )
        if (rl.num_envs * rl.num_steps) % rl.num_minibatches:
            raise ConfigError(
                f"task.rl.num_minibatches={rl.num_minibatches} must divide the rollout's "
                f"{rl.num_envs * rl.num_steps} steps (num_envs x num_steps); choose a divisor"
            )
        return
    if rl.num_envs % rl.num_minibatches:  # a minibatch is whole environments' rollouts
        raise ConfigError(
            f"task.rl.num_minibatches={rl.num_minibatches} must divide task.rl.num_envs="
            f"{rl.num_envs} (a minibatch holds whole environments' rollouts); choose a divisor"
        )


def _check_rl_modern_options(m: ModelConfig, policy: str) -> None:
    """The rl task's policies build their own attention and FFN: the modern baseline's
    options do not reach them, and the LSTM, GRU and MLP policies have no attention heads."""
    if m.attn_output_gate != "none" and policy != "transformer":
        raise ConfigError(
            f"model.attn_output_gate={m.attn_output_gate} gates attention heads, and "
            f"task.rl.policy={policy} has none; remove it"
        )
    chosen = {
        f"attn_output_gate={m.attn_output_gate}": m.attn_output_gate != "none",
        "positional=rope": m.positional == "rope",
        "ffn=swiglu": m.ffn == "swiglu",
        "bias=false": not m.bias,
    }
    for setting, misfit in chosen.items():
        if misfit:
            raise ConfigError(
                f"model.{setting} applies to the language and sequence models; task.name=rl's "
                "policy builds its own attention and FFN without it; remove it"
            )


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
