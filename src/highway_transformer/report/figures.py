"""Report figures (PNG and SVG, Agg backend): convergence curves, gate-bias heatmaps, PCA."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..extras import import_extra

#: One curve point: (step, mean training seconds, mean value).
Point = tuple[int, float, float]
#: One format a figure: SVG, text that a re-made report reproduces byte for byte (hash salt, no
#: date), that the site and GitHub show, and that tests can read.
FORMATS = ("svg",)


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (the ``report`` extra)."""
    matplotlib = import_extra("matplotlib", "drawing figures")
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "highway-transformer"  # stable ids: reproducible SVGs
    return import_extra("matplotlib.pyplot", "drawing figures")


def save_figure(fig: Any, stem: Path) -> list[Path]:
    """Write ``stem.svg``; close the figure."""
    plt = pyplot()
    paths = []
    for fmt in FORMATS:
        path = stem.with_suffix(f".{fmt}")
        # no creation date in the file, so a re-made report differs only where numbers do
        fig.savefig(path, metadata={"Date": None})
        paths.append(path)
    plt.close(fig)
    return paths


LINE_STYLES = ("-", "--", "-.", ":")

#: How to read a gate-bias heatmap, on the figure and under it in ``index.md``.
HEATMAP_NOTE = (
    "Rows: the gated layers (L1 nearest the input); columns: the dimensions of the gate's "
    "learned bias b1; colour: its value, red above 0, blue below, white 0 (the scale is "
    "symmetric about 0, to the largest |b1|). b1 > 0: the gate Ψ(x W1 + b1) leans open "
    "(more of the gated term passes) before the input moves it; b1 < 0: it leans shut."
)


#: One band point: (step, mean training seconds, lowest, highest value over the seeds).
BandPoint = tuple[int, float, float, float]


def convergence_panels(
    curves: dict[str, dict[str, dict[str, list[Point]]]], metric: str
) -> list[tuple[str, str]]:
    """The ``(split, key)`` panels worth drawing, training before validation, loss before
    ``metric``: none without a curve (music logs no training nll) and no ``metric`` panel that
    repeats the loss panel value for value (music's validation nll is its loss)."""

    def points(split: str, key: str) -> dict[str, list[Point]]:
        found = {v: by.get(split, {}).get(key, []) for v, by in curves.items()}
        return {v: pts for v, pts in found.items() if pts}

    panels = []
    for split in ("train", "valid"):
        for key in dict.fromkeys(("loss", metric)):
            drawn = points(split, key)
            if not drawn or (key != "loss" and drawn == points(split, "loss")):
                continue
            panels.append((split, key))
    return panels


def plot_convergence(
    curves: dict[str, dict[str, dict[str, list[Point]]]],
    metric: str,
    x_axis: str,
    stem: Path,
    title: str = "",
    bands: dict[str, dict[str, dict[str, list[BandPoint]]]] | None = None,
    lines_to_beat: dict[str, dict[str, float]] | None = None,
) -> list[Path]:
    """Training / validation (rows) × loss / ``metric`` (columns), the panels
    :func:`convergence_panels` keeps (at most a 2×2 grid).

    ``curves[variant][split][key]`` holds the mean-over-seeds points, ``bands`` (same keys) the
    seeds' range, drawn as a shaded band around each curve; ``lines_to_beat[key]`` the trivial
    models' validation values (``{model: value}``), drawn as grey lines on the validation
    row; ``x_axis`` is ``step`` or ``time`` (training seconds).
    """
    plt = pyplot()
    panels = convergence_panels(curves, metric) or [("valid", "loss")]
    columns = max(Counter(split for split, _ in panels).values())
    rows = len({split for split, _ in panels})
    fig, axes = plt.subplots(rows, columns, figsize=(6 * columns, 4 * rows), squeeze=False)
    splits = list(dict.fromkeys(split for split, _ in panels))
    for split, key in panels:
        col = [k for s, k in panels if s == split].index(key)
        ax = axes[splits.index(split)][col]
        _draw_panel(ax, curves, bands, split, key, x_axis)
        if split == "valid":
            _draw_lines_to_beat(ax, (lines_to_beat or {}).get(key, {}))
        if ax.lines:
            ax.legend(fontsize=8)
    for row in range(rows):  # a split with one panel beside one with two: no empty axes
        for col in range(len([k for s, k in panels if s == splits[row]]), columns):
            axes[row][col].set_visible(False)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, stem)


def _draw_panel(
    ax: Any,
    curves: dict[str, dict[str, dict[str, list[Point]]]],
    bands: dict[str, dict[str, dict[str, list[BandPoint]]]] | None,
    split: str,
    key: str,
    x_axis: str,
) -> None:
    """One split's ``key`` curves, each row's seed band around it."""
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
    label = "loss (nats)" if key == "loss" else _metric_label(key)
    ax.set_title(f"{'training' if split == 'train' else 'validation'} {label}")
    ax.set_xlabel("step" if x_axis == "step" else "training time (s)")
    ax.set_ylabel(label)
    if key == "ppl":
        ax.set_yscale("log")
    ax.grid(alpha=0.3)


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
        ax.set_xlabel("dimension of b1")
        ax.set_ylabel("gated layer")
        ax.set_title(f"{kind} gate bias b1")
        fig.colorbar(image, ax=ax, fraction=0.03, label="b1")
    if title:
        fig.suptitle(title)
    fig.text(0.01, 0.005, HEATMAP_NOTE, fontsize=7, ha="left", va="bottom", wrap=True)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
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
