"""The pixel task's classifiers (``data/classifiers.py``) against oracles: 1-NN against a
brute-force double loop, logistic regression on separable data and against scikit-learn."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from highway_transformer.data import classifiers
from highway_transformer.data.classifiers import (
    fit_logistic_regression,
    image_baselines,
    logistic_regression_scores,
    nearest_neighbour_labels,
)
from highway_transformer.errors import DataError


def brute_force_nearest(train: list[list[float]], queries: list[list[float]]) -> list[int]:
    """The oracle: every distance by a double loop, the first of the smallest on ties."""
    found = []
    for q in queries:
        best, where = math.inf, -1
        for i, t in enumerate(train):
            d = sum((a - b) ** 2 for a, b in zip(q, t, strict=True))
            if d < best:
                best, where = d, i
        found.append(where)
    return found


@pytest.mark.parametrize(("chunk", "candidates"), [(1000, 16), (2, 1), (3, 2), (5, 100)])
def test_nearest_neighbour_is_the_brute_force_one(chunk: int, candidates: int) -> None:
    rng = np.random.RandomState(0)
    train = rng.randint(0, 5, size=(30, 6)).astype(np.float32) / 4  # small grid: many ties
    train[7] = train[3]  # an exact duplicate after its first copy: index 3 wins
    queries = np.concatenate([rng.randint(0, 5, size=(11, 6)) / 4, train[[3, 20]]])
    queries = queries.astype(np.float32)
    index = torch.arange(len(train))
    found = nearest_neighbour_labels(
        torch.from_numpy(train), index, torch.from_numpy(queries), chunk, candidates
    )
    assert found.tolist() == brute_force_nearest(train.tolist(), queries.tolist())
    assert found[-2:].tolist() == [3, 20]  # a training image is its own nearest neighbour


def test_screen_misses_are_rescored_against_the_whole_split(monkeypatch) -> None:
    """Near ties at a screen of one candidate fall back to the exact whole-split search."""
    calls = []
    whole = classifiers._whole_split
    monkeypatch.setattr(classifiers, "_whole_split", lambda q, t: calls.append(1) or whole(q, t))
    train = torch.tensor([[0.0, 1.0], [1e-4, 1.0], [1.0, 0.0]])
    queries = torch.tensor([[5e-5, 1.0], [0.9, 0.1]])
    labels = nearest_neighbour_labels(train, torch.tensor([0, 1, 2]), queries, candidates=1)
    assert labels.tolist() == brute_force_nearest(train.tolist(), queries.tolist()) == [0, 2]
    assert calls  # the first query's two candidates are within the float32 bound


def test_nearest_neighbour_of_float64_data_and_bad_shapes() -> None:
    train = torch.tensor([[0.1, 0.2], [0.3, 0.1]], dtype=torch.float64)
    labels = nearest_neighbour_labels(train, torch.tensor([4, 9]), train.flip(0))
    assert labels.tolist() == [9, 4]
    with pytest.raises(DataError, match="1-NN needs"):
        nearest_neighbour_labels(train, torch.tensor([4, 9]), torch.zeros(3, 5))


def test_logistic_regression_separates_a_separable_set() -> None:
    rng = np.random.RandomState(1)
    centres = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    y = np.arange(60) % 3
    x = centres[y] + rng.uniform(-0.2, 0.2, size=(60, 3))
    x, y = torch.from_numpy(x).float(), torch.from_numpy(y)
    model = fit_logistic_regression(x, y, 3)
    scores = logistic_regression_scores(model, x, y)
    assert scores["accuracy"] == 1.0
    assert math.isfinite(scores["loss"]) and 0.0 < scores["loss"] < math.log(3)
    again = fit_logistic_regression(x, y, 3)
    assert all(torch.equal(a, b) for a, b in zip(model, again, strict=True))  # deterministic


def test_logistic_regression_minimises_scikit_learns_objective() -> None:
    """The penalty is scikit-learn's C = 1: both fits reach one optimum (600 digits)."""
    linear_model = pytest.importorskip("sklearn.linear_model")
    datasets = pytest.importorskip("sklearn.datasets")
    digits = datasets.load_digits()
    x = torch.from_numpy(digits.data[:600] / 16.0).float()
    y = torch.from_numpy(digits.target[:600]).long()
    weight, bias = fit_logistic_regression(x, y, 10)
    reference = linear_model.LogisticRegression(C=1.0, tol=1e-10, max_iter=5000)
    reference.fit(x.double().numpy(), y.numpy())
    ours = torch.log_softmax(x.double() @ weight.double() + bias.double(), 1).exp()
    theirs = torch.from_numpy(reference.predict_proba(x.double().numpy()))
    assert torch.allclose(ours, theirs, atol=2e-3)


def test_image_baselines_hold_every_model_and_1nn_has_no_loss() -> None:
    x = torch.tensor([[0.0, 0.0], [0.0, 0.1], [1.0, 1.0], [0.9, 1.0]])
    y = torch.tensor([0, 0, 1, 1])
    found = image_baselines((x, y), {"valid": (x, y), "test": (x[:1], y[:1])}, 2)
    assert list(found) == ["class prior", "1-nearest neighbour", "logistic regression"]
    assert found["1-nearest neighbour"] == {"valid": {"accuracy": 1.0}, "test": {"accuracy": 1.0}}
    assert set(found["logistic regression"]["valid"]) == {"loss", "accuracy"}
    assert found["logistic regression"]["valid"]["accuracy"] == 1.0
