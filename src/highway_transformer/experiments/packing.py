"""Several runs on one device at once: ``highway run --device cuda --jobs N``.

Small models leave most of a large GPU idle; ``--jobs N`` trains N runs at once, each its
own ``highway train`` process on the same device. Before any starts, each run's peak device
memory is estimated from its config alone (:func:`estimate_peak`) and the N largest of the
runs left are summed against the device's free memory (:func:`check_packing`): too many is
a one-line error that says how many fit. After they end, :func:`aggregate_line` says what
they trained together: every run's measured tokens over the wall time they shared.

The estimate is a formula, conservative by construction (every large tensor a step keeps
for its backward pass, counted in the width it has, plus the largest transients of one
layer, plus a fixed cost per process), so it overstates rather than understates; its
terms are written out in :func:`activation_bytes` and checked against a measured CPU peak
in ``tests/experiments/test_packing.py``. What a CPU cannot measure is added as stated
constants: the CUDA context of each process (:data:`PROCESS_BYTES`) and the caching
allocator's slack on the activations (:data:`ALLOCATOR_SLACK`).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Config, ModelConfig
from ..errors import ConfigError
from ..models.families import attention_kind, block_layout, uses_memory
from ..nn.layer_spec import parse_layer_spec
from ..storage import runfolder

MiB, GiB = 1024**2, 1024**3
#: Device memory a CUDA process holds besides its tensors: the context and the kernels it
#: loads (about 0.5 GiB on an H100 with CUDA 12's lazy loading), the cuBLAS workspaces and
#: what ``torch.compile``'s kernels add. Stated, not measured here (no GPU on the machine
#: that wrote this); set high on purpose.
PROCESS_BYTES = GiB
#: The caching allocator keeps freed blocks for reuse and cuts new ones to its own sizes;
#: the activations are counted this much larger for it.
ALLOCATOR_SLACK = 1.25
#: Optimiser state, in fp32 copies of the parameters (SGD keeps one only with momentum).
_OPTIMIZER_COPIES = {"sgd": 0, "adam": 2, "adamw": 2}
#: Loss items at the output of one position: the classes scored, by task (lm: the vocabulary).
_OUTPUTS = {"music": 88, "pixels": 0, "copy": 10, "adding": 0, "seq2seq": 64}
#: The vocabulary of a corpus whose size its name fixes, an upper bound (bytes and characters:
#: 256 symbols and the specials; PTB words: 10,000 and end of sentence; WikiText-103: its
#: 267,735 words, end of sentence and unknown).
_CORPUS_VOCAB = {
    "ptb-char": 260, "ptb-char-rt": 260, "enwik8": 260, "enwik8-xl": 260, "text8": 260,
    "ptb-word": 10_002, "wikitext-103": 267_740,
}  # fmt: skip


@dataclass(frozen=True)
class StepShape:
    """The sizes of one training step's tensors."""

    rows: int  # rows of one micro-batch
    length: int  # positions a row's forward pass covers
    keys: int  # positions a query attends over (its segment and the XL memory)
    outputs: int  # classes scored at each position (0: one pooled output per row)
    targets: int  # positions whose outputs are scored
    decoder: bool = False  # an encoder-decoder: a second stack of blocks with cross-attention


@dataclass(frozen=True)
class PeakEstimate:
    """A run's peak device memory, in bytes, by part (:func:`estimate_peak`)."""

    parameters: int
    state: int  # weights, gradients, optimiser state and its temporaries, autocast copies
    training: int  # activations of one training step (with the XL memory held)
    evaluation: int  # what one evaluation batch holds at once
    process: int  # the process's own cost on the device (its CUDA context)

    @property
    def activations(self) -> int:
        return int(ALLOCATOR_SLACK * max(self.training, self.evaluation))

    @property
    def total(self) -> int:
        return self.process + self.state + self.activations

    def describe(self) -> str:
        return (
            f"{self.total / GiB:.1f} GiB ({self.parameters:,} parameters: "
            f"{self.state / GiB:.2f} GiB of weights, gradients and optimiser state; "
            f"{self.activations / GiB:.2f} GiB of activations; {self.process / GiB:.1f} GiB "
            "for the process)"
        )


def activation_bytes(
    model: ModelConfig,
    shape: StepShape,
    precision: str,
    device_type: str = "cuda",
    training: bool = True,
) -> int:
    """The activations one step of ``model`` holds at its peak, in bytes.

    Per position of every sublayer, what a training step keeps for its backward pass: the
    stream-wide tensors (norm input and output, the sublayer output, its dropout mask, the
    residual sum, their autocast copies) in fp32; the products (q, k, v, the attention output
    and its reshaped copy, the FFN's inner layer before and after its ReLU and dropout) in the
    autocast width; a gate's four more stream-wide tensors; the LocalRNN's states of each
    window step. Per attention layer, its ``rows × heads × length × keys`` score tensors: the
    probabilities and dropout mask the relative core keeps (narrow), or the softmax, mask and
    dropped weights of dot attention's unfused path in fp32 (a fused kernel keeps none, so
    this overstates it on a GPU); the keys and values over the XL memory. Then the XL memory
    (the one held and the one being built, per micro-batch), the embedding, and the logits in
    their width, in fp32, their log-softmax and its gradient; on top, the transients of one
    layer (three score-sized fp32 tensors, the FFN's inner gradient, a LocalRNN's
    projection). An evaluation (``training=False``, no gradient) holds one sublayer's
    tensors and transients at a time besides the memory, embedding and logits.
    """
    wide = 4  # fp32: the stream, norms, the softmax
    narrow = 2 if precision in ("bf16", "fp16") else 4  # matrix products under autocast
    mask = 4 if device_type == "cpu" else 1  # a dropout mask: fp32 on the CPU, bool on CUDA
    d, inner, ff = model.d_model, model.n_heads * model.head_dim, model.d_inner
    rows, length, keys = shape.rows, shape.length, shape.keys
    tokens = rows * length
    scores = rows * model.n_heads * length * keys  # one attention layer's score matrix
    relative = attention_kind(model) == "relative"
    cells = {"rnn": 1, "gru": 3, "lstm": 4}[model.local_rnn.cell]
    window = model.local_rnn.window
    spec = parse_layer_spec(model.gate.layers, model.n_layers)
    sublayers = tuple(model.gate.sublayers)
    stream = 6 * d * wide + 2 * d * narrow

    def sublayer(kind: str) -> tuple[int, int]:
        """(bytes the sublayer keeps for the backward pass, its largest transient)."""
        if kind in ("attn", "cross"):
            kept = tokens * (stream + 6 * inner * narrow)
            if relative:  # keys, values and the memory's concatenation over every key
                kept += rows * keys * (2 * inner * narrow + 2 * d * wide)
                kept += scores * (narrow + narrow)  # probabilities, dropout mask
            else:
                kept += 3 * scores * wide
            return kept, 3 * scores * wide
        if kind == "ffn":
            return tokens * (stream + ff * (3 * narrow + mask)), tokens * ff * wide
        # rnn: per window step the cell's states (GRU: r, z, W_hn h, n, the input state)
        kept = tokens * (stream + window * (cells + 2) * d * narrow)
        return kept, 2 * rows * (length + window) * cells * d * narrow

    kept = largest = transient = 0
    for cross in (False, True) if shape.decoder else (False,):
        for layer in range(model.n_layers):
            for kind in block_layout(model, cross=cross):
                held, passing = sublayer(kind)
                if model.gate.kind != "none" and spec.gated(layer, kind, sublayers):
                    held += tokens * 4 * d * wide
                kept += held
                largest = max(largest, held)
                transient = max(transient, passing)
    embedding = tokens * d * (2 * wide + mask)
    logits = rows * shape.targets * shape.outputs * (narrow + 3 * wide)
    memory = 0
    if uses_memory(model):
        memory = 2 * model.n_layers * rows * (keys - length) * d * wide
    held = kept if training else largest
    return memory + embedding + logits + held + transient


def state_bytes(config: Config, parameters: int) -> int:
    """Weights, gradients and the optimiser's state in fp32, a parameter-sized temporary of
    the unfused optimiser step, and the autocast copies of the weights in reduced precision."""
    t = config.train
    copies = 2 + _OPTIMIZER_COPIES.get(t.optimizer, 2) + (t.optimizer == "sgd" and t.momentum > 0)
    per = 4 * copies + (0 if t.fused_optimizer else 4) + (2 if t.precision != "fp32" else 0)
    return parameters * per


def vocabulary_size(config: Config) -> int:
    """A language model's vocabulary, or a bound of it: ``model.vocab_size`` where given, the
    bound a named corpus fixes (:data:`_CORPUS_VOCAB`), else the corpus read once here (a
    file or the documentation corpus; the runs then read it from the token cache)."""
    if config.model.vocab_size:
        return config.model.vocab_size
    if config.data.corpus in _CORPUS_VOCAB:
        return _CORPUS_VOCAB[config.data.corpus]
    from ..data.corpora import load_corpus

    return len(load_corpus(config.data, download=True).vocab)


def _lm_outputs(config: Config) -> int:
    """Logits of one position: the vocabulary, or with an adaptive softmax its head and its
    largest tail cluster (each target is scored by the head and at most one cluster)."""
    vocab = vocabulary_size(config)
    cutoffs = [c for c in config.model.adaptive_cutoffs if c < vocab]
    if not cutoffs:
        return vocab
    bounds = [0, *cutoffs, vocab]
    tails = [hi - lo for lo, hi in zip(bounds[1:-1], bounds[2:], strict=True)]
    return cutoffs[0] + len(cutoffs) + max(tails)


def _longest_piece(config: Config) -> int:
    from ..tasks.music import load_music_splits

    splits = load_music_splits(config)
    return max(int(p.shape[0]) for s in (splits.train, splits.valid, splits.test) for p in s)


def step_shape(config: Config, evaluation: bool = False) -> StepShape:
    """The sizes of one training step (``evaluation``: one evaluation batch) of ``config``."""
    data, task, model = config.data, config.task, config.model
    rows = data.eval_batch_size if evaluation else data.batch_size
    name = task.name
    if name == "lm":
        length = (data.eval_seq_len or data.seq_len) if evaluation else data.seq_len
        memory = 0
        if uses_memory(model):
            memory = model.memory.mem_len
            if evaluation and model.memory.eval_mem_len is not None:
                memory = model.memory.eval_mem_len
        return StepShape(rows, length, length + memory, _lm_outputs(config), length)
    if name == "pixels":
        length = task.max_len or (784 if task.dataset == "mnist" else 64)
    elif name == "copy":
        length = task.length + 20
    elif name == "music":
        length = task.max_len or _longest_piece(config)
    else:  # adding, seq2seq (a source and its target, with their markers)
        length = task.length + 2
    outputs = _OUTPUTS.get(name, 0)
    return StepShape(rows, length, length, outputs, length if outputs else 1, name == "seq2seq")


def _parameters(config: Config) -> int:
    from ..models.resources import count_parameters  # torch: only when runs are packed
    from ..tasks import task_class

    if config.task.name == "lm" and not config.model.vocab_size:
        config = config.replace(**{"model.vocab_size": vocabulary_size(config)})
    return count_parameters(config, task_class(config.task.name).build_model)


def estimate_peak(config: Config, device_type: str = "cuda") -> PeakEstimate:
    """The peak device memory of a run of ``config`` (a validated config), by part."""
    parameters = _parameters(config)
    train, precision = step_shape(config), config.train.precision
    training = activation_bytes(config.model, train, precision, device_type)
    if uses_memory(config.model):  # a memory per micro-batch, and the one being built
        extra = (config.train.accumulate - 1) * config.model.n_layers * train.rows
        training += extra * (train.keys - train.length) * config.model.d_model * 4
    evaluation = activation_bytes(
        config.model, step_shape(config, evaluation=True), precision, device_type, False
    )
    return PeakEstimate(
        parameters=parameters,
        state=state_bytes(config, parameters),
        training=training,
        evaluation=evaluation,
        process=PROCESS_BYTES if device_type == "cuda" else 0,
    )


def free_memory(device: Any) -> int:
    """Free bytes of a CUDA ``device`` now (``torch.cuda.mem_get_info``)."""
    import torch

    return int(torch.cuda.mem_get_info(device)[0])


def check_fits(
    estimates: list[tuple[str, PeakEstimate]], jobs: int, free: int, device: str
) -> list[str]:
    """Refuse ``jobs`` runs at once when the ``jobs`` largest of ``estimates`` (name,
    estimate) need more than ``free`` bytes; return the lines that say what was checked."""
    at_once = min(jobs, len(estimates))
    largest = heapq.nlargest(at_once, estimates, key=lambda item: item[1].total)
    need = sum(e.total for _, e in largest)
    name, biggest = largest[0]
    if need <= free:
        return [
            f"{device}: the {at_once} largest of {len(estimates)} run(s) at once need at most "
            f"{need / GiB:.1f} GiB of the {free / GiB:.1f} GiB free (largest: {name}, "
            f"{biggest.describe()})"
        ]
    if biggest.total > free:
        raise ConfigError(
            f"{name} alone is estimated at {biggest.describe()} but {device} has "
            f"{free / GiB:.1f} GiB free: train it with --jobs 1, or lower data.batch_size or "
            "data.seq_len"
        )
    fits, total = 0, 0
    for _, estimate in largest:
        if total + estimate.total > free:
            break
        total, fits = total + estimate.total, fits + 1
    raise ConfigError(
        f"--jobs {jobs}: the {at_once} largest runs at once are estimated at "
        f"{need / GiB:.1f} GiB but {device} has {free / GiB:.1f} GiB free (largest: {name}, "
        f"{biggest.total / GiB:.1f} GiB); use --jobs {fits} or fewer"
    )


def check_packing(configs: Iterable[tuple[str, Config]], jobs: int) -> list[str]:
    """Before ``jobs`` runs start at once: on each CUDA device the runs (name, config) train
    on, their estimated peaks against its free memory (:func:`check_fits`); runs on other
    devices are not checked (a CPU shares its cores out instead). Returns the lines to log."""
    from ..runtime.device import resolve_device

    by_device: dict[str, list[tuple[str, PeakEstimate]]] = {}
    for name, config in configs:
        device = resolve_device(config.train.device)
        if device.type == "cuda":
            by_device.setdefault(str(device), []).append((name, estimate_peak(config)))
    lines = []
    for device, estimates in by_device.items():
        lines += check_fits(estimates, jobs, free_memory(device), device)
    return lines


@dataclass(frozen=True)
class Trained:
    """What one run trained during this command: its loss items (tokens) and seconds."""

    tokens: float
    seconds: float


def trained_now(run_dir: Path) -> Trained | None:
    """The tokens and seconds a finished run trained in its last stretch (one ``highway
    train`` process: what this command ran of it). ``results.json`` records the run's
    ``train_tokens`` and ``steps`` over all its stretches; the last stretch's share of the
    steps is its share of the tokens. None for a run without results."""
    results = runfolder.read_results(run_dir)
    if not isinstance(results, dict):
        return None
    stretches = [s for s in results.get("stretches") or [] if isinstance(s, dict)]
    steps, tokens = results.get("steps"), results.get("train_tokens")
    if not stretches or not steps or not tokens:
        return None
    last = stretches[-1]
    span = int(last.get("to_step", 0)) - int(last.get("from_step", 0))
    if span <= 0:
        return None
    return Trained(float(tokens) * span / int(steps), float(last.get("seconds") or 0.0))


def aggregate_line(run_dirs: Iterable[Path], wall_seconds: float, jobs: int) -> str | None:
    """The throughput of runs trained ``jobs`` at a time: the tokens every finished run
    trained in this command over the wall time they shared (start of the first to end of
    the last, start-up and evaluations included), and each run's own rate beside it; None
    when no run trained."""
    trained = [t for t in (trained_now(Path(d)) for d in run_dirs) if t is not None]
    if not trained or wall_seconds <= 0:
        return None
    tokens = sum(t.tokens for t in trained)
    own = [t.tokens / t.seconds for t in trained if t.seconds > 0]
    line = (
        f"{len(trained)} run(s) trained, {jobs} at a time: {tokens:,.0f} tokens in "
        f"{wall_seconds:,.1f} s of wall time, {tokens / wall_seconds:,.0f} tokens/s together"
    )
    if own:
        line += f" (each run's own rate: mean {sum(own) / len(own):,.0f} tokens/s)"
    return line
