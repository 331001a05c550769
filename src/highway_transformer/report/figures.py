"""Report figures (PNG and SVG, Agg backend): convergence curves, gate-bias heatmaps, PCA."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..extras import import_extra

#: One curve point: (step, mean training seconds, mean value).
Point = tuple[int, float, float]
FORMATS = ("png", "svg")


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (the ``report`` extra)."""
    matplotlib = import_extra("matplotlib", "drawing figures")
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "highway-transformer"  # stable ids: reproducible SVGs
    return import_extra("matplotlib.pyplot", "drawing figures")


def save_figure(fig: Any, stem: Path) -> list[Path]:
    """Write ``stem.png`` and ``stem.svg``; close the figure."""
    plt = pyplot()
    paths = []
    for fmt in FORMATS:
        path = stem.with_suffix(f".{fmt}")
        # no creation date in the files, so a re-made report differs only where numbers do
        metadata = {"Date": None} if fmt == "svg" else {"Software": None}
        fig.savefig(path, dpi=120 if fmt == "png" else None, metadata=metadata)
        paths.append(path)
    plt.close(fig)
    return paths


LINE_STYLES = ("-", "--", "-.", ":")


#: One band point: (step, mean training seconds, lowest, highest value over the seeds).
BandPoint = tuple[int, float, float, float]


def plot_convergence(
    curves: dict[str, dict[str, dict[str, list[Point]]]],
    metric: str,
    x_axis: str,
    stem: Path,
    title: str = "",
    bands: dict[str, dict[str, dict[str, list[BandPoint]]]] | None = None,
    lines_to_beat: dict[str, dict[str, float]] | None = None,
) -> list[Path]:
    """A 2×2 grid: training / validation (rows) × loss / ``metric`` (columns).

    ``curves[variant][split][key]`` holds the mean-over-seeds points, ``bands`` (same keys) the
    seeds' range, drawn as a shaded band around each curve; ``lines_to_beat[key]`` the trivial
    models' validation values (``{model: value}``), drawn as grey lines on the validation
    row; ``x_axis`` is ``step`` or ``time`` (training seconds).
    """
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), squeeze=False)
    for row, split in enumerate(("train", "valid")):
        for col, key in enumerate(("loss", metric)):
            ax = axes[row][col]
            for i, (variant, by_split) in enumerate(curves.items()):
                points = by_split.get(split, {}).get(key, [])
                if not points:
                    continue
                xs = [p[0] if x_axis == "step" else p[1] for p in points]
                ys = [p[2] for p in points]
                marker = "o" if split == "valid" else None
                # A line style per row as well as a colour: curves that coincide (plain and
                # parameter-matched) stay visible, and colours repeat after ten rows.
                style = LINE_STYLES[i % len(LINE_STYLES)]
                (line,) = ax.plot(xs, ys, style, marker=marker, ms=3, label=variant)
                band = ((bands or {}).get(variant) or {}).get(split, {}).get(key, [])
                if band:
                    bx = [b[0] if x_axis == "step" else b[1] for b in band]
                    low, high = [b[2] for b in band], [b[3] for b in band]
                    ax.fill_between(bx, low, high, color=line.get_color(), alpha=0.15, lw=0)
            if split == "valid":
                _draw_lines_to_beat(ax, (lines_to_beat or {}).get(key, {}))
            label = "loss (nats)" if key == "loss" else _metric_label(key)
            ax.set_title(f"{'training' if split == 'train' else 'validation'} {label}")
            ax.set_xlabel("step" if x_axis == "step" else "training time (s)")
            ax.set_ylabel(label)
            if key == "ppl":
                ax.set_yscale("log")
            ax.grid(alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, stem)


def _draw_lines_to_beat(ax: Any, values: dict[str, float]) -> None:
    """The trivial models' values as grey horizontal lines, each named in the legend."""
    styles = (":", "-.", "--")
    for (model, value), style in zip(values.items(), styles * len(values), strict=False):
        ax.axhline(value, color="grey", ls=style, lw=1, label=f"{model} (trivial)")


def _metric_label(metric: str) -> str:
    return {"bpc": "bits per character", "ppl": "perplexity"}.get(metric, metric)


def plot_gate_heatmaps(
    matrices: dict[str, tuple[list[int], np.ndarray]], stem: Path, title: str = ""
) -> list[Path]:
    """One heatmap per sublayer kind: gated layers × dimensions of ``b1`` (HT Figure 13)."""
    plt = pyplot()
    kinds = sorted(matrices)
    fig, axes = plt.subplots(len(kinds), 1, figsize=(10, 1.2 + 1.6 * len(kinds)), squeeze=False)
    for ax, kind in zip(axes[:, 0], kinds, strict=True):
        layers, values = matrices[kind]
        limit = float(np.abs(values).max()) or 1.0
        image = ax.imshow(
            values, aspect="auto", cmap="RdBu_r", vmin=-limit, vmax=limit, interpolation="nearest"
        )
        ax.set_yticks(range(len(layers)), [f"L{layer}" for layer in layers])
        ax.set_xlabel("dimension")
        ax.set_title(f"{kind} gate bias b1")
        fig.colorbar(image, ax=ax, fraction=0.03)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, stem)


def plot_pca(
    coords: np.ndarray,
    labels: Sequence[str],
    kinds: Sequence[str],
    layers: Sequence[int],
    stem: Path,
    title: str = "",
) -> list[Path]:
    """PCA scatter of per-layer, per-sublayer bias vectors (HT Figure 14).

    Colour: the variant/run in ``labels``; marker: the sublayer kind; text: the layer.
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 6))
    markers = dict(zip(sorted(set(kinds)), "os^Dvp*", strict=False))
    colours = {label: f"C{i % 10}" for i, label in enumerate(dict.fromkeys(labels))}
    seen: set[tuple[str, str]] = set()
    for (x, y), label, kind, layer in zip(coords, labels, kinds, layers, strict=True):
        legend = f"{label} {kind}" if (label, kind) not in seen else None
        seen.add((label, kind))
        ax.scatter(x, y, c=colours[label], marker=markers.get(kind, "o"), label=legend)
        ax.annotate(str(layer), (x, y), textcoords="offset points", xytext=(3, 3), fontsize=7)
    ax.set_xlabel("principal component 1")
    ax.set_ylabel("principal component 2")
    ax.set_title(title or "PCA of gate biases b1")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return save_figure(fig, stem)
