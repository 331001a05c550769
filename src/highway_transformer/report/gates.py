"""Learned gate biases ``b1`` of trained models (HT Figures 13-14): matrices and t-SNE."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..errors import CheckpointError
from ..train import runfolder

_NAME = re.compile(r"^layer(\d+)\.(\w+)$")


def load_gate_biases(run_dir: str | Path) -> dict[str, np.ndarray]:
    """``{"layer1.attn": b1, ...}`` from the run's ``best/`` checkpoint (``{}``: no gates).

    Raises CheckpointError when the run has no ``best/`` checkpoint.
    """
    from ..train.checkpoint import load_pretrained

    folder = Path(run_dir) / runfolder.BEST_DIR
    if not folder.is_dir():
        raise CheckpointError(f"{folder} is missing; the run saved no best weights")
    model, _, _ = load_pretrained(folder)
    return {k: v.detach().float().cpu().numpy().ravel() for k, v in model.gate_biases().items()}


def split_name(name: str) -> tuple[int, str]:
    """``"layer3.ffn"`` -> ``(3, "ffn")``."""
    match = _NAME.match(name)
    if match is None:
        raise ValueError(f"not a gate-bias name: {name!r}")
    return int(match.group(1)), match.group(2)


def bias_matrices(biases: dict[str, np.ndarray]) -> dict[str, tuple[list[int], np.ndarray]]:
    """Per sublayer kind: the gated layers (1-based) and their biases stacked layer × dim."""
    by_kind: dict[str, dict[int, np.ndarray]] = {}
    for name, vector in biases.items():
        layer, kind = split_name(name)
        by_kind.setdefault(kind, {})[layer] = vector
    out = {}
    for kind, rows in by_kind.items():
        layers = sorted(rows)
        out[kind] = (layers, np.stack([rows[layer] for layer in layers]))
    return out


def tsne_perplexity(n_points: int) -> float:
    """A perplexity below the number of points (sklearn's requirement), at most 30."""
    return float(min(30.0, max(1.0, (n_points - 1) / 3), n_points - 0.5))


def tsne_embedding(vectors: np.ndarray, seed: int = 0) -> np.ndarray:
    """2-D t-SNE coordinates of the rows of ``vectors``; fewer than 3 rows are laid out as is.

    With one point it sits at the origin; with two they sit at (±1, 0): t-SNE says nothing
    about so few points.
    """
    from sklearn.manifold import TSNE

    n = len(vectors)
    if n < 3:
        return np.array([[0.0, 0.0]] if n == 1 else [[-1.0, 0.0], [1.0, 0.0]][:n])
    init = "pca" if min(vectors.shape) >= 2 else "random"
    tsne = TSNE(n_components=2, perplexity=tsne_perplexity(n), init=init, random_state=seed)
    return np.asarray(tsne.fit_transform(np.asarray(vectors, dtype=np.float64)))
