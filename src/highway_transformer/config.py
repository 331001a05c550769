"""Typed configuration: dataclasses, YAML/TOML loading, ``key=value`` overrides, validation.

A :class:`Config` holds a :class:`ModelConfig`, a :class:`DataConfig` and a
:class:`TrainConfig`. Presets (``highway presets``) are ready-made Configs for the papers'
experiments; a file or ``key=value`` overrides (``model.gate.kind=sdu``) change any field.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
import typing
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from .errors import ConfigError, unknown_choice

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

T = TypeVar("T")

FAMILIES = ("transformer", "rtransformer", "xl")
ATTENTIONS = ("dot", "relative", "shaw")
POSITIONALS = ("sinusoidal", "none")
INITS = ("uniform", "normal", "torch")
OPTIMIZERS = ("sgd", "adam", "adamw")
SCHEDULES = ("constant", "linear", "cosine", "anneal")
PRECISIONS = ("fp32", "bf16", "fp16")
DIST_BACKENDS = ("auto", "gloo", "nccl")
LEVELS = ("char", "word", "byte")


@dataclass
class GateConfig:
    """Which gate joins which sublayers to the stream (HT §3, §4; Tables 5-6).

    ``layers`` is written as the paper writes it, 1-based: ``all``, ``none``, ``1-3``,
    ``1,2``; a ``\\FFN`` suffix (``1-6\\FFN``) leaves the FFN sublayers ungated.
    """

    kind: str = "none"  # none | sdu | highway | gated (gated MHDPA); see nn.connections.COMBINERS
    activation: str = "sigmoid"  # sdu: sigmoid | tanh
    layers: str = "all"
    sublayers: tuple[str, ...] = ("attn", "ffn")  # sublayer kinds that may be gated
    bias: float | None = None  # initial gate bias (HT gates: b1, default 0; GTrXL: b_g, default 2)


@dataclass
class LocalRNNConfig:
    """R-Transformer LocalRNN sublayers (RT §3.1)."""

    cell: str = "gru"  # rnn | gru | lstm
    window: int = 7
    per_block: int = 1  # LocalRNN sublayers per block (RT code's `n`)
    linear_relu: bool = False  # the RT code's Linear+ReLU after each LocalRNN


@dataclass
class MemoryConfig:
    """Transformer-XL segment memory and evaluation knobs (Dai et al.; HT A.3)."""

    mem_len: int = 0
    clamp_len: int = -1  # -1: no clamping
    same_length: bool = False
    eval_mem_len: int | None = None  # None: as mem_len
    eval_clamp_len: int | None = None
    eval_same_length: bool | None = None


@dataclass
class ModelConfig:
    family: str = "transformer"
    vocab_size: int = 0  # 0: taken from the data's vocabulary
    d_model: int = 512
    n_layers: int = 3
    n_heads: int = 8
    d_head: int | None = None  # None: d_model // n_heads
    d_inner: int = 2048
    dropout: float = 0.15  # on sublayer outputs (and inside the FFN)
    dropout_emb: float | None = None  # None: same as dropout
    dropout_attn: float = 0.0  # on attention weights
    norm: str = "post"  # post | pre
    tie_weights: bool = True
    init: str = "uniform"  # uniform | normal | torch (PyTorch defaults)
    init_range: float = 0.1  # uniform: U(-a, a)
    init_std: float = 0.02  # normal: N(0, std)
    positional: str = "sinusoidal"  # sinusoidal | none (relative attention ignores it)
    attention: str = "dot"  # dot | relative (Transformer-XL) | shaw
    shaw_clip: int = 16
    gate: GateConfig = field(default_factory=GateConfig)
    local_rnn: LocalRNNConfig = field(default_factory=LocalRNNConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    adaptive_cutoffs: tuple[int, ...] = ()  # adaptive softmax / input cut-offs (word level)
    adaptive_div: float = 4.0

    @property
    def head_dim(self) -> int:
        return self.d_head if self.d_head is not None else self.d_model // self.n_heads

    @property
    def embedding_dropout(self) -> float:
        return self.dropout if self.dropout_emb is None else self.dropout_emb


@dataclass
class DataConfig:
    """Corpus and LM batching. ``context`` positions of each window are history only.

    The papers' "effective history" (HT A.1): ``seq_len=400, context=80`` trains on windows
    of 400 tokens and counts the loss on the last 320 only.
    """

    corpus: str = "pydoc"  # pydoc | ptb-word | ptb-char | enwik8 | text8 | wikitext-103 | file
    path: str | None = None  # a user text file (corpus=file) or a folder holding the corpus
    level: str = "char"  # char | word | byte (corpus=file)
    batch_size: int = 16
    seq_len: int = 400
    context: int = 0
    eval_batch_size: int = 16
    eval_seq_len: int | None = None  # None: as seq_len
    eval_context: int | None = None  # None: as context
    max_train_tokens: int | None = None  # truncate the training stream (scaled-down runs)
    max_eval_tokens: int | None = None  # truncate valid/test (scaled-down runs)


@dataclass
class TrainConfig:
    optimizer: str = "sgd"
    lr: float = 2.0
    schedule: str = "linear"  # constant | linear | cosine | anneal
    warmup_steps: int = 0
    min_lr: float = 0.0
    anneal_factor: float = 0.25  # anneal: lr *= factor when validation stalls
    anneal_patience: int = 0  # evaluations without improvement before annealing
    momentum: float = 0.0
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    clip: float = 0.15  # max L2 norm of the gradient; 0 disables
    max_steps: int = 1000
    eval_interval: int = 200
    eval_max_tokens: int | None = None  # cap on valid tokens per periodic evaluation
    log_interval: int = 10
    checkpoint_interval: int = 0  # 0: at each evaluation
    seed: int = 1111
    precision: str = "fp32"  # fp32 | bf16 | fp16 (autocast)
    device: str = "auto"  # auto | cpu | cuda | cuda:N | mps
    compile: bool = False  # torch.compile the model
    threads: int = 0  # torch CPU threads; 0: leave as is
    accumulate: int = 1  # micro-batches of data.batch_size rows per optimizer step
    strategy: str = "ddp"  # several processes: ddp (replicated) | fsdp (sharded model)
    dist_backend: str = "auto"  # several processes: auto (gloo on CPU, nccl on CUDA) | gloo | nccl
    dist_timeout: float = 600.0  # seconds a collective waits for a silent rank before failing
    fused_optimizer: bool = False  # fused Adam/AdamW kernels (CUDA only)
    pin_memory: bool = False  # page-locked host batches, non-blocking copies (CUDA only)
    wandb_project: str = ""  # log to this Weights & Biases project (needs wandb); "": off


TASKS = ("lm", "music", "pixels", "copy", "adding", "seq2seq")


@dataclass
class TaskConfig:
    """The task beyond language modelling (RT §4: pixel MNIST, polyphonic music; TCN tasks)."""

    name: str = "lm"  # lm | music | pixels | copy | adding | seq2seq
    dataset: str = ""  # music: nottingham | jsb | piano-midi | musedata; pixels: digits | mnist
    permute: bool = False  # pixels: one fixed random permutation of the pixel order
    length: int = 100  # copy: delay; adding: sequence length; seq2seq: longest toy source
    max_len: int = 0  # longest accepted input sequence (0: no limit)
    pooling: str = "last"  # pixels: last | mean
    score: str = "scaled_dot"  # seq2seq attention score function
    beam_size: int = 1  # seq2seq decoding


@dataclass
class Config:
    name: str = "custom"
    source: str = ""  # where the hyper-parameters come from (paper, table, code)
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    task: TaskConfig = field(default_factory=TaskConfig)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def replace(self, **overrides: Any) -> Config:
        """A copy with dotted-key overrides applied: ``cfg.replace(**{"model.d_model": 64})``."""
        data = self.to_dict()
        for key, value in overrides.items():
            set_dotted(data, key, value)
        return from_dict(Config, data)

    def validate(self) -> Config:
        validate(self)
        return self


# --------------------------------------------------------------------------- loading


def _resolve_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _coerce(value: Any, hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        non_none = [a for a in args if a is not type(None)]
        return _coerce(value, non_none[0], where)
    if is_dataclass(hint):
        if not isinstance(value, dict):
            raise ConfigError(f"{where} must be a mapping, got {value!r}")
        return from_dict(hint, value, prefix=where + ".")
    if origin is tuple:
        if isinstance(value, str):
            value = [v for v in value.split(",") if v.strip()] if value.strip() else []
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where} must be a list, got {value!r}")
        item = args[0] if args else Any
        if len(args) == 2 and args[1] is Ellipsis or len(args) == 1:
            return tuple(_coerce(v, item, where) for v in value)
        if len(value) != len(args):
            raise ConfigError(f"{where} must have {len(args)} items, got {value!r}")
        return tuple(_coerce(v, a, where) for v, a in zip(value, args, strict=True))
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise ConfigError(f"{where} must be true or false, got {value!r}")
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int | str | float):
            raise ConfigError(f"{where} must be an integer, got {value!r}")
        try:
            as_float = float(value)
        except ValueError:
            raise ConfigError(f"{where} must be an integer, got {value!r}") from None
        if not as_float.is_integer():
            raise ConfigError(f"{where} must be an integer, got {value!r}")
        return int(as_float)
    if hint is float:
        if isinstance(value, bool):
            raise ConfigError(f"{where} must be a number, got {value!r}")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where} must be a number, got {value!r}") from None
    if hint is str:
        if not isinstance(value, str):
            return str(value)
        return value
    return value


def from_dict(cls: type[T], data: dict[str, Any], prefix: str = "") -> T:
    """Build dataclass ``cls`` from a (nested) mapping; unknown keys are errors."""
    hints = _resolve_hints(cls)
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = set(data) - names
    if unknown:
        key = sorted(unknown)[0]
        raise unknown_choice(f"config key in {prefix.rstrip('.') or 'config'}:", key, names)
    kwargs = {name: _coerce(value, hints[name], prefix + name) for name, value in data.items()}
    return cls(**kwargs)


def set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    """Set ``data["a"]["b"] = value`` for ``key == "a.b"``, creating nothing new."""
    parts = key.split(".")
    node = data
    for i, part in enumerate(parts[:-1]):
        if not isinstance(node, dict) or part not in node or not isinstance(node[part], dict):
            raise ConfigError(
                f"unknown config key {'.'.join(parts[: i + 1])!r} in override {key!r}"
            )
        node = node[part]
    if parts[-1] not in node:
        raise unknown_choice(
            f"config key under {'.'.join(parts[:-1]) or 'the top level'}:",
            parts[-1],
            [k for k in node],
        )
    node[parts[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """``"train.lr=0.5"`` -> ``("train.lr", 0.5)``; values are read as YAML scalars."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like key=value (e.g. train.lr=0.5)")
    key, raw = text.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.strip(), value


def load_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML (.yaml/.yml) or TOML (.toml) config file into a mapping."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot parse {path}: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of config sections")
    return data


def merge(base: dict[str, Any], update: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Deep-merge ``update`` into a copy of ``base``; keys must already exist in ``base``."""
    out = dict(base)
    for key, value in update.items():
        if key not in out:
            raise unknown_choice(f"config key under {prefix or 'the top level'}:", key, out)
        if isinstance(out[key], dict) and isinstance(value, dict):
            out[key] = merge(out[key], value, f"{prefix}{key}.")
        else:
            out[key] = value
    return out


def build_config(
    base: Config, file: str | Path | None = None, overrides: list[str] | None = None
) -> Config:
    """``base`` updated by a config file and then by ``key=value`` overrides, validated."""
    data = base.to_dict()
    if file is not None:
        data = merge(data, load_file(file))
    for text in overrides or []:
        key, value = parse_override(text)
        set_dotted(data, key, value)
    return validate(from_dict(Config, data))


def save_config(config: Config, path: str | Path) -> None:
    """Write a config as YAML (or JSON for a .json path)."""
    path = Path(path)
    if path.suffix == ".json":
        path.write_text(config.to_json(), encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(_plain(config.to_dict()), sort_keys=False), encoding="utf-8")


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    return obj


# --------------------------------------------------------------------------- validation


def _choice(what: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise unknown_choice(what, value, choices)


def _positive(where: str, value: float, allow_zero: bool = False) -> None:
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{where} must be {bound}, got {value}")


def validate(config: Config) -> Config:
    """Check every field that can be checked without data; raise ConfigError naming the fix."""
    from .nn.connections import COMBINERS
    from .nn.gating import parse_layer_spec

    m, d, t = config.model, config.data, config.train
    _choice("model family", m.family, FAMILIES)
    _choice("attention", m.attention, ATTENTIONS)
    _choice("positional encoding", m.positional, POSITIONALS)
    _choice("initialisation", m.init, INITS)
    _choice("norm position", m.norm, ("post", "pre"))
    if m.gate.kind not in COMBINERS:
        raise unknown_choice("gate", m.gate.kind, COMBINERS)
    _choice("gate activation", m.gate.activation, ("sigmoid", "tanh"))
    if m.gate.kind.startswith("gtrxl") and m.norm != "pre":
        raise ConfigError(
            f"the {m.gate.kind} gate needs the identity-map reordering: set model.norm=pre "
            "(GTrXL gates work with pre-LN only; SDU/highway/gated work with both)"
        )
    for sub in m.gate.sublayers:
        _choice("gated sublayer kind", sub, ("attn", "ffn", "rnn"))
    for name in ("d_model", "n_layers", "n_heads", "d_inner"):
        _positive(f"model.{name}", getattr(m, name))
    if m.d_head is None and m.d_model % m.n_heads:
        raise ConfigError(
            f"model.d_model={m.d_model} does not divide into model.n_heads={m.n_heads} heads; "
            "choose n_heads dividing d_model or set model.d_head"
        )
    for name in ("dropout", "dropout_attn"):
        value = getattr(m, name)
        if not 0.0 <= value < 1.0:
            raise ConfigError(f"model.{name} must be in [0, 1), got {value}")
    parse_layer_spec(m.gate.layers, m.n_layers)
    _choice("local RNN cell", m.local_rnn.cell, ("rnn", "gru", "lstm"))
    if m.local_rnn.window < 1:
        raise ConfigError(f"model.local_rnn.window must be >= 1, got {m.local_rnn.window}")
    for name in ("clamp_len", "eval_clamp_len"):
        value = getattr(m.memory, name)
        if value is not None and value < -1:
            raise ConfigError(f"model.memory.{name} must be >= 0 (or -1: no clamping), got {value}")
    if m.memory.eval_mem_len is not None and m.memory.eval_mem_len < 0:
        raise ConfigError(f"model.memory.eval_mem_len must be >= 0, got {m.memory.eval_mem_len}")
    if m.memory.mem_len < 0:
        raise ConfigError(f"model.memory.mem_len must be >= 0, got {m.memory.mem_len}")
    if m.attention == "shaw" and m.shaw_clip < 1:
        raise ConfigError(f"model.shaw_clip must be >= 1, got {m.shaw_clip}")
    if list(m.adaptive_cutoffs) != sorted(set(m.adaptive_cutoffs)):
        raise ConfigError("model.adaptive_cutoffs must be strictly increasing")
    _choice("corpus level", d.level, LEVELS)
    for name in ("batch_size", "seq_len", "eval_batch_size"):
        _positive(f"data.{name}", getattr(d, name))
    for ctx_name, len_name in (("context", "seq_len"), ("eval_context", "eval_seq_len")):
        ctx = getattr(d, ctx_name)
        length = getattr(d, len_name) or d.seq_len
        if ctx is not None and not 0 <= ctx < length:
            raise ConfigError(f"data.{ctx_name}={ctx} must be in [0, {len_name}={length})")
    _choice("task", config.task.name, TASKS)
    check_task_config(config)
    _choice("optimizer", t.optimizer, OPTIMIZERS)
    _choice("learning-rate schedule", t.schedule, SCHEDULES)
    _choice("precision", t.precision, PRECISIONS)
    _positive("train.lr", t.lr)
    _positive("train.max_steps", t.max_steps)
    _positive("train.eval_interval", t.eval_interval)
    _positive("train.clip", t.clip, allow_zero=True)
    _positive("train.accumulate", t.accumulate)
    _choice("distributed backend", t.dist_backend, DIST_BACKENDS)
    from .train.strategies import STRATEGIES

    _choice("training strategy (train.strategy)", t.strategy, tuple(STRATEGIES))
    _positive("train.dist_timeout", t.dist_timeout)
    if t.fused_optimizer and t.optimizer == "sgd":
        raise ConfigError(
            "train.fused_optimizer applies to adam and adamw only; set train.optimizer=adamw "
            "or leave fused_optimizer off"
        )
    return config


def check_task_config(config: Config) -> None:
    """Check the ``task`` section; raise :class:`ConfigError` saying what to change."""
    task = config.task
    if task.pooling not in ("last", "mean"):
        raise ConfigError(f"unknown task.pooling {task.pooling!r}; choose last or mean")
    from .nn.scores import normalize_score

    normalize_score(task.score)
    if task.beam_size < 1:
        raise ConfigError(f"task.beam_size must be >= 1, got {task.beam_size}")
    if task.max_len < 0:
        raise ConfigError(f"task.max_len must be >= 0 (0 = no limit), got {task.max_len}")
    if task.name in ("copy", "adding", "seq2seq") and task.length < 1:
        raise ConfigError(f"task.length must be >= 1 for the {task.name} task, got {task.length}")
    if task.name == "adding" and task.length < 2:
        raise ConfigError("the adding problem needs task.length >= 2")


def dataclass_fields(obj: Any) -> list[dataclasses.Field[Any]]:
    return list(fields(obj))
