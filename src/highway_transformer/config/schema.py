"""The configuration schema: typed dataclasses, each key declared once.

A :class:`Config` holds a :class:`ModelConfig`, a :class:`DataConfig`, a
:class:`TrainConfig` and a :class:`TaskConfig`. Presets (``highway presets``) are ready-made
Configs for the papers' experiments; a file or ``key=value`` overrides
(``model.gate.kind=sdu``) change any field (:mod:`~highway_transformer.config.loading`).

Each leaf field is declared once, with :func:`key`: its type (the annotation), default,
meaning, range or choices and source. ``highway config`` and the configuration page print
them (:mod:`~highway_transformer.config.keys`); :mod:`highway_transformer.validation` checks
every range and choice from them, and keeps the rules between fields; what a family's
``auto`` settings mean is its record (:mod:`highway_transformer.models.families`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from .loading import from_dict, set_dotted
from .ranges import AT_LEAST_1, NON_NEGATIVE, PROBABILITY, Range

# --------------------------------------------------------------------------- declaring a key


@dataclass(frozen=True)
class Key:
    """What a config field means and allows; its type and default are the field's own.

    ``choices`` names a tuple of :mod:`~highway_transformer.config.names`, read when a config
    is validated (not copied here: a registry's names may grow, in a test too); ``what`` is
    what an unknown choice is called in the error (default ``KEY value``).
    """

    meaning: str
    range: Range | None = None
    choices: str | None = None
    what: str | None = None
    source: str | None = None


#: The field metadata entry holding a field's :class:`Key`.
KEY = "key"


def key(
    default: Any,
    meaning: str,
    *,
    range: Range | None = None,
    choices: str | None = None,
    what: str | None = None,
    source: str | None = None,
) -> Any:
    """A config field declared once: ``d_model: int = key(512, "width of the residual
    stream", range=AT_LEAST_1)`` (``highway config``, validation and the docs read it)."""
    spec = Key(meaning, range, choices, what, source)
    return field(default=default, metadata={KEY: spec})


# --------------------------------------------------------------------------- the sections


@dataclass
class GateConfig:
    """Which gate joins which sublayers to the stream (HT §3, §4; Tables 5-6).

    ``layers`` is written as the paper writes it, 1-based: ``all``, ``none``, ``1-3``,
    ``1,2``; a ``\\FFN`` suffix (``1-6\\FFN``) leaves the FFN sublayers ungated.
    """

    kind: str = key(
        "none",
        "none | sdu | highway | gated (gated MHDPA); see nn.connections.COMBINERS",
        choices="GATE_NAMES",
        what="gate",
        source="HT §3-4; GTrXL",
    )
    activation: str = key(
        "sigmoid",
        "sdu: sigmoid | tanh",
        choices="ACTIVATION_NAMES",
        what="gate activation",
        source="HT eqs. 21-24",
    )
    layers: str = key(
        "all",
        "gated layers, 1-based as the paper writes them: all, none, 1-3, 1-6\\FFN",
        source="HT Tables 5-6",
    )
    sublayers: tuple[str, ...] = key(
        ("attn", "ffn"),
        "sublayer kinds that may be gated",
        choices="GATEABLE_NAMES",
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

    cell: str = key("gru", "rnn | gru | lstm", choices="CELL_NAMES", what="local RNN cell")
    window: int = key(
        7,
        "LocalRNN window size k (positions each local RNN reads)",
        range=AT_LEAST_1,
        source="RT §3.1",
    )
    per_block: int = key(
        1, "LocalRNN sublayers per block (RT code's `n`)", range=AT_LEAST_1, source="RT code"
    )
    linear_relu: bool = key(
        False, "the RT code's Linear+ReLU after each LocalRNN", source="RT code"
    )


@dataclass
class MemoryConfig:
    """Transformer-XL segment memory and evaluation knobs (Dai et al.; HT A.3)."""

    mem_len: int = key(
        0,
        "Transformer-XL memory length in training (0: no memory)",
        range=NON_NEGATIVE,
        source="Transformer-XL",
    )
    clamp_len: int = key(
        -1,
        "largest relative distance used; <= 0: no clamping (the reference code clamps only "
        "when > 0)",
        range=Range(-1, fix="0 or -1 means no clamping"),
    )
    same_length: bool = key(False, "every query attends to the same number of keys")
    eval_mem_len: int | None = key(
        None, "memory length in evaluation; None: as mem_len", range=NON_NEGATIVE, source="HT A.3"
    )
    eval_clamp_len: int | None = key(
        None,
        "clamp_len for evaluation (None: as clamp_len)",
        range=Range(-1, fix="0 or -1 means no clamping"),
        source="HT A.3",
    )
    eval_same_length: bool | None = key(
        None, "same_length for evaluation (None: as same_length)", source="HT A.3"
    )


@dataclass
class ModelConfig:
    family: str = key(
        "transformer",
        "transformer | rtransformer | xl",
        choices="FAMILY_NAMES",
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
        "where LayerNorm sits around each sublayer; post | pre",
        choices="NORM_POSITIONS",
        what="norm position",
    )
    tie_weights: bool = key(
        True,
        "share the input embedding and the output layer weights (adaptive: each cluster's table "
        "and the tail projections, as the Transformer-XL reference)",
    )
    init: str = key(
        "uniform",
        "uniform | normal | torch (PyTorch defaults)",
        choices="SCHEMES",
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
        "LayerNorm weight: ones | normal (N(1, init_std), XL code)",
        choices="NORM_INITS",
        what="LayerNorm initialisation",
        source="Transformer-XL code",
    )
    init_embedding: str = key(
        "",
        'token tables: "" as weights | uniform | normal (bias 0; RT LM code)',
        choices="EMBEDDING_SCHEMES",
        what="token table initialisation",
        source="RT LM code",
    )
    positional: str = key(
        "sinusoidal",
        "sinusoidal | rope (dot attention) | none (relative attention ignores it)",
        choices="POSITIONALS",
        what="positional encoding",
        source="RoFormer (Su et al. 2021) for rope",
    )
    rope_theta: float = key(
        10000.0,
        "positional=rope: base θ of the rotary frequencies θ^(-2i/d)",
        range=Range(0, open_low=True, fix="e.g. 10000, the RoFormer/Llama base"),
    )
    ffn: str = key(
        "relu",
        "relu | swiglu (hidden: round(2/3 d_inner) up to a multiple of 8)",
        choices="FFN_NAMES",
        what="feed-forward sublayer (model.ffn)",
        source="Shazeer 2020 for swiglu",
    )
    bias: bool = key(True, "false: no biases in attention, FFN, norms and output (gates keep b)")
    attn_output_gate: str = key(
        "none",
        "none | elementwise | headwise: heads ⊙ σ(h Wθ) before Wo",
        choices="ATTN_OUTPUT_GATES",
        what="attention-output gate (model.attn_output_gate)",
        source="Qiu et al. 2025 (G1)",
    )
    attention: str | None = key(
        None,
        "dot | shaw | relative; None: the family's own (models.families)",
        choices="ATTENTION_NAMES",
        what="attention",
    )
    shaw_clip: int = key(
        16,
        "Shaw attention: largest relative distance with its own embedding",
        range=AT_LEAST_1,
        source="Shaw et al. 2018",
    )
    attention_kernel: str = key(
        "auto",
        "XL attention: core | fused (Triton) | auto (core till checked)",
        choices="ATTENTION_KERNELS",
        what="attention kernel (model.attention_kernel)",
    )
    gate: GateConfig = field(default_factory=GateConfig)
    local_rnn: LocalRNNConfig = field(default_factory=LocalRNNConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    adaptive_cutoffs: tuple[int, ...] = key(
        (), "adaptive softmax / input cut-offs (word level)", range=AT_LEAST_1
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
        "torch | rt (RT code: unbiased std, eps 1e-6 on the std) | rmsnorm (no mean)",
        choices="NORM_NAMES",
        what="layer norm (model.layer_norm)",
        source="RT code",
    )
    final_norm: str = key(
        "auto", "auto | true | false; auto: pre-LN vanilla Transformer only", choices="FLAGS"
    )
    embedding_scale: str = key(
        "auto",
        "auto | true | false: embeddings × √d_model; auto: XL",
        choices="FLAGS",
        source="Transformer-XL code",
    )
    dropout_pos: float | None = key(
        None,
        "dropout on XL's R; None: as dropout (XL code)",
        range=PROBABILITY,
        source="Transformer-XL code",
    )
    dropout_out: float | None = key(
        None,
        "on the last hidden state (LM); None: XL dropout, else 0",
        range=PROBABILITY,
        source="Transformer-XL code",
    )
    untie_r: bool = key(
        False,
        "XL: u / v per layer instead of one pair shared by all layers",
        source="Transformer-XL code",
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
        "pydoc | ptb-word | ptb-char(-rt) | enwik8 | text8 | wikitext-103 | file",
        choices="CORPUS_NAMES",
        what="corpus (data.corpus)",
    )
    path: str | None = key(None, "a user text file (corpus=file) or a folder holding the corpus")
    level: str = key(
        "char",
        "char | word | byte | bpe | unigram (corpus=file)",
        choices="LEVELS",
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
        "splits whose symbols the vocabulary counts; auto | train | all (enwik8-xl, text8); "
        "auto: all, as the XL code",
        choices="VOCAB_SPLITS",
        what="vocabulary splits (data.vocab_splits)",
    )
    batch_size: int = key(16, "training rows per step", range=AT_LEAST_1)
    seq_len: int = key(400, "tokens per training window", range=AT_LEAST_1)
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
        "evaluation rows: every scores each target once; reference drops the remainder of "
        "len // eval_batch_size and each row's first target (<= 2B - 2), as the XL code; "
        "every | reference (Transformer-XL's LMOrderedIterator)",
        choices="EVAL_LAYOUT_NAMES",
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
    optimizer: str = key("sgd", "sgd | adam | adamw", choices="OPTIMIZERS", what="optimizer")
    lr: float = key(
        2.0,
        "peak learning rate",
        range=Range(0, open_low=True, fix="e.g. 2.0 for SGD, 2.5e-4 for Adam"),
    )
    schedule: str = key(
        "linear",
        "constant | linear | cosine | anneal | step",
        choices="SCHEDULES",
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
        "best | window | window-strict: when annealing happens",
        choices="ANNEAL_RULES",
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
        0.15, "max L2 norm of the gradient; 0 disables", range=Range(0, fix="0 disables clipping")
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
        "checkpoints kept: checkpoint/ (the newest, what --resume reads) and the K - 1 before it "
        "in checkpoints/step-N/, the oldest dropped at each save; 1: checkpoint/ alone",
        range=Range(1, fix="1 keeps checkpoint/ alone, the newest"),
    )
    async_checkpoint: bool = key(False, "write checkpoints from a copy in a thread, training on")
    final_weights: str = key(
        "best",
        "results.json scores best (validation) | last (RT char script)",
        choices="FINAL_WEIGHTS",
        what="final weights",
        source="RT char script",
    )
    seed: int = key(1111, "seed of the weights, data order and dropout", range=Range(0, 2**63 - 1))
    precision: str = key(
        "fp32", "fp32 | bf16 | fp16 (autocast)", choices="PRECISIONS", what="precision"
    )
    device: str = key("auto", "auto | cpu | cuda | cuda:N | mps")
    compile: str | bool = key(
        "auto",
        "torch.compile the training step (on a CPU it has not been shown to pay; an earlier "
        "version's true / false means the same); auto | true | false; auto: on CUDA only",
        choices="FLAGS",
    )
    compile_mode: str = key(
        "default",
        "torch.compile's mode; CUDA graphs (reduce-overhead) are not offered; "
        "default | max-autotune-no-cudagraphs (when compiled)",
        choices="COMPILE_MODES",
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
        "several processes: ddp (replicated) | fsdp (sharded model)",
        choices="STRATEGY_NAMES",
        what="training strategy (train.strategy)",
    )
    dist_backend: str = key(
        "auto",
        "several processes: auto (gloo on CPU, nccl on CUDA) | gloo | nccl",
        choices="DIST_BACKENDS",
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
class RLConfig:
    """Reinforcement learning with PPO (``task.name=rl``; defaults near CleanRL's ``ppo_trxl``)."""

    env: str = key(
        "corridor",
        "corridor | proof-of-memory | MiniGrid-MemoryS7-v0 | MiniGrid-MemoryS9-v0 | "
        "popgym-RepeatPreviousEasy-v0 (tasks/rl)",
        choices="RL_ENV_NAMES",
        what="environment (task.rl.env)",
    )
    corridor_length: int = key(4, "corridor: steps from the cue to the junction", range=AT_LEAST_1)
    policy: str = key(
        "transformer",
        "transformer (episodic memory) | lstm | gru | mlp (memoryless)",
        choices="RL_POLICY_NAMES",
        what="policy (task.rl.policy)",
    )
    memory_length: int = key(
        16, "transformer: past hidden states each layer attends to", range=AT_LEAST_1
    )
    num_envs: int = key(8, "environments stepped together", range=AT_LEAST_1)
    num_steps: int = key(
        64,
        "steps per environment per rollout",
        range=Range(2, fix="steps per environment per rollout, e.g. 64"),
    )
    total_steps: int = key(
        0,
        "environment steps in all: replaces train.max_steps when > 0",
        range=Range(0, fix="0 leaves the length to train.max_steps"),
    )
    gamma: float = key(0.99, "discount", range=Range(0, 1, fix="e.g. 0.99"), source="PPO")
    gae_lambda: float = key(
        0.95, "GAE's lambda", range=Range(0, 1, fix="e.g. 0.95"), source="GAE (Schulman 2016)"
    )
    clip_coef: float = key(
        0.2, "PPO's ratio clip (and the value clip)", range=Range(0, open_low=True, fix="e.g. 0.2")
    )
    vf_coef: float = key(0.5, "weight of the value loss", range=NON_NEGATIVE)
    ent_coef: float = key(0.01, "weight of the entropy bonus", range=NON_NEGATIVE)
    final_ent_coef: float | None = key(
        None,
        "entropy weight at the last step (linear); None: fixed",
        range=Range(0, fix="leave it unset (null) for a fixed entropy weight"),
    )
    update_epochs: int = key(4, "passes over each rollout", range=AT_LEAST_1)
    num_minibatches: int = key(4, "optimizer steps per pass", range=AT_LEAST_1)
    minibatch: str = key(
        "envs",
        "envs: whole rollouts of num_envs / num_minibatches environments | steps: steps "
        "drawn from all (CleanRL ppo_trxl; transformer and mlp policies)",
        choices="RL_MINIBATCHES",
        what="minibatch (task.rl.minibatch)",
    )
    norm_adv: bool = key(True, "normalise advantages per minibatch")
    clip_vloss: bool = key(True, "clip the value loss as PPO2")
    eval_episodes: int = key(32, "greedy episodes per evaluation", range=AT_LEAST_1)
    stats_episodes: int = key(
        100, "training return and success: mean of the last N episodes", range=AT_LEAST_1
    )

    def optimizer_steps(self) -> int:
        """Optimizer steps of ``total_steps`` environment steps: ``update_epochs x
        num_minibatches`` for every whole rollout (one at least)."""
        rollouts = max(1, self.total_steps // (self.num_envs * self.num_steps))
        return rollouts * self.update_epochs * self.num_minibatches


@dataclass
class TaskConfig:
    """The task beyond language modelling (RT §4: pixel MNIST, polyphonic music; TCN tasks)."""

    name: str = key(
        "lm",
        "lm | music | pixels | copy | adding | seq2seq | rl",
        choices="TASK_NAMES",
        what="task",
    )
    dataset: str = key(
        "", "music: nottingham | jsb | piano-midi | musedata; pixels: digits | mnist"
    )
    permute: bool = key(False, "pixels: one fixed random permutation of the pixel order")
    length: int = key(
        100, "copy: delay; adding: sequence length; seq2seq: longest toy source", range=AT_LEAST_1
    )
    max_len: int = key(
        0, "longest accepted input sequence (0: no limit)", range=Range(0, fix="0 means no limit")
    )
    pooling: str = key("last", "pixels: last | mean", choices="POOLING_NAMES", what="task.pooling")
    score: str = key(
        "scaled_dot",
        "seq2seq attention score function",
        choices="SCORES",
        what="attention score function",
    )
    beam_size: int = key(1, "seq2seq decoding", range=AT_LEAST_1)
    rl: RLConfig = field(default_factory=RLConfig)  # task.name=rl: environment and PPO


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
        for key, value in overrides.items():
            set_dotted(data, key, value)
        return from_dict(Config, data)
