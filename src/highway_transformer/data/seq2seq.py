"""A toy translation task for encoder-decoder models; needs no download.

The "language pair" is a fixed rule: a source sentence is a string over the lower-case
alphabet ``a..j``; its translation is the string reversed, each letter replaced through a
fixed substitution table into upper-case letters (``a->Q``, ``b->W`` ...). Reversal makes
the decoder attend across the whole source (the first target word depends on the last
source word), as in the reversal task of Sutskever et al. (2014); the substitution makes
the two vocabularies differ. A one- or two-layer encoder-decoder learns it in about a minute
on a CPU.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import Tensor

from ..errors import ConfigError, DataError

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
SPECIALS = (PAD, BOS, EOS)

SOURCE_ALPHABET = "abcdefghij"
TARGET_ALPHABET = "QWERTYUIOP"
SUBSTITUTION: dict[str, str] = dict(zip(SOURCE_ALPHABET, TARGET_ALPHABET, strict=True))


@dataclass
class Seq2SeqVocab:
    """Symbols with the special tokens ``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2 first."""

    pad_id: ClassVar[int] = PAD_ID
    bos_id: ClassVar[int] = BOS_ID
    eos_id: ClassVar[int] = EOS_ID

    symbols: tuple[str, ...]
    itos: list[str] = field(init=False)
    stoi: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.symbols = tuple(self.symbols)
        self.itos = list(SPECIALS) + [s for s in self.symbols if s not in SPECIALS]
        if len(set(self.itos)) != len(self.itos):
            raise ConfigError("vocabulary symbols must be distinct; remove the duplicates")
        self.stoi = {s: i for i, s in enumerate(self.itos)}

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, tokens: Iterable[str], bos: bool = False, eos: bool = False) -> list[int]:
        """Token ids of ``tokens`` (a string is split into characters)."""
        ids = []
        for token in tokens:
            if token not in self.stoi:
                raise DataError(
                    f"symbol {token!r} is not in the vocabulary; use only "
                    f"{''.join(self.itos[len(SPECIALS) :])}"
                )
            ids.append(self.stoi[token])
        return ([BOS_ID] if bos else []) + ids + ([EOS_ID] if eos else [])

    def decode(self, ids: Iterable[int]) -> str:
        """The string for ``ids``, stopping at ``<eos>`` and skipping ``<pad>``/``<bos>``."""
        out = []
        for i in ids:
            i = int(i)
            if i == EOS_ID:
                break
            if i in (PAD_ID, BOS_ID):
                continue
            out.append(self.itos[i])
        return "".join(out)


def toy_vocabs() -> tuple[Seq2SeqVocab, Seq2SeqVocab]:
    """The source and target vocabularies of the toy task (13 ids each)."""
    return Seq2SeqVocab(tuple(SOURCE_ALPHABET)), Seq2SeqVocab(tuple(TARGET_ALPHABET))


def translate(source: str) -> str:
    """The rule: reverse ``source`` and map each letter through :data:`SUBSTITUTION`."""
    try:
        return "".join(SUBSTITUTION[c] for c in reversed(source))
    except KeyError as exc:
        raise DataError(
            f"source symbol {exc.args[0]!r} is outside the alphabet {SOURCE_ALPHABET}"
        ) from exc


def make_toy_pairs(
    n: int, min_len: int = 3, max_len: int = 10, seed: int = 0
) -> list[tuple[str, str]]:
    """``n`` seeded (source, target) pairs with source lengths in ``[min_len, max_len]``."""
    if n < 0 or min_len < 1 or max_len < min_len:
        raise ConfigError(
            f"need n >= 0 and 1 <= min_len <= max_len, got n={n}, min_len={min_len}, "
            f"max_len={max_len}"
        )
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        source = "".join(rng.choices(SOURCE_ALPHABET, k=rng.randint(min_len, max_len)))
        pairs.append((source, translate(source)))
    return pairs


def pad_batch(sequences: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> tuple[Tensor, Tensor]:
    """Right-pad id sequences: ``(LongTensor [B, T_max], lengths LongTensor [B])``."""
    if len(sequences) == 0:
        raise DataError("pad_batch got no sequences; pass at least one")
    lengths = torch.tensor([len(s) for s in sequences], dtype=torch.int64)
    batch = torch.full((len(sequences), int(lengths.max())), pad_id, dtype=torch.int64)
    for b, seq in enumerate(sequences):
        if len(seq):
            batch[b, : len(seq)] = torch.as_tensor(list(seq), dtype=torch.int64)
    return batch, lengths


def toy_batch(
    pairs: Sequence[tuple[str, str]],
    src_vocab: Seq2SeqVocab,
    tgt_vocab: Seq2SeqVocab,
) -> dict[str, Tensor]:
    """Tensors for teacher forcing: ``src`` (ends with ``<eos>``), ``src_lengths``,
    ``tgt_in`` (``<bos>`` + target) and ``tgt_out`` (target + ``<eos>``), all padded."""
    src, src_lengths = pad_batch([src_vocab.encode(s, eos=True) for s, _ in pairs])
    tgt_in, _ = pad_batch([tgt_vocab.encode(t, bos=True) for _, t in pairs])
    tgt_out, _ = pad_batch([tgt_vocab.encode(t, eos=True) for _, t in pairs])
    return {"src": src, "src_lengths": src_lengths, "tgt_in": tgt_in, "tgt_out": tgt_out}


def _align(pred: Tensor, target: Tensor, pad_id: int) -> tuple[Tensor, Tensor]:
    """Pad the shorter of two ``[B, T]`` id tensors with ``pad_id`` to a common width."""
    if pred.dim() != 2 or target.dim() != 2 or pred.shape[0] != target.shape[0]:
        raise DataError(
            f"pred {tuple(pred.shape)} and target {tuple(target.shape)} must be [B, T] "
            "with the same batch size"
        )
    width = max(pred.shape[1], target.shape[1])
    pred = torch.nn.functional.pad(pred, (0, width - pred.shape[1]), value=pad_id)
    target = torch.nn.functional.pad(target, (0, width - target.shape[1]), value=pad_id)
    return pred, target


def token_accuracy(pred: Tensor, target: Tensor, pad_id: int = PAD_ID) -> float:
    """Share of non-pad target positions where ``pred`` has the same id.

    Widths may differ: the shorter tensor is padded with ``pad_id``.
    """
    pred, target = _align(pred, target, pad_id)
    real = target != pad_id
    if not bool(real.any()):
        raise DataError("target holds only padding; nothing to score")
    return float(((pred == target) & real).sum().item() / real.sum().item())


def exact_match(pred: Tensor, target: Tensor, pad_id: int = PAD_ID) -> float:
    """Share of rows whose prediction equals the target exactly, padding included.

    A prediction must be padded with ``pad_id`` after its end (as :func:`pad_batch` does):
    extra tokens beyond the target's end make the row wrong.
    """
    pred, target = _align(pred, target, pad_id)
    return float((pred == target).all(dim=1).double().mean().item())
