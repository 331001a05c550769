"""Trivial baselines: the losses a model must beat (language models, music, digit classes).

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

Polyphonic music (88 independent Bernoulli notes a step; NLL per step summed over the notes,
scored on steps 1..T-1 of each piece like the task), with add-one estimates from the training
pieces:

* **frequency**: each note on with its training frequency, whatever came before;
* **previous step**: each note on with ``P(on | that note on / off at the step before)``
  (a first-order Markov chain per note: the music analogue of a bigram).

Classification (pixel images): **class prior**: every example gets the training split's
class frequencies (add-one); its accuracy is the majority class's share. The raw-pixel
classifiers beside it (1-nearest neighbour, logistic regression) are in :mod:`.classifiers`.
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


def _bernoulli_nll(p_on: np.ndarray, notes: np.ndarray) -> np.ndarray:
    """NLL per step (summed over notes) of 0/1 ``notes [T, 88]`` under ``p_on`` (broadcast)."""
    return -(notes * np.log(p_on) + (1.0 - notes) * np.log1p(-p_on)).sum(-1)


def music_baselines(
    train: list[np.ndarray], splits: dict[str, list[np.ndarray]]
) -> dict[str, dict[str, float]]:
    """``{"frequency" | "previous step": {split: NLL per step}}`` of piano rolls ``[T, 88]``."""
    rolls = [np.asarray(p, dtype=np.float64) for p in train]
    steps = np.concatenate(rolls)
    p_on = (steps.sum(0) + 1.0) / (len(steps) + 2.0)
    prev = np.concatenate([r[:-1] for r in rolls])
    cur = np.concatenate([r[1:] for r in rolls])
    # P(on | previous on) and P(on | previous off), per note, add-one
    after_on = ((prev * cur).sum(0) + 1.0) / (prev.sum(0) + 2.0)
    after_off = (((1 - prev) * cur).sum(0) + 1.0) / ((1 - prev).sum(0) + 2.0)
    found: dict[str, dict[str, float]] = {"frequency": {}, "previous step": {}}
    for split, pieces in splits.items():
        scored = [np.asarray(p, dtype=np.float64) for p in pieces if len(p) > 1]
        if not scored:
            raise ConfigError(f"the {split} split has no piece longer than one step")
        before = np.concatenate([r[:-1] for r in scored])
        after = np.concatenate([r[1:] for r in scored])
        found["frequency"][split] = float(_bernoulli_nll(p_on, after).mean())
        markov = np.where(before > 0.5, after_on, after_off)
        found["previous step"][split] = float(_bernoulli_nll(markov, after).mean())
    return found


def class_prior_baselines(
    train_labels: object, splits: dict[str, object], n_classes: int
) -> dict[str, dict[str, dict[str, float]]]:
    """``{"class prior": {split: {"loss": nats, "accuracy": fraction}}}``: the training split's
    class frequencies (add-one) as every example's prediction."""
    counts = np.bincount(_ids(train_labels), minlength=n_classes).astype(np.float64)
    prior = (counts + 1.0) / (counts.sum() + n_classes)
    majority = int(np.argmax(counts))
    found = {}
    for split, labels in splits.items():
        y = _ids(labels)
        found[split] = {
            "loss": float(-np.log(prior[y]).mean()),
            "accuracy": float((y == majority).mean()),
        }
    return {"class prior": found}
