"""Trivial baselines (data/baselines.py) against plain-Python oracles and hand computation."""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest

from highway_transformer import cli
from highway_transformer.data.baselines import (
    DISCOUNT,
    class_prior_baselines,
    corpus_baselines,
    music_baselines,
    ngram_probabilities,
)


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
    assert "trigram test: loss" in out and "bpc" in out and "ppl" in out


def test_cli_refuses_a_task_without_baselines(capsys) -> None:
    assert cli.main(["baselines", "task.name=copy"]) == 2
    assert "task copy has no trivial baselines" in capsys.readouterr().err


def music_oracle(train: list[np.ndarray], target: list[np.ndarray]) -> tuple[float, float]:
    """Frequency and previous-step NLL per step, one note and one step at a time."""
    steps = [row for piece in train for row in piece]
    pairs = [(a, b) for piece in train for a, b in zip(piece[:-1], piece[1:], strict=True)]
    freq_total = markov_total = 0.0
    count = 0
    for piece in target:
        for before, now in zip(piece[:-1], piece[1:], strict=True):
            count += 1
            for k in range(88):
                p = (sum(row[k] for row in steps) + 1) / (len(steps) + 2)
                same = [b[k] for a, b in pairs if a[k] == before[k]]
                q = (sum(same) + 1) / (len(same) + 2)
                freq_total -= math.log(p if now[k] else 1 - p)
                markov_total -= math.log(q if now[k] else 1 - q)
    return freq_total / count, markov_total / count


def _roll(steps: list[list[int]]) -> np.ndarray:
    roll = np.zeros((len(steps), 88))
    for t, keys in enumerate(steps):
        roll[t, keys] = 1
    return roll


def test_music_baselines_match_the_oracle() -> None:
    train = [_roll([[0, 4], [0, 4], [7], [7, 9]]), _roll([[4], [4], [4]])]
    valid = [_roll([[0], [0, 4], [4]]), _roll([[9]]), _roll([[7], [7]])]  # [[9]]: no target
    found = music_baselines(train, {"valid": valid})
    frequency, previous = music_oracle(train, valid)
    assert found["frequency"]["valid"] == pytest.approx(frequency, rel=1e-12)
    assert found["previous step"]["valid"] == pytest.approx(previous, rel=1e-12)


def test_previous_step_beats_frequency_on_held_chords() -> None:
    chords = [[0, 4, 7], [2, 5, 9], [4, 7, 11], [5, 9, 0]]
    piece = _roll([chord for chord in chords for _ in range(8)])  # each chord held 8 steps
    found = music_baselines([piece] * 4, {"valid": [piece]})
    assert found["previous step"]["valid"] < 0.5 * found["frequency"]["valid"]


def test_class_prior_by_hand() -> None:
    found = class_prior_baselines([0, 0, 1], {"valid": [0, 1, 2]}, 3)["class prior"]["valid"]
    # add-one prior (3, 2, 1) / 6; the majority class 0 is right on one of three
    assert found["loss"] == pytest.approx(
        -(math.log(3 / 6) + math.log(2 / 6) + math.log(1 / 6)) / 3
    )
    assert found["accuracy"] == pytest.approx(1 / 3)


def test_cli_prints_music_and_pixel_baselines(tmp_path, capsys) -> None:
    from scipy import io as scipy_io

    cells = np.empty((1, 2), dtype=object)
    cells[0, 0], cells[0, 1] = _roll([[0], [0], [3]]), _roll([[3], [3, 5]])
    path = tmp_path / "tiny.mat"
    scipy_io.savemat(str(path), {"traindata": cells, "validdata": cells, "testdata": cells})
    assert cli.main(["baselines", "task.name=music", f"task.dataset={path}"]) == 0
    out = capsys.readouterr().out
    assert "previous step test: loss" in out and "nll" in out
    assert cli.main(["baselines", "task.name=pixels", "task.dataset=digits", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["baselines"]
    prior = found["class prior"]["test"]
    assert 0.05 < prior["accuracy"] < 0.2 and prior["loss"] == pytest.approx(math.log(10), abs=0.01)
    # the raw-pixel classifiers of the digits (docs/results/README.md's lines to beat)
    assert found["1-nearest neighbour"]["valid"] == {"accuracy": pytest.approx(267 / 270)}
    assert found["1-nearest neighbour"]["test"] == {"accuracy": pytest.approx(267 / 270)}
    regression = found["logistic regression"]
    assert regression["valid"]["accuracy"] == pytest.approx(261 / 270)
    assert regression["test"]["accuracy"] == pytest.approx(266 / 270)
    assert 0.0 < regression["test"]["loss"] < prior["loss"]
