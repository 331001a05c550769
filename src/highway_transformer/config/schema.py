"""The configuration schema: typed dataclasses, each key declared once.

A :class:`Config` holds a :class:`ModelConfig`, a :class:`DataConfig`, a
:class:`TrainConfig` and a :class:`TaskConfig`. Presets (``highway presets``) are ready-made
Configs for the papers' experiments; a file or ``key=value`` overrides
(``model.gate.kind=sdu``) change any field (:mod:`~highway_transformer.config.loading`).

Each leaf field is declared with :func:`key`: its type (the annotation), its default, its
meaning, its range or choices and where it comes from, in one place. ``highway config`` and
the configuration page (:mod:`~highway_transformer.config.keys`) print them; validation
(:mod:`highway_transformer.validation`) checks every range and choice from them, and keeps the
rules between fields; what a family's ``auto`` settings mean is its record
(:mod:`highway_transformer.models.families`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from . import names
from .loading import from_dict, set_dotted

POSITIONALS = ("sinusoidal", "none")
OPTIMIZERS = ("sgd", "adam", "adamw")
SCHEDULES = ("constant", "linear", "cosine", "anneal", "step")
ANNEAL_RULES = ("best", "window", "window-strict")
#: Which weights results.json scores: the best validation's, or the last step's.
FINAL_WEIGHTS = ("best", "last")
PRECISIONS = ("fp32", "bf16", "fp16")
DIST_BACKENDS = ("auto", "gloo", "nccl")
FLAGS = ("auto", "true", "false")  # switches whose "auto" the family or the device decides
#: torch.compile's modes offered (train.compile_mode): none with CUDA graphs (docs/gpus.md).
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")
SUBWORD_LEVELS = ("bpe", "unigram")  # trained on the training split (data/subword.py)
LEVELS = ("char", "word", "byte", *SUBWORD_LEVELS)


# --------------------------------------------------------------------------- declaring a key


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


AT_LEAST_1 = Range(1)
NON_NEGATIVE = Range(0)
PROBABILITY = Range(0, 1, open_high=True, fix="a dropout of 0.1 drops 10%")


def flag_value(value: object) -> str:
    """A switch's value as its choices spell it (an earlier version's booleans: true / false)."""
    return str(value).lower()


@dataclass(frozen=True)
class Key:
    """What a config field means and allows (its type and default are the field's own).

    ``range``: a numeric field's bounds (each item of a tuple's); ``choices``: the names it
    may take (each item of a tuple's), compared after ``normalize``, an unknown one named
    ``what`` in the error (default ``KEY value``); ``check``: a form neither says (device
    names). ``None`` passes every check: it means "as another field".
    """

    meaning: str
    range: Range | None = None
    choices: tuple[str, ...] = ()
    what: str = ""
    normalize: Callable[[Any], Any] | None = None
    check: Callable[[Any], None] | None = None
    source: str = ""


#: The field metadata entry holding a :class:`Key`.
KEY = "key"


def key(default: Any, meaning: str, **spec: Any) -> Any:
    """A config field: ``d_model: int = key(512, "width of the residual stream",
    range=AT_LEAST_1)``; ``spec`` is the rest of :class:`Key`."""
    return field(default=default, metadata={KEY: Key(meaning, **spec)})


def flag(default: str, meaning: str, **spec: Any) -> Any:
    """A switch: ``auto``, ``true`` or ``false`` (an earlier version's booleans read the same)."""
    return key(default, meaning, choices=FLAGS, normalize=flag_value, **spec)


# --------------------------------------------------------------------------- the sections


@dataclass
class GateConfig:
    """Which gate joins which sublayers to the stream (HT §3, §4; Tables 5-6).

    ``layers`` is written as the paper writes it, 1-based: ``all``, ``none``, ``1-3``,
    ``1,2``; a ``\\FFN`` suffix (``1-6\\FFN``) leaves the FFN sublayers ungated.
    """

    kind: str = key(
        "none",
        "the gate joining each sublayer to the stream (gated: gated MHDPA); see "
        "nn.connections.COMBINERS",
        choices=names.GATE_NAMES,
        what="gate",
        source="HT §3-4; GTrXL (Parisotto et al. 2020)",
    )
    activation: str = key(
        "sigmoid",
        "the sdu gate's T (the other gates': sigmoid)",
        choices=names.ACTIVATION_NAMES,
        what="gate activation",
        source="HT eq. 26",
    )
    layers: str = key(
        "all",
        "gated layers, 1-based as the paper writes them: all, none, 1-3, 1-6\\FFN",
        source="HT Tables 5-6",
    )
    sublayers: tuple[str, ...] = key(
        ("attn", "ffn"),
        "sublayer kinds that may be gated",
        choices=names.GATEABLE_NAMES,
        what="gated sublayer kind",
    )
    bias: float | None = key(
        None,
        "initial gate bias (HT gates: b1, default 0; GTrXL: b_g, default 2)",
        range=Range(-100, 100, fix="gate biases are small, e.g. 0 or 2"),
    )


@dataclass
class LocalRNNConfig:
    """R-Transformer LocalRNN sublayers (RT §3.1)."""

    cell: str = key(
        "gru", "the LocalRNN's recurrent cell", choices=names.CELL_NAMES, what="local RNN cell"
    )
    window: int = key(
        7, "LocalRNN window size k (positions each local RNN reads)", range=AT_LEAST_1
    )
    per_block: int = key(
        1, "LocalRNN sublayers per block (RT code's `n`)", range=AT_LEAST_1, source="RT code"
    )
    linear_relu: bool = key(
        False, "the RT code's Linear+ReLU after each LocalRNN", source="RT code"
    )


_XL = "Dai et al. 2019 (Transformer-XL)"
_NO_CLAMP = Range(-1, fix="0 or -1 means no clamping")


@dataclass
class MemoryConfig:
    """Transformer-XL segment memory and evaluation knobs (Dai et al.; HT A.3)."""

    mem_len: int = key(
        0,
        "Transformer-XL memory length in training (0: no memory)",
        range=NON_NEGATIVE,
        source=_XL,
    )
    clamp_len: int = key(
        -1,
        "largest relative distance used; <= 0: no clamping (the reference code clamps only "
        "when > 0)",
        range=_NO_CLAMP,
        source="Transformer-XL code",
    )
    same_length: bool = key(
        False, "every query attends to the same number of keys", source="Transformer-XL code"
    )
    eval_mem_len: int | None = key(
        None, "memory length in evaluation; None: as mem_len", range=NON_NEGATIVE, source="HT A.3"
    )
    eval_clamp_len: int | None = key(
        None, "clamp_len for evaluation (None: as clamp_len)", range=_NO_CLAMP, source="HT A.3"
    )
    eval_same_length: bool | None = key(
        None, "same_length for evaluation (None: as same_length)", source="HT A.3"
    )


@dataclass
class ModelConfig:
    family: str = key(
        "transformer",
        "the block layout and its defaults (its record in models.families)",
        choices=names.FAMILY_NAMES,
        what="model family",
    )
    vocab_size: int = key(
        0,
        "symbols in the vocabulary; 0: taken from the data's vocabulary",
        range=Range(0, fix="0 takes it from the data"),
    )
    d_model: int = key(512, "width of the residual stream", range=AT_LEAST_1)
    n_layers: int = key(3, "number of blocks", range=AT_LEAST_1)
    n_heads: int = key(8, "attention heads", range=AT_LEAST_1)
    d_head: int | None = key(
        None,
        "width per attention head; None: d_model // n_heads",
        range=Range(1, fix="leave it unset (null) for d_model // n_heads"),
    )
    d_inner: int = key(2048, "hidden width of the feed-forward sublayer", range=AT_LEAST_1)
    dropout: float = key(0.15, "on sublayer outputs (and inside the FFN)", range=PROBABILITY)
    dropout_emb: float | None = key(
        None, "dropout on the embeddings; None: same as dropout", range=PROBABILITY
    )
    dropout_attn: float = key(0.0, "on attention weights", range=PROBABILITY)
    norm: str = key(
        "post",
        "where LayerNorm sits around each sublayer",
        choices=names.NORM_POSITIONS,
        what="norm position",
    )
    tie_weights: bool = key(
        True,
        "share the input embedding and the output layer weights (adaptive: each cluster's "
        "table and the tail projections, as the Transformer-XL reference)",
    )
    init: str = key(
        "uniform",
        "weight initialisation (torch: PyTorch defaults)",
        choices=names.SCHEMES,
        what="initialisation",
    )
    init_range: float = key(0.1, "uniform: U(-a, a)", range=Range(0, open_low=True, fix="e.g. 0.1"))
    init_std: float = key(0.02, "normal: N(0, std)", range=Range(0, open_low=True, fix="e.g. 0.02"))
    init_proj_std: float | None = key(
        None,
        "adaptive projections N(0, std); None: as weights",
        range=Range(0, open_low=True, fix="e.g. 0.01, or unset it"),
    )
    init_norm: str = key(
        "ones",
        "LayerNorm weight; normal: N(1, init_std), as the XL code",
        choices=names.NORM_INITS,
        what="LayerNorm initialisation",
    )
    init_embedding: str = key(
        "",
        'token tables; "": as weights (bias 0; RT LM code)',
        choices=names.EMBEDDING_SCHEMES,
        what="token table initialisation",
    )
    positional: str = key(
        "sinusoidal",
        "absolute positions (relative attention ignores it)",
        choices=POSITIONALS,
        what="positional encoding",
    )
    attention: str | None = key(
        None,
        "None: the family's own (models.families)",
        choices=names.ATTENTION_NAMES,
        what="attention",
        source="Shaw et al. 2018; Dai et al. 2019",
    )
    shaw_clip: int = key(
        16,
        "Shaw attention: largest relative distance with its own embedding",
        range=AT_LEAST_1,
        source="Shaw et al. 2018",
    )
    attention_kernel: str = key(
        "auto",
        "XL attention; fused: Triton; auto: core till checked",
        choices=names.ATTENTION_KERNELS,
        what="attention kernel (model.attention_kernel)",
    )
    gate: GateConfig = field(default_factory=GateConfig)
    local_rnn: LocalRNNConfig = field(default_factory=LocalRNNConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    adaptive_cutoffs: tuple[int, ...] = key(
        (),
        "adaptive softmax / input cut-offs (word level)",
        range=AT_LEAST_1,
        source="Grave et al. 2017; Baevski & Auli 2019",
    )
    adaptive_div: float = key(
        4.0,
        "adaptive input/softmax: width divisor per cluster (1: one full table, no projections)",
        range=Range(1, fix="e.g. 4"),
    )
    # Reference-code fidelity (docs/fidelity.md). "auto" follows the reference code of the
    # family (its record in models.families): Transformer-XL or the HT / RT code.
    layer_norm: str = key(
        "torch",
        "rt: the RT code's (unbiased std, eps 1e-6 on the std)",
        choices=names.NORM_NAMES,
        what="layer norm (model.layer_norm)",
        source="RT code",
    )
    final_norm: str = flag("auto", "auto: pre-LN vanilla Transformer only")
    embedding_scale: str = flag("auto", "embeddings × √d_model; auto: XL", source="XL code")
    dropout_pos: float | None = key(
        None, "dropout on XL's R; None: as dropout (XL code)", range=PROBABILITY, source="XL code"
    )
    dropout_out: float | None = key(
        None,
        "on the last hidden state (LM); None: XL dropout, else 0",
        range=PROBABILITY,
        source="XL code",
    )
    untie_r: bool = key(
        False, "XL: u / v per layer instead of one pair shared by all layers", source="XL code"
    )

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

    corpus: str = key(
        "pydoc",
        "the text modelled (file: data.path)",
        choices=names.CORPUS_NAMES,
        what="corpus (data.corpus)",
    )
    path: str | None = key(None, "a user text file (corpus=file) or a folder holding the corpus")
    level: str = key(
        "char",
        "symbols of corpus=file (bpe, unigram: a tokenizer trained on it)",
        choices=LEVELS,
        what="corpus level",
    )
    subword_vocab_size: int | None = key(
        None,
        "bpe | unigram: most tokens (None: 1000)",
        range=Range(256, fix="the 256 bytes are tokens; e.g. 1000"),
    )
    cache: bool | None = key(None, "corpus=file: memory-mapped token-id cache (None: on)")
    vocab_splits: str = key(
        "auto",
        "splits whose symbols the vocabulary counts (enwik8-xl, text8); auto: all, as the XL code",
        choices=names.VOCAB_SPLITS,
        what="vocabulary splits (data.vocab_splits)",
    )
    batch_size: int = key(16, "training rows per step", range=AT_LEAST_1)
    seq_len: int = key(400, "tokens per training window", range=AT_LEAST_1, source="HT A.1")
    context: int = key(
        0,
        "leading positions of each window that are history only (no loss)",
        range=NON_NEGATIVE,
        source="HT A.1",
    )
    eval_batch_size: int = key(16, "rows in evaluation", range=AT_LEAST_1)
    eval_seq_len: int | None = key(
        None,
        "tokens per evaluation window; None: as seq_len",
        range=Range(1, fix="leave it unset (null) to use data.seq_len"),
    )
    eval_context: int | None = key(
        None,
        "history-only positions of each evaluation window; None: as context",
        range=Range(0, fix="leave it unset (null) to use data.context"),
    )
    eval_layout: str = key(
        "every",
        "evaluation rows: every scores each target once; reference (Transformer-XL's "
        "LMOrderedIterator) drops the remainder of len // eval_batch_size and each row's first "
        "target (<= 2B - 2), as the XL code",
        choices=names.EVAL_LAYOUT_NAMES,
        what="evaluation layout (data.eval_layout)",
        source="Transformer-XL code",
    )
    max_train_tokens: int | None = key(
        None,
        "first tokens of train (music: steps, pixels: images)",
        range=Range(2, fix="leave it unset (null) to use the whole stream"),
    )
    max_eval_tokens: int | None = key(
        None,
        "first tokens of valid/test (whole pieces or images)",
        range=Range(2, fix="leave it unset (null) to use the whole splits"),
    )


@dataclass
class TrainConfig:
    optimizer: str = key(
        "sgd", "the optimiser (adamw: decoupled weight decay)", choices=OPTIMIZERS, what="optimizer"
    )
    lr: float = key(
        2.0,
        "peak learning rate",
        range=Range(0, open_low=True, fix="e.g. 2.0 for SGD, 2.5e-4 for Adam"),
    )
    schedule: str = key(
        "linear",
        "the learning rate after warm-up",
        choices=SCHEDULES,
        what="learning-rate schedule",
    )
    warmup_steps: int = key(
        0, "linear warm-up steps before the schedule", range=Range(0, fix="0 disables warm-up")
    )
    min_lr: float = key(0.0, "floor of the linear / cosine schedules", range=NON_NEGATIVE)
    anneal_factor: float = key(
        0.25,
        "anneal: lr *= factor when validation stalls; step: every lr_step",
        range=Range(0, 1, open_low=True, fix="e.g. 0.25"),
    )
    lr_step: int = key(
        0,
        "step: lr *= anneal_factor every lr_step steps (RT image script: 10 epochs)",
        range=NON_NEGATIVE,
        source="RT image script",
    )
    anneal_patience: int = key(
        0, "evaluations without improvement before annealing", range=NON_NEGATIVE
    )
    # anneal: "best" anneals after anneal_patience + 1 evaluations without a new best;
    # "window" anneals when a validation is no better than (>=) the worst of the previous
    # anneal_window ones, from evaluation anneal_after + 1 on (RT word-PTB script: 5, 5);
    # "window-strict" when it is worse (>) than that (RT char-PTB script: 3, 5).
    anneal_rule: str = key(
        "best",
        "anneal: when annealing happens",
        choices=ANNEAL_RULES,
        what="anneal rule",
        source="RT PTB scripts",
    )
    anneal_window: int = key(
        5, "window rules: previous validations compared with", range=AT_LEAST_1
    )
    anneal_after: int = key(
        0, "window rules: validations before annealing may start", range=NON_NEGATIVE
    )
    momentum: float = key(0.0, "SGD momentum", range=Range(0, 1, open_high=True))
    weight_decay: float = key(0.0, "L2 penalty (decoupled for adamw)", range=NON_NEGATIVE)
    betas: tuple[float, float] = key(
        (0.9, 0.999), "Adam betas", range=Range(0, 1, open_high=True, fix="e.g. [0.9, 0.999]")
    )
    clip: float = key(
        0.15,
        "max L2 norm of the gradient; 0 disables",
        range=Range(0, fix="0 disables clipping"),
    )
    max_steps: int = key(1000, "training steps", range=AT_LEAST_1)
    eval_interval: int = key(
        200, "steps between validation evaluations (and checkpoints)", range=AT_LEAST_1
    )
    eval_max_tokens: int | None = key(
        None,
        "cap on valid tokens per periodic evaluation",
        range=Range(1, fix="leave it unset (null) for the whole split"),
    )
    log_interval: int = key(
        10, "steps between training log lines", range=Range(1, fix="log every N steps, e.g. 10")
    )
    checkpoint_interval: int = key(
        0,
        "steps between checkpoints; 0: at each evaluation",
        range=Range(0, fix="0 checkpoints at each evaluation"),
    )
    keep_checkpoints: int = key(
        1,
        "checkpoints kept: checkpoint/ (the newest, what --resume reads) and the K - 1 before "
        "it in checkpoints/step-N/, the oldest dropped at each save; 1: checkpoint/ alone",
        range=Range(1, fix="1 keeps checkpoint/ alone, the newest"),
    )
    async_checkpoint: bool = key(False, "write checkpoints from a copy in a thread, training on")
    final_weights: str = key(
        "best",
        "what results.json scores: the best validation's weights or the last (RT char script)",
        choices=FINAL_WEIGHTS,
        what="final weights",
    )
    seed: int = key(1111, "seed of the weights, data order and dropout", range=Range(0, 2**63 - 1))
    precision: str = key("fp32", "autocast precision", choices=PRECISIONS, what="precision")
    device: str = key("auto", "auto | cpu | cuda | cuda:N | mps", check=names.check_device_name)
    compile: str | bool = flag(
        "auto",
        "torch.compile the training step (on a CPU it has not been shown to pay; an earlier "
        "version's true / false means the same); auto: on CUDA only",
    )
    compile_mode: str = key(
        "default",
        "torch.compile's mode (when compiled); CUDA graphs (reduce-overhead) are not offered",
        choices=COMPILE_MODES,
        what="torch.compile mode (train.compile_mode)",
    )
    threads: int = key(
        0,
        "torch CPU threads; 0: leave as is",
        range=Range(0, fix="0 leaves the thread count as it is"),
    )
    accumulate: int = key(
        1,
        "micro-batches of data.batch_size rows per optimizer step",
        range=Range(1, fix="1 disables gradient accumulation"),
    )
    strategy: str = key(
        "ddp",
        "several processes: ddp replicates the model, fsdp shards it",
        choices=names.STRATEGY_NAMES,
        what="training strategy (train.strategy)",
    )
    dist_backend: str = key(
        "auto",
        "several processes: auto (gloo on CPU, nccl on CUDA)",
        choices=DIST_BACKENDS,
        what="distributed backend",
    )
    dist_timeout: float = key(
        600.0,
        "seconds a collective waits for a silent rank before failing",
        range=Range(0, open_low=True, fix="seconds, e.g. 600"),
    )
    fused_optimizer: bool = key(False, "fused Adam/AdamW kernels (CUDA only)")
    pin_memory: bool = key(False, "page-locked host batches, non-blocking copies (CUDA only)")
    tensorboard: bool = key(False, "write TensorBoard events to tensorboard/ (needs tensorboard)")
    wandb_project: str = key("", 'log to this Weights & Biases project (needs wandb); "": off')


@dataclass
class TaskConfig:
    """The task beyond language modelling (RT §4: pixel MNIST, polyphonic music; TCN tasks)."""

    name: str = key(
        "lm",
        "what is learned (RT §4; the TCN paper's synthetic tasks)",
        choices=names.TASK_NAMES,
        what="task",
    )
    dataset: str = key(
        "", "music: nottingham | jsb | piano-midi | musedata; pixels: digits | mnist"
    )
    permute: bool = key(False, "pixels: one fixed random permutation of the pixel order")
    length: int = key(
        100,
        "copy: delay; adding: sequence length; seq2seq: longest toy source",
        range=AT_LEAST_1,
    )
    max_len: int = key(
        0,
        "longest accepted input sequence (0: no limit)",
        range=Range(0, fix="0 means no limit"),
    )
    pooling: str = key(
        "last", "pixels: the state classified", choices=names.POOLING_NAMES, what="task.pooling"
    )
    score: str = key(
        "scaled_dot",
        "seq2seq attention score function (also: scaled-dot, cosine, concat)",
        choices=names.SCORES,
        normalize=names.score_key,
        what="attention score function",
    )
    beam_size: int = key(1, "seq2seq decoding", range=AT_LEAST_1)


@dataclass
class Config:
    name: str = key("custom", "run name (default run folder runs/NAME)")
    source: str = key("", "where the hyper-parameters come from (paper, table, code)")
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
        for dotted, value in overrides.items():
            set_dotted(data, dotted, value)
        return from_dict(Config, data)
