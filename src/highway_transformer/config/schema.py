"""The configuration schema: typed dataclasses and the choices their fields name.

A :class:`Config` holds a :class:`ModelConfig`, a :class:`DataConfig`, a
:class:`TrainConfig` and a :class:`TaskConfig`. Presets (``highway presets``) are ready-made
Configs for the papers' experiments; a file or ``key=value`` overrides
(``model.gate.kind=sdu``) change any field (:mod:`~highway_transformer.config.loading`). What a
valid config is (ranges, names, which settings apply together) is decided in one place,
:mod:`highway_transformer.validation`; what a family's ``auto`` settings mean, by the family
record (:mod:`highway_transformer.models.families`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from .loading import from_dict, set_dotted

POSITIONALS = ("sinusoidal", "rope", "none")
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
    positional: str = "sinusoidal"  # sinusoidal | rope (dot attention) | none (XL ignores it)
    rope_theta: float = 10000.0  # positional=rope: base θ of the rotary frequencies θ^(-2i/d)
    ffn: str = "relu"  # relu | swiglu (hidden: round(2/3 d_inner) up to a multiple of 8)
    bias: bool = True  # false: no biases in attention, FFN, norms and output (gates keep b)
    attn_output_gate: str = "none"  # none | elementwise | headwise: heads ⊙ σ(h Wθ) before Wo
    attention: str | None = None  # dot | shaw | relative; None: the family's own (models.families)
    shaw_clip: int = 16
    attention_kernel: str = "auto"  # XL attention: core | fused (Triton) | auto (core till checked)
    gate: GateConfig = field(default_factory=GateConfig)
    local_rnn: LocalRNNConfig = field(default_factory=LocalRNNConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    adaptive_cutoffs: tuple[int, ...] = ()  # adaptive softmax / input cut-offs (word level)
    adaptive_div: float = 4.0
    # Reference-code fidelity (docs/fidelity.md). "auto" follows the reference code of the
    # family (its record in models.families): Transformer-XL or the HT / RT code.
    layer_norm: str = "torch"  # torch | rt (RT code: unbiased std + 1e-6) | rmsnorm (no mean)
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
    vocab_splits: str = "auto"  # auto | train | all (enwik8-xl, text8); auto: all, as the XL code
    batch_size: int = 16
    seq_len: int = 400
    context: int = 0
    eval_batch_size: int = 16
    eval_seq_len: int | None = None  # None: as seq_len
    eval_context: int | None = None  # None: as context
    eval_layout: str = "every"  # every | reference (Transformer-XL's LMOrderedIterator)
    max_train_tokens: int | None = None  # first tokens of train (music: steps, pixels: images)
    max_eval_tokens: int | None = None  # first tokens of valid/test (whole pieces or images)


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
    keep_checkpoints: int = 1  # 1: checkpoint/ alone
    async_checkpoint: bool = False  # write checkpoints from a copy in a thread, training on
    final_weights: str = "best"  # results.json scores best (validation) | last (RT char script)
    seed: int = 1111
    precision: str = "fp32"  # fp32 | bf16 | fp16 (autocast)
    device: str = "auto"  # auto | cpu | cuda | cuda:N | mps
    compile: str | bool = "auto"  # auto | true | false; auto: on CUDA only
    compile_mode: str = "default"  # default | max-autotune-no-cudagraphs (when compiled)
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
