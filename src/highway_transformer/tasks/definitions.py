"""The tasks beyond language modelling: data, model, loss and metrics of each.

=============  =====================================================  ======================
task           data and model                                         metrics
=============  =====================================================  ======================
``music``      piano rolls (RT §4.2; Boulanger-Lewandowski et al.),   NLL per time step
               88 Bernoulli logits at each step
``pixels``     pixel-by-pixel digits (8x8 default) or (p)MNIST        cross-entropy, accuracy
               (RT §4.1), pooled head over 10 classes
``copy``       copy memory (TCN suite), symbol logits at each step    cross-entropy, accuracy
                                                                      on the copied steps
``adding``     adding problem (TCN suite), pooled regression          mean squared error
``seq2seq``    toy reversal-translation pairs, encoder-decoder        cross-entropy, token
                                                                      accuracy, exact match
=============  =====================================================  ======================

Each task builds its model from the :class:`~highway_transformer.config.Config` alone, so a
checkpoint folder (weights + ``config.json``) is enough to rebuild it.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..config import Config
from ..data import music as music_data
from ..data import seq2seq as s2s
from ..data.images import ImageSplits, load_digits_default, load_mnist
from ..data.synthetic import adding_problem_batch, copy_memory_batch
from ..errors import ConfigError, DataError, unknown_choice
from ..models.encoder_decoder import EncoderDecoder
from ..models.sequence import SequenceModel, build_sequence_model

Batch = Any

#: Sequences per evaluation split of the generated tasks (copy, adding, seq2seq), unless
#: ``train.eval_max_tokens`` caps the positions.
GENERATED_EVAL_SEQUENCES = 1024
#: Copy memory as in the TCN repository: 8 symbols, 10 to copy.
COPY_SYMBOLS, COPY_LEN = 8, 10


def check_max_len(config: Config, length: int, what: str) -> None:
    """Raise :class:`DataError` when ``length`` steps exceed ``task.max_len`` (0: no limit)."""
    limit = config.task.max_len
    if limit and length > limit:
        raise DataError(
            f"{what} has {length} steps, more than task.max_len={limit}; raise task.max_len "
            "(0 = no limit) or use shorter sequences"
        )


def _epochs(n: int, batch_size: int, generator: torch.Generator) -> Iterator[Tensor]:
    """Index batches of shuffled epochs over ``n`` items, forever."""
    while True:
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, batch_size):
            yield order[start : start + batch_size]


class Task(ABC):
    """One task: its model, an endless stream of training batches, loss and evaluation."""

    name: ClassVar[str] = ""

    def __init__(self, config: Config, device: torch.device) -> None:
        self.config = config
        self.device = device
        self.generator = torch.Generator().manual_seed(config.train.seed)

    @staticmethod
    @abstractmethod
    def build_model(config: Config) -> nn.Module:
        """The task's model, built from the config alone."""

    @abstractmethod
    def train_batches(self) -> Iterator[Batch]:
        """An endless stream of training batches."""

    @abstractmethod
    def loss(self, model: nn.Module, batch: Batch) -> tuple[Tensor, int]:
        """(mean training loss, number of items it averages over) for one batch."""

    @abstractmethod
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        """Metrics of ``split`` (valid | test); always holds ``loss``."""

    def _eval_count(self, length: int) -> int:
        cap = self.config.train.eval_max_tokens
        if cap:
            return max(1, min(GENERATED_EVAL_SEQUENCES, cap // max(length, 1)))
        return GENERATED_EVAL_SEQUENCES


# --------------------------------------------------------------------------- music


class MusicTask(Task):
    """Polyphonic music (RT §4.2, Table 2): predict each step's 88 notes from the steps before.

    As in the RT / TCN code the model reads the roll shifted by one step and the loss covers
    steps 1..T-1 of each piece (step 0 has nothing before it); the NLL is summed over the 88
    notes and averaged over all counted steps of the split (:func:`bernoulli_nll`).
    """

    name = "music"

    def __init__(self, config: Config, device: torch.device) -> None:
        super().__init__(config, device)
        self.splits = load_music_splits(config)
        parts = (self.splits.train, self.splits.valid, self.splits.test)
        for split, pieces in zip(("train", "valid", "test"), parts, strict=True):
            longest = max(int(p.shape[0]) for p in pieces)
            check_max_len(config, longest, f"the longest {split} piece")

    @staticmethod
    def build_model(config: Config) -> nn.Module:
        return build_sequence_model(config, music_data.N_KEYS, music_data.N_KEYS, "per_step")

    def train_batches(self) -> Iterator[Batch]:
        while True:
            yield from music_data.music_batches(
                self.splits.train,
                self.config.data.batch_size,
                shuffle=True,
                generator=self.generator,
                predict_first=False,
            )

    def loss(self, model: nn.Module, batch: Batch) -> tuple[Tensor, int]:
        inputs, targets, mask = (t.to(self.device) for t in batch)
        logits = model(inputs)
        return music_data.bernoulli_nll(logits.float(), targets, mask), int(mask.sum())

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        # longest pieces together: less padding (outputs at real steps do not depend on it)
        pieces = sorted(getattr(self.splits, split), key=lambda p: int(p.shape[0]))
        total, steps = 0.0, 0
        for inputs, targets, mask in music_data.music_batches(
            pieces, self.config.data.eval_batch_size, predict_first=False
        ):
            count = int(mask.sum())
            logits = model(inputs.to(self.device)).float()
            nll = music_data.bernoulli_nll(logits, targets.to(self.device), mask.to(self.device))
            total += float(nll) * count
            steps += count
        nll = total / max(steps, 1)
        return {"loss": nll, "nll": nll, "steps": steps}


def load_music_splits(config: Config) -> music_data.MusicSplits:
    """The music corpus named by ``task.dataset`` (default Nottingham) from ``data.path``,
    downloaded (checksum-checked) when it is not there."""
    name = config.task.dataset or "nottingham"
    try:
        return music_data.load_music(name, data_dir=config.data.path)
    except DataError:
        if Path(name).suffix or "/" in name or "\\" in name:  # a file path: nothing to fetch
            raise
        return music_data.load_music(name, data_dir=config.data.path, download=True)


# --------------------------------------------------------------------------- pixels

PIXEL_DATASETS = ("digits", "mnist")


def load_pixel_splits(config: Config) -> ImageSplits:
    """Digits (8x8, offline, the default) or MNIST from ``data.path`` (downloaded if absent);
    ``task.permute`` applies the fixed pixel permutation of seed ``train.seed``."""
    name = (config.task.dataset or "digits").strip().lower()
    if name not in PIXEL_DATASETS:
        raise unknown_choice("pixel data set (task.dataset)", name, PIXEL_DATASETS)
    seed = config.train.seed
    if name == "digits":
        return load_digits_default(permute=config.task.permute, seed=seed)
    try:
        return load_mnist(config.data.path, permute=config.task.permute, seed=seed)
    except DataError:
        return load_mnist(config.data.path, download=True, permute=config.task.permute, seed=seed)


class PixelsTask(Task):
    """Pixel-by-pixel classification (RT §4.1, Table 1): one pixel a step, class at the end."""

    name = "pixels"
    N_CLASSES = 10

    def __init__(self, config: Config, device: torch.device) -> None:
        super().__init__(config, device)
        self.splits = load_pixel_splits(config)
        check_max_len(config, self.splits.seq_len, "a pixel sequence")

    @staticmethod
    def build_model(config: Config) -> nn.Module:
        return build_sequence_model(config, 1, PixelsTask.N_CLASSES, "pooled")

    def train_batches(self) -> Iterator[Batch]:
        x, y = self.splits.train
        for index in _epochs(len(x), self.config.data.batch_size, self.generator):
            yield x[index], y[index]

    def loss(self, model: nn.Module, batch: Batch) -> tuple[Tensor, int]:
        x, y = batch[0].to(self.device), batch[1].to(self.device)
        return F.cross_entropy(model(x).float(), y), int(y.numel())

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        x_all, y_all = getattr(self.splits, split)
        total, correct, size = 0.0, 0, self.config.data.eval_batch_size
        for start in range(0, len(x_all), size):
            x = x_all[start : start + size].to(self.device)
            y = y_all[start : start + size].to(self.device)
            logits = model(x).float()
            total += float(F.cross_entropy(logits, y, reduction="sum"))
            correct += int((logits.argmax(-1) == y).sum())
        n = max(len(x_all), 1)
        return {"loss": total / n, "accuracy": correct / n, "examples": len(x_all)}


# --------------------------------------------------------------------------- copy, adding


class CopyTask(Task):
    """Copy memory (TCN suite): recall 10 symbols after ``task.length`` blank steps.

    The loss is the cross-entropy over all ``T = length + 20`` steps (as the TCN code
    computes it); ``accuracy`` counts the 10 copied steps only. A blank-only guess scores
    ``10 ln 8 / T``.
    """

    name = "copy"

    def __init__(self, config: Config, device: torch.device) -> None:
        super().__init__(config, device)
        self.delay = config.task.length
        self.seq_len = self.delay + 2 * COPY_LEN
        check_max_len(config, self.seq_len, "a copy-memory sequence")
        n = self._eval_count(self.seq_len)
        self.eval_sets = {
            split: copy_memory_batch(
                n,
                self.delay,
                COPY_SYMBOLS,
                COPY_LEN,
                torch.Generator().manual_seed(config.train.seed + offset),
            )
            for split, offset in (("valid", 1), ("test", 2))
        }

    @staticmethod
    def build_model(config: Config) -> nn.Module:
        vocab = COPY_SYMBOLS + 2
        return build_sequence_model(config, vocab, vocab, "per_step", token_input=True)

    def train_batches(self) -> Iterator[Batch]:
        while True:
            yield copy_memory_batch(
                self.config.data.batch_size, self.delay, COPY_SYMBOLS, COPY_LEN, self.generator
            )

    def loss(self, model: nn.Module, batch: Batch) -> tuple[Tensor, int]:
        x, y = batch[0].to(self.device), batch[1].to(self.device)
        logits = model(x).float()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)), y.numel()

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        x_all, y_all = self.eval_sets[split]
        total, correct, size = 0.0, 0, self.config.data.eval_batch_size
        for start in range(0, len(x_all), size):
            x = x_all[start : start + size].to(self.device)
            y = y_all[start : start + size].to(self.device)
            logits = model(x).float()
            total += float(F.cross_entropy(logits.transpose(1, 2), y, reduction="sum"))
            copied = logits[:, -COPY_LEN:].argmax(-1) == y[:, -COPY_LEN:]
            correct += int(copied.sum())
        n = len(x_all)
        return {
            "loss": total / (n * self.seq_len),
            "accuracy": correct / (n * COPY_LEN),
            "baseline_loss": COPY_LEN * math.log(COPY_SYMBOLS) / self.seq_len,
        }


class AddingTask(Task):
    """The adding problem (TCN suite): the sum of the two marked values of ``task.length``
    steps; the loss is the mean squared error (predicting 1 scores about 0.167)."""

    name = "adding"

    def __init__(self, config: Config, device: torch.device) -> None:
        super().__init__(config, device)
        self.length = config.task.length
        check_max_len(config, self.length, "an adding-problem sequence")
        n = self._eval_count(self.length)
        self.eval_sets = {
            split: adding_problem_batch(
                n, self.length, torch.Generator().manual_seed(config.train.seed + offset)
            )
            for split, offset in (("valid", 1), ("test", 2))
        }

    @staticmethod
    def build_model(config: Config) -> nn.Module:
        return build_sequence_model(config, 2, 1, "pooled")

    def train_batches(self) -> Iterator[Batch]:
        while True:
            yield adding_problem_batch(self.config.data.batch_size, self.length, self.generator)

    def loss(self, model: nn.Module, batch: Batch) -> tuple[Tensor, int]:
        x, y = batch[0].to(self.device), batch[1].to(self.device)
        return F.mse_loss(model(x).float().squeeze(-1), y), y.numel()

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        x_all, y_all = self.eval_sets[split]
        total, size = 0.0, self.config.data.eval_batch_size
        for start in range(0, len(x_all), size):
            x = x_all[start : start + size].to(self.device)
            y = y_all[start : start + size].to(self.device)
            total += float(F.mse_loss(model(x).float().squeeze(-1), y, reduction="sum"))
        mse = total / len(x_all)
        return {"loss": mse, "mse": mse}


# --------------------------------------------------------------------------- seq2seq


class Seq2SeqTask(Task):
    """Toy translation (reverse and substitute, :mod:`~highway_transformer.data.seq2seq`)
    with the encoder-decoder; sources have 1..``task.length`` symbols (at least 3 where
    possible). Training pairs are drawn afresh each step; valid and test are fixed sets.
    Decoding is greedy, or beam search for ``task.beam_size > 1``."""

    name = "seq2seq"

    def __init__(self, config: Config, device: torch.device) -> None:
        super().__init__(config, device)
        self.src_vocab, self.tgt_vocab = s2s.toy_vocabs()
        self.longest = config.task.length
        if self.longest < 1:
            raise ConfigError(f"task.length (longest toy source) must be >= 1, got {self.longest}")
        self.shortest = min(3, self.longest)
        check_max_len(config, self.longest + 1, "a toy sentence with its <bos>/<eos>")
        self.step = 0
        n = self._eval_count(self.longest + 1)
        seed = config.train.seed
        self.eval_sets = {
            split: s2s.toy_batch(
                s2s.make_toy_pairs(n, self.shortest, self.longest, seed=seed + offset),
                self.src_vocab,
                self.tgt_vocab,
            )
            for split, offset in (("valid", 1_000_001), ("test", 2_000_003))
        }

    @staticmethod
    def build_model(config: Config) -> nn.Module:
        src_vocab, tgt_vocab = s2s.toy_vocabs()
        return EncoderDecoder(
            config.model,
            len(src_vocab),
            len(tgt_vocab),
            score=config.task.score,
            max_len=config.task.max_len,
            pad_id=s2s.PAD_ID,
            bos_id=s2s.BOS_ID,
            eos_id=s2s.EOS_ID,
        )

    def train_batches(self) -> Iterator[Batch]:
        seed = self.config.train.seed
        while True:
            self.step += 1
            pairs = s2s.make_toy_pairs(
                self.config.data.batch_size,
                self.shortest,
                self.longest,
                seed=seed * 1_000_003 + self.step,
            )
            yield s2s.toy_batch(pairs, self.src_vocab, self.tgt_vocab)

    def loss(self, model: nn.Module, batch: Batch) -> tuple[Tensor, int]:
        src, tgt_in, tgt_out = (batch[k].to(self.device) for k in ("src", "tgt_in", "tgt_out"))
        nll = model.token_nll(model(src, tgt_in), tgt_out)
        count = int((tgt_out != s2s.PAD_ID).sum())
        return nll.sum() / max(count, 1), count

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        data = self.eval_sets[split]
        size, beam = self.config.data.eval_batch_size, self.config.task.beam_size
        total, count, n = 0.0, 0, len(data["src"])
        token_hits, exact_hits = 0.0, 0.0
        for start in range(0, n, size):
            src, tgt_in, tgt_out = (
                data[k][start : start + size].to(self.device) for k in ("src", "tgt_in", "tgt_out")
            )
            tgt_in, tgt_out = _trim(tgt_in), _trim(tgt_out)
            src = _trim(src)
            real = int((tgt_out != s2s.PAD_ID).sum())
            total += float(model.token_nll(model(src, tgt_in), tgt_out).sum())
            count += real
            pred = model.decode_batch(src, beam_size=beam)
            token_hits += s2s.token_accuracy(pred, tgt_out) * real
            exact_hits += s2s.exact_match(pred, tgt_out) * len(src)
        return {
            "loss": total / max(count, 1),
            "token_accuracy": token_hits / max(count, 1),
            "exact_match": exact_hits / max(n, 1),
        }


def _trim(ids: Tensor) -> Tensor:
    """Drop trailing all-padding columns of a slice of a padded batch."""
    real = (ids != s2s.PAD_ID).any(dim=0).nonzero()
    return ids[:, : int(real.max()) + 1] if len(real) else ids


TASKS: dict[str, type[Task]] = {
    task.name: task for task in (MusicTask, PixelsTask, CopyTask, AddingTask, Seq2SeqTask)
}


def task_class(name: str) -> type[Task]:
    if name not in TASKS:
        raise unknown_choice("task (task.name)", name, [*TASKS, "lm"])
    return TASKS[name]


def build_task_model(config: Config) -> nn.Module:
    """The model of ``config.task.name`` (no data needed): for loading a checkpoint."""
    model = task_class(config.task.name).build_model(config)
    assert isinstance(model, SequenceModel | EncoderDecoder)
    return model
