"""Language modelling: next-token prediction over a corpus stream (HT, Transformer-XL).

Training walks the windows of ``data.batch_size`` contiguous rows in order, carrying the
Transformer-XL memory from window to window (reset at the start of each pass); the position
and the memory are the task's state, so a resumed run continues the same stream.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import Tensor, nn

from ..config import Config
from ..data.batching import train_rows, window_bounds
from ..data.corpora import Corpus, load_corpus
from ..data.vocab import Vocabulary
from ..errors import CheckpointError, ConfigError
from ..evaluate import evaluate
from ..models.lm import LanguageModel, build_model
from .base import Batch, Task, TaskState

VOCAB_FILE = "vocab.json"


class LMTask(Task):
    """Language modelling of ``data.corpus``; metrics in nats, bits per token, perplexity."""

    name = "lm"
    metrics = {"loss": "lower", "bpc": "lower", "ppl": "lower"}
    headline = "bpc"
    supports_memory = True

    def __init__(self, config: Config, device: torch.device, corpus: Corpus | None = None) -> None:
        super().__init__(config, device)
        self.corpus = corpus if corpus is not None else load_corpus(config.data, download=True)
        if not config.model.vocab_size:
            config.model.vocab_size = len(self.corpus.vocab)
        elif config.model.vocab_size != len(self.corpus.vocab):
            raise ConfigError(
                f"model.vocab_size={config.model.vocab_size} but the corpus has "
                f"{len(self.corpus.vocab)} symbols; leave vocab_size at 0 to take it from the data"
            )
        data = config.data
        self.inputs, self.targets = train_rows(self.corpus.train, data.batch_size, data.seq_len)
        self.bounds = window_bounds(self.inputs.shape[1], data.seq_len, data.context)
        self.position = 0  # windows drawn so far
        self.memory: list[Tensor] | None = None

    @classmethod
    def for_checkpoint(cls, config: Config, device: torch.device, folder: Path) -> LMTask:
        vocab = Vocabulary.load(folder / VOCAB_FILE)
        return cls(config, device, load_corpus(config.data, vocab=vocab, download=False))

    @property
    def vocab(self) -> Vocabulary:
        return self.corpus.vocab

    @staticmethod
    def build_model(config: Config) -> nn.Module:
        return build_model(config.model)

    def train_batches(self) -> Iterator[Batch]:
        while True:
            index = self.position % len(self.bounds)
            if index == 0:
                self.memory = None  # a new pass over the stream starts without memory
            self.position += 1
            start, end, loss_start = self.bounds[index]
            yield self.inputs[:, start:end], self.targets[:, start + loss_start : end], loss_start

    def loss(self, model: nn.Module, batch: Batch) -> tuple[Tensor, int]:
        x, y, loss_start = batch
        hidden, self.memory = model(x.to(self.device, non_blocking=True), memory=self.memory)
        nll = model.token_nll(hidden[:, loss_start:], y.to(self.device, non_blocking=True))
        return nll.sum(), y.numel()  # training rows are never padded: no device sync to count

    def evaluate(self, model: nn.Module, split: str, quick: bool = False) -> dict[str, float]:
        assert isinstance(model, LanguageModel)
        t = self.config.train
        cap = t.eval_max_tokens if quick else None
        ids = self.corpus.split(split)
        result = evaluate(model, ids, self.config.data, self.device, t.precision, max_tokens=cap)
        return result.as_dict()

    def loss_metrics(self, loss: float) -> dict[str, float]:
        return {"bpc": loss / math.log(2), "ppl": math.exp(min(loss, 700.0))}

    def state_dict(self) -> TaskState:
        state = super().state_dict()
        state.update(position=self.position, memory_layers=len(self.memory or []))
        for i, m in enumerate(self.memory or []):
            state[f"memory.{i}"] = m.detach()
        return state

    def load_state_dict(self, state: TaskState) -> None:
        super().load_state_dict(state)
        self.position = int(state["position"])
        layers = int(state["memory_layers"])
        memory = [state[f"memory.{i}"].to(self.device) for i in range(layers)]
        self.memory = memory or None

    def write_checkpoint_files(self, folder: Path) -> None:
        self.vocab.save(folder / VOCAB_FILE)

    def check_checkpoint(self, folder: Path) -> None:
        saved = Vocabulary.load(folder / VOCAB_FILE)
        if saved != self.vocab:
            raise CheckpointError(
                f"the checkpoint in {folder.parent} was trained with another vocabulary "
                f"({len(saved)} vs {len(self.vocab)} symbols); resume with the same corpus"
                " or use a new --out folder"
            )
