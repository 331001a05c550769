"""Toy translation (reverse and substitute, :mod:`~highway_transformer.data.seq2seq`) with
the encoder-decoder."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator

import torch
from torch import Tensor, nn

from ..config import Config
from ..data import seq2seq as s2s
from ..errors import ConfigError
from ..models.encoder_decoder import EncoderDecoder
from .base import Batch, Task, TaskState, check_max_len
from .synthetic import eval_count

#: Seed offsets of the fixed evaluation sets (far from the training draws).
EVAL_SEEDS = {"valid": 1_000_001, "test": 2_000_003}
#: Seed offset and number of the draws the trivial model's counts are taken from.
BLIND_SEED, BLIND_PAIRS = 3_000_007, 4096


def _trim(ids: Tensor) -> Tensor:
    """Drop trailing all-padding columns of a slice of a padded batch."""
    real = (ids != s2s.PAD_ID).any(dim=0).nonzero()
    return ids[:, : int(real.max()) + 1] if len(real) else ids


class Seq2SeqTask(Task):
    """Sources have 1..``task.length`` symbols (at least 3 where possible). Training pairs
    are drawn afresh each step; valid and test are fixed sets. Decoding is greedy, or beam
    search for ``task.beam_size > 1``; metrics: cross-entropy, token accuracy, exact match."""

    name = "seq2seq"
    metrics = {"loss": "lower", "token_accuracy": "higher", "exact_match": "higher"}
    headline = "exact_match"

    def __init__(self, config: Config, device: torch.device) -> None:
        super().__init__(config, device)
        self.src_vocab, self.tgt_vocab = s2s.toy_vocabs()
        self.longest = config.task.length
        if self.longest < 1:
            raise ConfigError(f"task.length (longest toy source) must be >= 1, got {self.longest}")
        self.shortest = min(3, self.longest)
        check_max_len(config, self.longest + 1, "a toy sentence with its <bos>/<eos>")
        self.drawn = 0  # training batches drawn so far
        n = eval_count(config, self.longest + 1)
        seed = config.train.seed
        self.eval_sets = {
            split: s2s.toy_batch(
                s2s.make_toy_pairs(n, self.shortest, self.longest, seed=seed + offset),
                self.src_vocab,
                self.tgt_vocab,
            )
            for split, offset in EVAL_SEEDS.items()
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
            self.drawn += 1
            pairs = s2s.make_toy_pairs(
                self.config.data.batch_size,
                self.shortest,
                self.longest,
                seed=seed * 1_000_003 + self.drawn,
            )
            yield s2s.toy_batch(pairs, self.src_vocab, self.tgt_vocab)

    def loss(self, model: nn.Module, batch: Batch) -> tuple[Tensor, int]:
        src, tgt_in, tgt_out = (batch[k].to(self.device) for k in ("src", "tgt_in", "tgt_out"))
        return model(src, tgt_in, targets=tgt_out), int((tgt_out != s2s.PAD_ID).sum())

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str, quick: bool = False) -> dict[str, float]:
        data = self.eval_sets[split]
        beam = self.config.task.beam_size
        total, count, n = 0.0, 0, len(data["src"])
        token_hits, exact_hits = 0.0, 0.0
        for rows in self.scored_slices(n):  # this rank's share, summed over ranks below
            src, tgt_in, tgt_out = (
                _trim(data[k][rows].to(self.device)) for k in ("src", "tgt_in", "tgt_out")
            )
            real = int((tgt_out != s2s.PAD_ID).sum())
            total += float(model(src, tgt_in, targets=tgt_out))
            count += real
            pred = model.decode_batch(src, beam_size=beam)
            token_hits += s2s.token_accuracy(pred, tgt_out) * real
            exact_hits += s2s.exact_match(pred, tgt_out) * len(src)
        sums = [total, count, token_hits, exact_hits]
        total, count, token_hits, exact_hits = self.world.all_reduce_sum(sums)
        return {
            "loss": total / max(count, 1),
            "token_accuracy": token_hits / max(count, 1),
            "exact_match": exact_hits / max(n, 1),
        }

    def trivial_losses(self, split: str) -> dict[str, float]:
        """The best decoder that ignores its source: it knows the target language alone,
        each letter at its frequency and ``<eos>`` at the chance that a target of the letters
        so far ends there, both counted (add-one) over fresh training draws."""
        counted = s2s.make_toy_pairs(
            BLIND_PAIRS, self.shortest, self.longest, seed=self.config.train.seed + BLIND_SEED
        )
        letters = Counter(c for _, target in counted for c in target)
        lengths = Counter(len(target) for _, target in counted)
        letter_nll = {
            c: -math.log((letters[c] + 1) / (letters.total() + len(s2s.TARGET_ALPHABET)))
            for c in s2s.TARGET_ALPHABET
        }
        at_least = [
            sum(lengths[n] + 1 for n in range(t, self.longest + 1)) for t in range(self.longest + 1)
        ]
        ends = [(lengths[t] + 1) / at_least[t] for t in range(self.longest + 1)]
        total, count = 0.0, 0
        for ids in self.eval_sets[split]["tgt_out"].tolist():
            target = self.tgt_vocab.decode(ids)
            for t, c in enumerate(target):
                total += letter_nll[c] - math.log(1 - ends[t])
            total -= math.log(ends[len(target)])
            count += len(target) + 1
        return {"source-blind decoder": total / count}

    def state_dict(self) -> TaskState:
        return {**super().state_dict(), "drawn": self.drawn}

    def load_state_dict(self, state: TaskState) -> None:
        super().load_state_dict(state)
        self.drawn = int(state["drawn"])
