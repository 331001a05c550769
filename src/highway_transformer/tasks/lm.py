"""Language modelling: next-token prediction over a corpus stream (HT, Transformer-XL).

Training walks the windows of ``data.batch_size x train.accumulate`` contiguous rows in
order, carrying the Transformer-XL memory from window to window (reset at the start of each
pass); the position and the memory are the task's state, so a resumed run continues the same
stream. With several processes rank r trains its contiguous block of those rows, with its own
memory rows; checkpoints hold every row's memory in stream order, so any process count that
divides the batch resumes them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import Tensor, nn

from ..config import Config
from ..data.baselines import ORDERS, corpus_baselines, ngram_nll
from ..data.batching import train_rows, window_bounds
from ..data.corpora import COUNTED_VOCABULARIES, Corpus, load_corpus
from ..data.vocab import Vocabulary, read_vocab
from ..errors import CheckpointError, ConfigError
from ..models.families import uses_memory
from ..models.lm import LanguageModel
from ..models.resources import check_resources
from ..runtime.world import World
from ..storage.folder import VOCAB_FILE
from .base import Batch, Task, TaskState
from .lm_scoring import evaluate


class LMTask(Task):
    """Language modelling of ``data.corpus``; metrics in nats, bits per token (``bpc``, named by
    the vocabulary level where a person reads it: :mod:`~highway_transformer.data.levels`),
    perplexity."""

    name = "lm"
    metrics = {"loss": "lower", "bpc": "lower", "ppl": "lower"}
    headline = "bpc"
    supports_memory = True
    eval_unit = "token"

    def __init__(self, config: Config, device: torch.device, corpus: Corpus | None = None) -> None:
        self.corpus = corpus if corpus is not None else load_corpus(config.data, download=True)
        size = len(self.corpus.vocab)
        if not config.model.vocab_size:  # a copy: the caller's validated config stays as it is
            config = config.replace(**{"model.vocab_size": size})
        elif config.model.vocab_size != size:
            raise ConfigError(
                f"model.vocab_size={config.model.vocab_size} but the corpus has "
                f"{size} symbols; leave vocab_size at 0 to take it from the data"
            )
        super().__init__(config, device)
        # impossible sizes fail here, in seconds, with the estimate in the message
        check_resources(config, self.corpus.train.numel(), device)
        self.position = 0  # windows drawn so far
        self._layout()

    def _layout(self) -> None:
        """This rank's rows of the stream; micro-batch k is the k-th slice of them."""
        data, t = self.config.data, self.config.train
        rows = data.batch_size * t.accumulate
        inputs, targets = train_rows(self.corpus.train, rows, data.seq_len)
        mine = self.world.rows(rows)
        self.inputs, self.targets = inputs[mine], targets[mine]
        if t.pin_memory:  # page-locked rows: host-to-device copies overlap with compute
            self.inputs, self.targets = self.inputs.pin_memory(), self.targets.pin_memory()
        self.micro_rows = data.batch_size // self.world.size
        memory = uses_memory(self.config.model)
        self.bounds = window_bounds(self.inputs.shape[1], data.seq_len, data.context, memory)
        # per micro-batch, per layer [rows, M, D]
        self.memory: list[list[Tensor] | None] = [None] * t.accumulate

    def shard(self, world: World) -> None:
        super().shard(world)
        self._layout()

    @classmethod
    def for_checkpoint(cls, config: Config, device: torch.device, folder: Path) -> LMTask:
        vocab = read_vocab(folder, config.model.vocab_size)  # verified, and the model's
        return cls(config, device, load_corpus(config.data, vocab=vocab, download=False))

    @property
    def vocab(self) -> Vocabulary:
        return self.corpus.vocab

    @property
    def level(self) -> str:
        return self.vocab.level

    @staticmethod
    def build_model(config: Config) -> nn.Module:
        return LanguageModel(config.model)

    def train_batches(self) -> Iterator[Batch]:
        """This rank's micro-batches of each window, ``train.accumulate`` per window."""
        while True:
            index = self.position % len(self.bounds)
            if index == 0:  # a new pass over the stream starts without memory
                self.memory = [None] * len(self.memory)
            self.position += 1
            start, end, loss_start = self.bounds[index]
            for k in range(len(self.memory)):
                rows = slice(k * self.micro_rows, (k + 1) * self.micro_rows)
                x, y = self.inputs[rows, start:end], self.targets[rows, start + loss_start : end]
                yield x, y, loss_start, k

    def local_batches(self) -> Iterator[Batch]:
        return self.train_batches()  # the layout holds this rank's rows only

    def loss(self, model: nn.Module, batch: Batch) -> tuple[Tensor, int]:
        x, y, _, k = batch
        # a cached corpus holds uint16/uint32 ids: this window becomes int64 on the host
        # (no-op for int64), where every torch build converts unsigned types
        x = x.long().to(self.device, non_blocking=True)
        y = y.long().to(self.device, non_blocking=True)  # the targets of the last positions
        loss, _, self.memory[k] = model(x, memory=self.memory[k], targets=y, reduction="sum")
        return loss, y.numel()  # training rows are never padded: no device sync to count

    def evaluate(self, model: nn.Module, split: str, quick: bool = False) -> dict[str, float]:
        assert isinstance(model, LanguageModel)
        t = self.config.train
        cap = t.eval_max_tokens if quick else None
        ids = self.corpus.split(split)
        data, progress = self.config.data, self.eval_progress
        result = evaluate(
            model, ids, data, self.device, t.precision, cap, self.world, progress=progress
        )
        return result.as_dict()

    def loss_metrics(self, loss: float) -> dict[str, float]:
        return {"bpc": loss / math.log(2), "ppl": math.exp(min(loss, 700.0))}

    def baselines(self) -> dict[str, dict[str, dict[str, float]]]:
        """Add-one unigram and interpolated bigram / trigram models of the corpus."""
        splits = {"valid": self.corpus.valid, "test": self.corpus.test}
        found = corpus_baselines(self.corpus.train, splits, len(self.corpus.vocab))
        return {
            model: {split: {"loss": nats, **self.loss_metrics(nats)} for split, nats in by.items()}
            for model, by in found.items()
        }

    def trivial_losses(self, split: str) -> dict[str, float]:
        """The add-one unigram and interpolated bigram models of the training split."""
        target, vocab_size = self.corpus.split(split), len(self.corpus.vocab)
        return {
            name: ngram_nll(self.corpus.train, target, vocab_size, ORDERS[name])
            for name in ("unigram", "bigram")
        }

    def state_dict(self) -> TaskState:
        """Position and every row's memory in stream order (every rank joins the gather)."""
        state = super().state_dict()
        memory = self._global_memory()
        state.update(position=self.position, memory_layers=len(memory))
        state.update({f"memory.{i}": m for i, m in enumerate(memory)})
        return state

    def load_state_dict(self, state: TaskState) -> None:
        super().load_state_dict(state)
        self.position = int(state["position"])
        memory = [state[f"memory.{i}"] for i in range(int(state["memory_layers"]))]
        if memory:
            mine = [m[self.world.rows(m.shape[0])].to(self.device) for m in memory]
            self.memory = [
                [m[k * self.micro_rows : (k + 1) * self.micro_rows] for m in mine]
                for k in range(len(self.memory))
            ]

    def _global_memory(self) -> list[Tensor]:
        """Per layer, the memory rows of every micro-batch and rank, in stream order."""
        if any(part is None for part in self.memory):
            return []
        layers = zip(*self.memory, strict=True)
        return [self.world.all_gather_rows(torch.cat(parts)) for parts in layers]

    def write_checkpoint_files(self, folder: Path) -> None:
        self.vocab.save(folder / VOCAB_FILE)

    def check_checkpoint(self, folder: Path) -> None:
        saved = read_vocab(folder)  # verified against the manifest
        if saved != self.vocab:
            # runs saved before data.vocab_splits existed counted the training split only
            counted = self.config.data.corpus in COUNTED_VOCABULARIES
            hint = " (an older run of this corpus: data.vocab_splits=train)" if counted else ""
            raise CheckpointError(
                f"the checkpoint in {folder.parent} was trained with another vocabulary "
                f"({len(saved)} vs {len(self.vocab)} symbols); resume with the same corpus"
                f"{hint} or use a new --out folder"
            )
