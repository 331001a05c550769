"""n-gram baselines (data/baselines.py) against a plain-Python oracle."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from highway_transformer import cli
from highway_transformer.data.baselines import DISCOUNT, corpus_baselines, ngram_probabilities


def oracle_probability(train: list[int], history: tuple[int, ...], w: int, v: int) -> float:
    """The interpolated absolute-discounting model, written out one history at a time."""
    if not history:
        counts = Counter(train)
        return (counts[w] + 1) / (len(train) + v)
    k = len(history) + 1
    grams = Counter(tuple(train[i : i + k]) for i in range(len(train) - k + 1))
    c_h = sum(c for g, c in grams.items() if g[:-1] == history)
    lower = oracle_probability(train, history[1:], w, v)
    if c_h == 0:
        return lower
    followers = sum(1 for g in grams if g[:-1] == history)
    return max(grams[(*history, w)] - DISCOUNT, 0) / c_h + DISCOUNT * followers / c_h * lower


@pytest.mark.parametrize("order", [1, 2, 3])
def test_probabilities_equal_the_oracle(order: int) -> None:
    rng = np.random.default_rng(order)
    v = 6
    train = rng.integers(0, v - 1, 60).tolist()  # symbol 5 never occurs in training
    target = rng.integers(0, v, 25).tolist()
    got = ngram_probabilities(train, target, v, order)
    for i, w in enumerate(target):
        history = tuple(target[max(0, i - order + 1) : i])
        assert got[i] == pytest.approx(oracle_probability(train, history, w, v), rel=1e-12)


@pytest.mark.parametrize("history", [(0, 1), (4, 4), (5, 5), (2,)])
def test_every_history_gives_a_distribution(history: tuple[int, ...]) -> None:
    """Seen, unseen and unknown-symbol histories: P(· | h) sums to 1 over the vocabulary."""
    rng = np.random.default_rng(0)
    v = 6
    train = rng.integers(0, v - 1, 80).tolist()
    order = len(history) + 1
    total = sum(ngram_probabilities(train, [*history, w], v, order)[-1] for w in range(v))
    assert total == pytest.approx(1.0, rel=1e-12)


def test_corpus_baselines_order_by_context() -> None:
    """On text with structure, longer histories lose less (per split given)."""
    text = ("the cat sat on the mat. " * 40).encode()
    ids = np.frombuffer(text, dtype=np.uint8).astype(np.int64)
    found = corpus_baselines(ids[:800], {"valid": ids[800:]}, 256)
    assert found["unigram"]["valid"] > found["bigram"]["valid"] > found["trigram"]["valid"]
    assert found["unigram"]["valid"] < math.log(256)


def test_cli_prints_the_baselines_of_a_corpus(capsys) -> None:
    assert cli.main(["baselines", "data.corpus=pydoc", "data.max_train_tokens=20000"]) == 0
    out = capsys.readouterr().out
    assert "trigram test: loss" in out and "bits/symbol" in out


def test_cli_refuses_a_task_without_a_corpus(capsys) -> None:
    assert cli.main(["baselines", "task.name=copy"]) == 2
    assert "has no corpus" in capsys.readouterr().err
