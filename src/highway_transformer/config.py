"""Typed configuration: dataclasses, YAML/TOML loading, ``key=value`` overrides, validation.

A :class:`Config` holds a :class:`ModelConfig`, a :class:`DataConfig` and a
:class:`TrainConfig`. Presets (``highway presets``) are ready-made Configs for the papers'
experiments; a file or ``key=value`` overrides (``model.gate.kind=sdu``) change any field.
"""

from __future__ import annotations

import json
import math
import sys
import types
import typing
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from .errors import ConfigError, HighwayError, unknown_choice

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

T = TypeVar("T")

POSITIONALS = ("sinusoidal", "none")
OPTIMIZERS = ("sgd", "adam", "adamw")
SCHEDULES = ("constant", "linear", "cosine", "anneal", "step")
ANNEAL_RULES = ("best", "window", "window-strict")
#: Which weights results.json scores: the best validation's, or the last step's.
FINAL_WEIGHTS = ("best", "last")
PRECISIONS = ("fp32", "bf16", "fp16")
DIST_BACKENDS = ("auto", "gloo", "nccl")
FLAGS = ("auto", "true", "false")  # switches whose "auto" follows the family's reference code
SUBWORD_LEVELS = ("bpe", "unigram")  # trained on the training split (data/subword.py)
LEVELS = ("char", "word", "byte", *SUBWORD_LEVELS)


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
    clamp_len: int = -1  # <= 0: no clamping (the reference code clamps only when > 0)
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
    init_proj_std: float | None = None  # adaptive projections N(0, std); None: as weights
    init_norm: str = "ones"  # LayerNorm weight: ones | normal (N(1, init_std), XL code)
    init_embedding: str = ""  # token tables: "" as weights | uniform | normal (bias 0; RT LM code)
    positional: str = "sinusoidal"  # sinusoidal | none (relative attention ignores it)
    attention: str | None = None  # dot | shaw | relative; None: the family's own (models.builders)
    shaw_clip: int = 16
    gate: GateConfig = field(default_factory=GateConfig)
    local_rnn: LocalRNNConfig = field(default_factory=LocalRNNConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    adaptive_cutoffs: tuple[int, ...] = ()  # adaptive softmax / input cut-offs (word level)
    adaptive_div: float = 4.0
    # Reference-code fidelity (docs/fidelity.md). "auto" follows the reference code of the
    # family: Transformer-XL (relative attention) or the HT / RT code otherwise.
    layer_norm: str = "torch"  # torch | rt (RT code: unbiased std, eps 1e-6 on the std)
    final_norm: str = "auto"  # auto | true | false; auto: pre-LN vanilla Transformer only
    embedding_scale: str = "auto"  # auto | true | false: embeddings × √d_model; auto: XL
    dropout_pos: float | None = None  # dropout on XL's R; None: as dropout (XL code)
    dropout_out: float | None = None  # on the last hidden state (LM); None: XL dropout, else 0
    untie_r: bool = False  # XL: u / v per layer instead of one pair shared by all layers

    @property
    def head_dim(self) -> int:
        return self.d_head if self.d_head is not None else self.d_model // self.n_heads

    @property
    def embedding_dropout(self) -> float:
        return self.dropout if self.dropout_emb is None else self.dropout_emb

    @property
    def is_xl(self) -> bool:
        """Transformer-XL: relative attention with segment memory."""
        return self.family == "xl"

    @property
    def scales_embedding(self) -> bool:
        """Multiply embeddings by √d_model (XL code's ``emb_scale``)."""
        return _flag(self.embedding_scale, self.is_xl)

    @property
    def has_final_norm(self) -> bool:
        """A LayerNorm after the last block: the XL and RT code have none, GPT-style pre-LN
        Transformers (and the GTrXL paper) do."""
        return _flag(self.final_norm, self.norm == "pre" and not self.is_xl
                     and self.family != "rtransformer")  # fmt: skip

    @property
    def pos_dropout(self) -> float:
        """Dropout on the relative encoding ``R`` (XL code: ``self.drop(pos_emb)``)."""
        if self.dropout_pos is not None:
            return self.dropout_pos
        return self.dropout if self.is_xl else 0.0

    @property
    def output_dropout(self) -> float:
        """Dropout on the last hidden state before the output layer (XL code)."""
        if self.dropout_out is not None:
            return self.dropout_out
        return self.dropout if self.is_xl else 0.0


def _flag(value: str, auto: bool) -> bool:
    """``auto`` | ``true`` | ``false`` (any case; YAML booleans arrive as True/False)."""
    value = str(value).lower()
    return auto if value == "auto" else value == "true"


@dataclass
class DataConfig:
    """Corpus and LM batching. ``context`` positions of each window are history only.

    The papers' "effective history" (HT A.1): ``seq_len=400, context=80`` trains on windows
    of 400 tokens and counts the loss on the last 320 only.
    """

    corpus: str = "pydoc"  # pydoc | ptb-word | ptb-char(-rt) | enwik8 | text8 | wikitext-103 | file
    path: str | None = None  # a user text file (corpus=file) or a folder holding the corpus
    level: str = "char"  # char | word | byte | bpe | unigram (corpus=file)
    subword_vocab_size: int | None = None  # bpe | unigram: most tokens (None: 1000)
    cache: bool | None = None  # corpus=file: memory-mapped token-id cache (None: on)
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
    schedule: str = "linear"  # constant | linear | cosine | anneal | step
    warmup_steps: int = 0
    min_lr: float = 0.0
    anneal_factor: float = 0.25  # anneal: lr *= factor when validation stalls; step: every lr_step
    lr_step: int = 0  # step: lr *= anneal_factor every lr_step steps (RT image script: 10 epochs)
    anneal_patience: int = 0  # evaluations without improvement before annealing
    # anneal: "best" anneals after anneal_patience + 1 evaluations without a new best;
    # "window" anneals when a validation is no better than (>=) the worst of the previous
    # anneal_window ones, from evaluation anneal_after + 1 on (RT word-PTB script: 5, 5);
    # "window-strict" when it is worse (>) than that (RT char-PTB script: 3, 5).
    anneal_rule: str = "best"  # best | window | window-strict: when annealing happens
    anneal_window: int = 5  # window rules: previous validations compared with
    anneal_after: int = 0  # window rules: validations before annealing may start
    momentum: float = 0.0
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    clip: float = 0.15  # max L2 norm of the gradient; 0 disables
    max_steps: int = 1000
    eval_interval: int = 200
    eval_max_tokens: int | None = None  # cap on valid tokens per periodic evaluation
    log_interval: int = 10
    checkpoint_interval: int = 0  # 0: at each evaluation
    final_weights: str = "best"  # results.json scores best (validation) | last (RT char script)
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
    tensorboard: bool = False  # write TensorBoard events to tensorboard/ (needs tensorboard)
    wandb_project: str = ""  # log to this Weights & Biases project (needs wandb); "": off


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
        if isinstance(node, dict) and part in node and not isinstance(node[part], dict):
            raise ConfigError(
                f"config key {'.'.join(parts[: i + 1])!r} is a single value, not a section; "
                f"write {'.'.join(parts[: i + 1])}=VALUE (override {key!r} goes too deep)"
            )
        if not isinstance(node, dict) or part not in node or not isinstance(node[part], dict):
            raise ConfigError(
                f"unknown config key {'.'.join(parts[: i + 1])!r} in override {key!r}"
            )
        node = node[part]
    if isinstance(node.get(parts[-1]), dict) and not isinstance(value, dict):
        raise ConfigError(
            f"config key {key!r} is a section; set one of its fields, e.g. "
            f"{key}.{next(iter(node[parts[-1]]), 'field')}=VALUE"
        )
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
    text = read_text(path, ConfigError, "config file")
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise ConfigError(f"cannot parse {path}: {first_line(exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of config sections (e.g. model: ...)")
    return data


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (errors are printed on one line)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def read_text(path: str | Path, error: type[HighwayError], what: str) -> str:
    """A UTF-8 text file, or ``error`` naming the file (missing, unreadable, binary)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if b"\0" in data:
        raise error(f"{what} {path} is a binary file, not text; give the right file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"{what} {path} is not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from None


def merge(base: dict[str, Any], update: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Deep-merge ``update`` into a copy of ``base``; keys must already exist in ``base``."""
    out = dict(base)
    for key, value in update.items():
        if key not in out:
            raise unknown_choice(f"config key under {prefix or 'the top level'}:", key, out)
        if isinstance(out[key], dict) and isinstance(value, dict):
            out[key] = merge(out[key], value, f"{prefix}{key}.")
        elif isinstance(out[key], dict):
            raise ConfigError(
                f"config section {prefix}{key} must be a mapping of its fields "
                f"(e.g. {prefix}{key}: {{{next(iter(out[key]), 'field')}: ...}}), got {value!r:.60}"
            )
        elif isinstance(value, dict):
            raise ConfigError(
                f"config key {prefix}{key} is a single value, not a section; "
                f"write {prefix}{key}: VALUE (got a mapping)"
            )
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
    for name, hint in _resolve_hints(type(obj)).items():
        value = getattr(obj, name)
        if not _type_fits(value, hint):
            wanted = getattr(hint, "__name__", str(hint).replace("typing.", ""))
            raise ConfigError(f"{prefix}{name} must be of type {wanted}, got {value!r}")
        if is_dataclass(value):
            check_types(value, f"{prefix}{name}.")


def validate_model(model: ModelConfig) -> ModelConfig:
    """Check a model config on its own (what :func:`validate` checks of ``model``)."""
    validate(Config(model=model))
    return model


def check_ranges(config: Config) -> None:
    """Every field of :data:`FIELD_RANGES` within its range; the error names field and fix."""
    for name, allowed in FIELD_RANGES.items():
        value = _field_value(config, name)
        for item in value if isinstance(value, tuple) else (value,):
            if item is None or allowed.admits(item):
                continue
            fix = f" ({allowed.fix})" if allowed.fix else ""
            raise ConfigError(f"{name} must be {allowed.describe()}, got {item}{fix}")


def validate(config: Config) -> Config:
    """Check every field that can be checked without data; raise ConfigError naming the fix."""
    from .models.builders import check_model_config

    check_types(config)
    check_ranges(config)
    m, d, t = config.model, config.data, config.train
    check_model_config(m)  # names and family-specific settings, read from the registries
    _choice("positional encoding", m.positional, POSITIONALS)
    if m.d_head is None and m.d_model % m.n_heads:
        raise ConfigError(
            f"model.d_model={m.d_model} does not divide into model.n_heads={m.n_heads} heads; "
            "choose n_heads dividing d_model or set model.d_head"
        )
    if not str(m.gate.layers).strip():
        raise ConfigError(
            "model.gate.layers is empty; write all, none, 1-3, 1,2 or 1-6\\FFN (1-based layers)"
        )
    check_fidelity_options(config)
    if list(m.adaptive_cutoffs) != sorted(set(m.adaptive_cutoffs)):
        raise ConfigError("model.adaptive_cutoffs must be strictly increasing")
    _choice("corpus level", d.level, LEVELS)
    check_file_corpus_config(d)
    for ctx_name, len_name in (("context", "seq_len"), ("eval_context", "eval_seq_len")):
        ctx = getattr(d, ctx_name)
        length = getattr(d, len_name) or d.seq_len
        if ctx is not None and not 0 <= ctx < length:
            raise ConfigError(f"data.{ctx_name}={ctx} must be in [0, {len_name}={length})")
    from .tasks import TASKS  # lazy: the tasks import torch and this module

    _choice("task", config.task.name, tuple(TASKS))
    check_task_config(config)
    _choice("optimizer", t.optimizer, OPTIMIZERS)
    _choice("learning-rate schedule", t.schedule, SCHEDULES)
    _choice("anneal rule", t.anneal_rule, ANNEAL_RULES)
    _choice("final weights", t.final_weights, FINAL_WEIGHTS)
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
    _choice("precision", t.precision, PRECISIONS)
    _choice("distributed backend", t.dist_backend, DIST_BACKENDS)
    from .train.strategies import STRATEGIES

    _choice("training strategy (train.strategy)", t.strategy, tuple(STRATEGIES))
    if t.fused_optimizer and t.optimizer == "sgd":
        raise ConfigError(
            "train.fused_optimizer applies to adam and adamw only; set train.optimizer=adamw "
            "or leave fused_optimizer off"
        )
    return config


def check_fidelity_options(config: Config) -> None:
    """``model.dropout_out`` applies to language models only (the model-level reference-code
    options are checked with the model registries, ``models.builders.check_model_config``)."""
    m = config.model
    if m.dropout_out is not None and config.task.name != "lm":
        raise ConfigError(
            f"model.dropout_out applies to language models only; remove it for "
            f"task.name={config.task.name}"
        )


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


def check_task_config(config: Config) -> None:
    """Check the ``task`` section; raise :class:`ConfigError` saying what to change."""
    task = config.task
    from .models.sequence import POOLINGS
    from .nn.scores import normalize_score

    _choice("task.pooling", task.pooling, tuple(POOLINGS))

    normalize_score(task.score)
    if task.name == "adding" and task.length < 2:
        raise ConfigError("the adding problem needs task.length >= 2")
