"""Trivial n-gram baselines of a corpus: the losses a language model must beat.

A reproduction means something only where the models learn more than symbol frequencies
and short contexts: a "converged" Transformer at a bigram model's loss has learned nothing
a count table does not hold. The baselines are estimated on the training split and score
every token of a validation/test stream (a token with a shorter history than the order
by the lower orders):

* **unigram**: ``P(w) = (c(w) + 1) / (N + V)`` (add-one, so unseen symbols keep a mass);
* **bigram, trigram**: interpolated absolute discounting (Ney, Essen & Kneser 1994), each
  order backing off to the one below, ``P(w | h) = max(c(h, w) - d, 0) / c(h)
  + d · N₁₊(h ·) / c(h) · P(w | h')`` with ``d = 0.75`` and ``h'`` the history without its
  oldest symbol; a history never seen in training uses ``P(w | h')``.

Losses are mean negative log-likelihoods in nats per token, like the trainer's.
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError

DISCOUNT = 0.75
ORDERS = {"unigram": 1, "bigram": 2, "trigram": 3}


def _ids(tokens: object) -> np.ndarray:
    return np.asarray(tokens, dtype=np.int64).reshape(-1)


def _keys(ids: np.ndarray, order: int, vocab_size: int) -> np.ndarray:
    """One int64 key per window of ``order`` consecutive ids (base-``vocab_size`` digits)."""
    windows = np.lib.stride_tricks.sliding_window_view(ids, order)
    keys = np.zeros(len(windows), dtype=np.int64)
    for column in range(order):
        keys = keys * vocab_size + windows[:, column]
    return keys


def _counts_of(table: tuple[np.ndarray, np.ndarray], wanted: np.ndarray) -> np.ndarray:
    """Counts of ``wanted`` keys in a sorted (keys, counts) table; 0 where absent."""
    keys, counts = table
    if len(keys) == 0:
        return np.zeros(len(wanted))
    at = np.clip(np.searchsorted(keys, wanted), 0, len(keys) - 1)
    return np.where(keys[at] == wanted, counts[at], 0).astype(np.float64)


def ngram_probabilities(
    train: object, target: object, vocab_size: int, order: int, discount: float = DISCOUNT
) -> np.ndarray:
    """``P(target[i] | target[i-order+1 : i])`` for every token of ``target`` under the
    interpolated model of ``train`` (see the module docstring)."""
    train, target = _ids(train), _ids(target)
    if order < 1 or vocab_size**order >= 2**63:
        raise ConfigError(f"n-gram order {order} is out of range for {vocab_size} symbols")
    counts = np.bincount(train, minlength=vocab_size).astype(np.float64)
    p = ((counts + 1.0) / (counts.sum() + vocab_size))[target]
    for k in range(2, min(order, len(target), len(train)) + 1):
        grams = _keys(train, k, vocab_size)
        gram_table = np.unique(grams, return_counts=True)
        history_table = np.unique(grams // vocab_size, return_counts=True)  # c(h ·)
        follower_table = np.unique(gram_table[0] // vocab_size, return_counts=True)  # N₁₊(h ·)
        wanted = _keys(target, k, vocab_size)
        history = wanted // vocab_size
        c_hw = _counts_of(gram_table, wanted)
        c_h = _counts_of(history_table, history)
        followers = _counts_of(follower_table, history)
        lower = p[k - 1 :]
        safe = np.where(c_h > 0, c_h, 1.0)
        mixed = np.maximum(c_hw - discount, 0.0) / safe + discount * followers / safe * lower
        p[k - 1 :] = np.where(c_h > 0, mixed, lower)
    return p


def ngram_nll(train: object, target: object, vocab_size: int, order: int) -> float:
    """Mean NLL (nats) of ``target`` under the order-``order`` model of ``train``."""
    return float(-np.log(ngram_probabilities(train, target, vocab_size, order)).mean())


def corpus_baselines(
    train: object, splits: dict[str, object], vocab_size: int
) -> dict[str, dict[str, float]]:
    """``{"unigram" | "bigram" | "trigram": {split: nats}}`` for every split given."""
    return {
        name: {split: ngram_nll(train, ids, vocab_size, order) for split, ids in splits.items()}
        for name, order in ORDERS.items()
    }
