"""The pixel task's lines to beat beyond the class prior: classifiers of the raw pixels.

A sequence model that reads an image pixel by pixel should beat what a classifier of the
whole image gets without any model of order. Both classifiers here see each image as one
vector of pixels in [0, 1] (so a fixed pixel permutation, as in permuted MNIST, changes
nothing for them) and are fit on the training split only:

* **1-nearest neighbour**: each image takes the label of the training image at the smallest
  Euclidean distance (ties: the lowest training index). It has no probabilities, so it
  reports accuracy and no NLL. The search is exact and bounded in memory: a chunk of
  :data:`NN_CHUNK` queries is screened against every training image in float32 with the
  expanded norm ``|t|^2 - 2 q.t`` (one matrix product), the :data:`NN_CANDIDATES` smallest are
  rescored as ``sum (q - t)^2`` in float64, and a query whose runner-up outside the candidates
  could lie within the screen's rounding bound of the best (``gamma_(n+2) (|t|_max^2 +
  2 |q| |t|_max)``, doubled; Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1)
  is rescored against the whole training split in float64.
* **multinomial logistic regression**: ``softmax(W x + b)`` minimising the mean cross-entropy
  plus ``||W||^2 / (2 N)`` on the ``N`` training images (scikit-learn's default penalty, C = 1;
  the bias unpenalised), from zero weights, by full-batch L-BFGS (strong-Wolfe line search,
  history 10) for at most :data:`LOGREG_ITERATIONS` iterations: deterministic for a given
  thread count. It reports accuracy and the NLL (nats) of the valid/test labels.

On MNIST (55,000 training images) the 1-NN search of the 15,000 valid and test images takes
about 20 s and the regression about 35 s on one CPU thread (docs/results/README.md).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..errors import DataError
from .baselines import class_prior_baselines

NN_CHUNK = 1000  # queries screened at once: a [1000, 55,000] float32 block is 220 MB
NN_CANDIDATES = 16  # screened distances rescored in float64 per query
EXACT_CHUNK = 4096  # training images per block of a whole-split float64 rescoring
# L-BFGS iterations: converged (by the change of the objective) after about 135 on the 8x8
# digits; on MNIST 300 end 0.1% above the optimum (0.23579 against 0.23548 nats at 572).
LOGREG_ITERATIONS = 300


def _flat(x: Tensor) -> Tensor:
    return x.reshape(len(x), -1)


# Types whose every value float32 holds exactly: screening them in float32 rounds nothing
# before the products the bound covers.
_EXACT_IN_FLOAT32 = (torch.float32, torch.float16, torch.bfloat16, torch.uint8, torch.int8)


def _screen_dtype(*tensors: Tensor) -> torch.dtype:
    """float32 where it holds the values exactly and matmuls run in full float32 precision
    (else the bound would not hold): float64 otherwise."""
    exact = all(t.dtype in _EXACT_IN_FLOAT32 for t in tensors)
    full = torch.get_float32_matmul_precision() == "highest"
    return torch.float32 if exact and full else torch.float64


def _squared_distances(query: Tensor, train: Tensor, index: Tensor) -> Tensor:
    """``sum (q - t)^2`` in float64 for ``index [B, K]`` training rows of each of B queries."""
    columns = [((query - train[index[:, j]].double()) ** 2).sum(1) for j in range(index.shape[1])]
    return torch.stack(columns, 1)


def _whole_split(query: Tensor, train: Tensor) -> tuple[Tensor, Tensor]:
    """Every training row's float64 squared distance to one query: ``(values, indices)``."""
    parts = [
        ((query - train[i : i + EXACT_CHUNK].double()) ** 2).sum(1)
        for i in range(0, len(train), EXACT_CHUNK)
    ]
    return torch.cat(parts)[None], torch.arange(len(train))[None]


def _lowest_index_of_min(values: Tensor, index: Tensor, n_train: int) -> Tensor:
    best = values.min(1, keepdim=True).values
    return torch.where(values == best, index, n_train).min(1).values


def _nearest_chunk(
    query: Tensor, train: Tensor, screen: tuple[Tensor, Tensor, float], candidates: int
) -> Tensor:
    """Index of the nearest training row of each query row (see the module docstring)."""
    train_screen, train_sq, train_max = screen
    q64 = query.double()
    # |t|^2 - 2 q.t in place: one [B, N] block (the bound covers exactly these operations)
    screened = (query.to(train_screen.dtype) @ train_screen.T).mul_(-2.0).add_(train_sq)
    k = min(candidates, len(train))
    values, index = screened.topk(k, dim=1, largest=False, sorted=True)
    exact = _squared_distances(q64, train, index)
    q_sq = (q64 * q64).sum(1)
    eps = torch.finfo(train_screen.dtype).eps / 2
    n = train.shape[1] + 2
    gamma = 2.0 * n * eps / (1.0 - n * eps)
    bound = gamma * (train_max**2 + 2.0 * q_sq.sqrt() * train_max)
    safe = values[:, -1].double() + q_sq - bound > exact.min(1).values
    nearest = _lowest_index_of_min(exact, index, len(train))
    if k < len(train):
        for row in (~safe).nonzero().flatten().tolist():
            nearest[row] = _lowest_index_of_min(*_whole_split(q64[row], train), len(train))[0]
    return nearest


def nearest_neighbour_labels(
    train_x: Tensor,
    train_y: Tensor,
    queries: Tensor,
    chunk: int = NN_CHUNK,
    candidates: int = NN_CANDIDATES,
) -> Tensor:
    """The label of each query's nearest training example (Euclidean over all its values;
    ties to the lowest training index), exactly, :data:`NN_CHUNK` queries at a time."""
    train, queries = _flat(train_x), _flat(queries)
    if len(train) == 0 or train.shape[1] != queries.shape[1]:
        raise DataError(
            f"1-NN needs training examples of the queries' size: train {tuple(train.shape)}, "
            f"queries {tuple(queries.shape)}"
        )
    train_screen = train.to(_screen_dtype(train, queries))
    train_sq = (train_screen * train_screen).sum(1)
    train_max = float(train.double().pow(2).sum(1).max().sqrt())
    screen = (train_screen, train_sq, train_max)
    found = [
        _nearest_chunk(queries[i : i + chunk], train, screen, candidates)
        for i in range(0, len(queries), chunk)
    ]
    index = torch.cat(found) if found else torch.zeros(0, dtype=torch.long)
    return train_y[index]


def fit_logistic_regression(
    x: Tensor, y: Tensor, n_classes: int, iterations: int = LOGREG_ITERATIONS
) -> tuple[Tensor, Tensor]:
    """Weights ``[features, classes]`` and bias of the penalised multinomial regression of the
    module docstring, fit on ``(x, y)``."""
    x = _flat(x).float()
    n, features = x.shape
    weight = torch.zeros(features, n_classes, requires_grad=True)
    bias = torch.zeros(n_classes, requires_grad=True)
    optimiser = torch.optim.LBFGS(
        [weight, bias],
        lr=1.0,
        max_iter=iterations,
        history_size=10,
        tolerance_grad=1e-7,
        tolerance_change=1e-10,
        line_search_fn="strong_wolfe",
    )

    def objective() -> Tensor:
        optimiser.zero_grad()
        loss = F.cross_entropy(x @ weight + bias, y) + (weight * weight).sum() / (2 * n)
        loss.backward()
        return loss

    with torch.enable_grad():
        optimiser.step(objective)
    return weight.detach(), bias.detach()


def logistic_regression_scores(
    model: tuple[Tensor, Tensor], x: Tensor, y: Tensor
) -> dict[str, float]:
    """``{"loss": mean NLL in nats, "accuracy": fraction}`` of the fitted model on ``(x, y)``."""
    weight, bias = model
    logits = (_flat(x).float() @ weight + bias).double()
    return {
        "loss": float(F.cross_entropy(logits, y)),
        "accuracy": float((logits.argmax(1) == y).double().mean()),
    }


def nearest_neighbour_accuracy(train: tuple[Tensor, Tensor], x: Tensor, y: Tensor) -> float:
    """The fraction of ``(x, y)`` whose nearest training example has their label."""
    return float((nearest_neighbour_labels(*train, x) == y).double().mean())


def image_baselines(
    train: tuple[Tensor, Tensor], splits: dict[str, tuple[Tensor, Tensor]], n_classes: int
) -> dict[str, dict[str, dict[str, float]]]:
    """``{model: {split: {metric: value}}}`` of the class prior, 1-NN (accuracy only) and
    logistic regression, fit on ``train = (images, labels)`` and scored on each split."""
    labels = {split: y.numpy() for split, (_, y) in splits.items()}
    found = class_prior_baselines(train[1].numpy(), labels, n_classes)
    found["1-nearest neighbour"] = {
        split: {"accuracy": nearest_neighbour_accuracy(train, x, y)}
        for split, (x, y) in splits.items()
    }
    model = fit_logistic_regression(*train, n_classes)
    found["logistic regression"] = {
        split: logistic_regression_scores(model, x, y) for split, (x, y) in splits.items()
    }
    return found
