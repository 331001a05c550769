"""Learned gate biases ``b1`` of trained models (HT Figures 13-14): matrices and PCA."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..errors import CheckpointError
from ..storage import runfolder

#: ``layer3.ffn``, or an encoder-decoder's ``encoder.layer3.attn`` (its stack kept in the kind).
_NAME = re.compile(r"^(?:(\w+)\.)?layer(\d+)\.(\w+)$")


def load_gate_biases(run_dir: str | Path) -> dict[str, np.ndarray]:
    """``{"layer1.attn": b1, ...}`` of the run's best weights (``{}``: no gates): from
    ``results.json`` where the run recorded them, else from its ``best/`` checkpoint.

    Raises CheckpointError when neither holds them.
    """
    from ..api import load_pretrained  # torch: only where results.json lacks them

    results = runfolder.read_results(run_dir)
    recorded = results.get("gate_biases") if isinstance(results, dict) else None
    if isinstance(recorded, dict):
        try:
            return _arrays(recorded)
        except (TypeError, ValueError):
            pass  # malformed: the weights decide
    folder = Path(run_dir) / runfolder.BEST_DIR
    if not folder.is_dir():
        raise CheckpointError(f"{folder} is missing; the run saved no best weights")
    return _arrays(runfolder.gate_bias_values(load_pretrained(folder)[0]))


def _arrays(biases: dict) -> dict[str, np.ndarray]:
    return {str(k): np.asarray(v, dtype=np.float32).ravel() for k, v in biases.items()}


def split_name(name: str) -> tuple[int, str]:
    """``"layer3.ffn"`` -> ``(3, "ffn")``; ``"encoder.layer1.attn"`` -> ``(1, "encoder.attn")``."""
    match = _NAME.match(name)
    if match is None:
        raise ValueError(f"not a gate-bias name: {name!r}")
    stack, layer, kind = match.groups()
    return int(layer), f"{stack}.{kind}" if stack else kind


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


def pca_embedding(vectors: np.ndarray) -> np.ndarray:
    """2-D PCA coordinates of the rows of ``vectors`` (a few dozen bias vectors).

    Deterministic: each axis's sign makes its largest loading positive. With fewer points or
    dimensions than two, the missing axis is 0.
    """
    x = np.asarray(vectors, dtype=np.float64)
    x = x - x.mean(axis=0, keepdims=True)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    axes = vt[:2]
    signs = np.sign(axes[np.arange(len(axes)), np.abs(axes).argmax(axis=1)])
    coords = x @ (axes * np.where(signs == 0, 1.0, signs)[:, None]).T
    return np.pad(coords, ((0, 0), (0, 2 - coords.shape[1])))
