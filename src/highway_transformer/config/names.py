"""The names a config may choose, without the modules they name.

The registries (gate classes, norms, families, tasks, ...) live beside the torch modules
they map to; importing them costs seconds. These tuples are their names alone, so a
misspelled name in a config or an override is answered before ``torch`` is imported.
The plain tuples are the only definition of their names (the torch modules import them);
for each registry mapping a name to code, a test holds the tuple equal to its keys.
"""

from __future__ import annotations

import re

from ..errors import ConfigError, unknown_choice

# --------------------------------------------------------------------------- registries' keys

#: ``model.family``: :data:`highway_transformer.models.families.FAMILIES`.
FAMILY_NAMES = ("transformer", "rtransformer", "xl")
#: ``model.attention``: :data:`highway_transformer.models.builders.ATTENTIONS`.
ATTENTION_NAMES = ("dot", "relative", "shaw")
#: ``model.gate.sublayers``: :data:`highway_transformer.models.builders.GATEABLE`.
GATEABLE_NAMES = ("attn", "ffn", "rnn")
#: ``model.local_rnn.cell``: :data:`highway_transformer.nn.local_rnn.CELLS`.
CELL_NAMES = ("rnn", "gru", "lstm")
#: ``model.layer_norm``: :data:`highway_transformer.nn.norms.NORMS`.
NORM_NAMES = ("torch", "rt", "rmsnorm")
#: ``model.gate.kind``: :data:`highway_transformer.nn.connections.COMBINERS`.
GATE_NAMES = (
    "none",
    "sdu",
    "highway",
    "gated",
    "gtrxl-input",
    "gtrxl-output",
    "gtrxl-highway",
    "gtrxl-sigmoid-tanh",
    "gtrxl-gru",
)
#: ``model.gate.activation``: :data:`highway_transformer.nn.combiner.ACTIVATIONS`.
ACTIVATION_NAMES = ("sigmoid", "tanh")
#: ``data.eval_layout``: :data:`highway_transformer.data.batching.EVAL_LAYOUTS`.
EVAL_LAYOUT_NAMES = ("every", "reference")
#: ``data.corpus``: :data:`highway_transformer.data.corpora.CORPORA`.
CORPUS_NAMES = (
    "pydoc",
    "ptb-word",
    "ptb-char",
    "ptb-char-rt",
    "enwik8",
    "enwik8-xl",
    "text8",
    "wikitext-103",
    "file",
)
#: ``task.name``: :data:`highway_transformer.tasks.TASKS`.
TASK_NAMES = ("lm", "music", "pixels", "copy", "adding", "seq2seq", "rl")
#: The tasks that read their splits from data, which ``data.max_train_tokens`` and
#: ``data.max_eval_tokens`` cap (the others generate theirs).
SPLIT_CAPPED_TASKS = ("lm", "music", "pixels")
#: ``task.pooling``: :data:`highway_transformer.models.sequence.POOLINGS`.
POOLING_NAMES = ("last", "mean")
#: ``task.rl.policy``: :data:`highway_transformer.tasks.rl.policies.POLICIES`.
RL_POLICY_NAMES = ("transformer", "lstm", "gru", "mlp")
#: ``task.rl.env``: :data:`highway_transformer.tasks.rl.envs.ENVS`.
RL_ENV_NAMES = (
    "corridor",
    "proof-of-memory",
    "MiniGrid-MemoryS7-v0",
    "MiniGrid-MemoryS9-v0",
    "popgym-RepeatPreviousEasy-v0",
)
#: ``model.ffn``: :data:`highway_transformer.nn.feedforward.FFNS`.
FFN_NAMES = ("relu", "swiglu")
#: ``train.strategy``: :data:`highway_transformer.runtime.strategies.STRATEGIES`.
STRATEGY_NAMES = ("ddp", "fsdp")

# --------------------------------------------------------------------------- plain names

POSITIONALS = ("sinusoidal", "rope", "none")
#: ``task.rl.minibatch``: what a PPO minibatch draws, whole environments or single steps.
RL_MINIBATCHES = ("envs", "steps")
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

#: ``model.attention_kernel``: what computes relative attention (``nn/relative.py``).
ATTENTION_KERNELS = ("auto", "core", "fused")
#: ``model.attn_output_gate``: none, or the attention-output gate's width per head (all of
#: its features, or one scalar; Qiu et al. 2025).
ATTN_OUTPUT_GATES = ("none", "elementwise", "headwise")
#: ``model.norm``: where each sublayer's LayerNorm stands.
NORM_POSITIONS = ("post", "pre")
#: ``model.init``.
SCHEMES = ("uniform", "normal", "torch")
#: ``model.init_embedding``: "" draws the token tables like every other weight.
EMBEDDING_SCHEMES = ("", "uniform", "normal")
#: ``model.init_norm``.
NORM_INITS = ("ones", "normal")
#: ``data.vocab_splits`` values; ``auto`` counts what the reference code counts.
VOCAB_SPLITS = ("auto", "train", "all")
#: ``task.dataset`` of ``task.name=pixels`` ("" is digits).
PIXEL_DATASETS = ("digits", "mnist")
#: ``task.score``: the encoder-decoder's attention score functions, and their other names.
SCORES = ("scaled_dot", "dot", "general", "additive", "content", "location")
SCORE_ALIASES = {"scaled-dot": "scaled_dot", "cosine": "content", "concat": "additive"}


#: ``train.device``: ``auto`` or a torch device type, with ``:N`` where it has several.
DEVICE_FORM = re.compile(r"auto|(cpu|cuda|mps|xpu|hpu|mtia|meta)(:\d+)?")


def check_device_name(name: str, what: str = "train.device") -> None:
    """Refuse a device name torch cannot mean (before torch is imported)."""
    if not DEVICE_FORM.fullmatch(str(name)):
        raise ConfigError(f"{what} {name}: use auto, cpu, cuda, cuda:N or mps")


def normalize_score(name: str) -> str:
    """The canonical score name for ``name`` (``cosine`` -> ``content`` ...)."""
    key = str(name).strip().lower()
    key = SCORE_ALIASES.get(key, key)
    if key not in SCORES:
        raise unknown_choice("attention score function", name, SCORES)
    return key


def flag_value(value: object) -> str:
    """A switch as :data:`FLAGS` spells it (an earlier version's booleans: true / false)."""
    return str(value).lower()


#: How a value is read before it is looked up in the tuple of this name (the others are
#: compared as written): a reader may raise its own error (``normalize_score``).
READERS = {"FLAGS": flag_value, "SCORES": normalize_score}
