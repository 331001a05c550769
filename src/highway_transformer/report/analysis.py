"""``analysis.json`` (``highway analyze RUN``) read back: one run's figures, a report's section.

A run's analysis holds, per layer, the attention sink (first-key attention share per head),
its gates' score statistics, its largest activation and its gate biases
(:mod:`highway_transformer.models.analysis`). ``highway report`` adds a section of seed
means for the rows whose runs have one; runs without it are left out of that section only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..files import first_line
from .figures import pyplot, save_figure

#: The file ``highway analyze`` writes into a run folder.
ANALYSIS_FILE = "analysis.json"
#: Its top-level keys (a file without them is refused, not half read).
FIELDS = ("weights", "split", "attention_sink", "gates", "activations", "gate_biases")


def read_analysis(run_dir: Path) -> dict[str, Any] | None:
    """``run_dir/analysis.json``, or None where there is none; a damaged one is an error."""
    path = Path(run_dir) / ANALYSIS_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"cannot read {path}: {first_line(exc)}; run `highway analyze` again"
        ) from None
    missing = [k for k in FIELDS if not isinstance(data, dict) or k not in data]
    if missing:
        raise ConfigError(f"{path} lacks {', '.join(missing)}; run `highway analyze` again")
    return data


# ---------------------------------------------------------------------------- one run


def headline(analysis: dict[str, Any]) -> dict[str, Any]:
    """The figures a table shows of one analysis: the sink per layer (mean over heads), the
    mean gate score and fraction below 0.1 over all of its gates, the largest activation per
    layer and its ratio to the median."""
    sinks = analysis["attention_sink"]
    sink = {layer: float(np.mean(s["heads"])) for layer, s in sinks.items()}
    gates = analysis["gates"].values()
    counts = [g["count"] for g in gates]
    out: dict[str, Any] = {
        "sink_by_layer": sink,
        "sink": float(np.mean(list(sink.values()))) if sink else None,
        "sink_uniform": float(np.mean([s["uniform"] for s in sinks.values()])) if sinks else None,
        "activation_max_by_layer": {k: a["max_abs"] for k, a in analysis["activations"].items()},
        "activation_ratio_max": max(
            (a["ratio"] for a in analysis["activations"].values()), default=None
        ),  # fmt: skip
    }
    if counts:
        total = sum(counts)
        out["gate_mean"] = sum(g["mean"] * g["count"] for g in gates) / total
        out["gate_below_0.1"] = sum(g["fraction_below_0.1"] * g["count"] for g in gates) / total
    return out


def write_figures(
    analysis: dict[str, Any], out_dir: Path, title: str, prefix: str = "analysis"
) -> list[Path]:
    """The sink heatmap (layers x heads), the gate-score histograms and the activation bars
    of one analysis, as ``out_dir/{prefix}_{sink,gates,activations}.svg``."""
    paths: list[Path] = []
    if analysis["attention_sink"]:
        paths += _sink_figure(analysis["attention_sink"], out_dir / f"{prefix}_sink", title)
    if analysis["gates"]:
        paths += _gate_figure(analysis["gates"], out_dir / f"{prefix}_gates", title)
    if analysis["activations"]:
        stem = out_dir / f"{prefix}_activations"
        paths += _activation_figure(analysis["activations"], stem, title)
    return paths


def _sink_figure(sink: dict[str, dict[str, Any]], stem: Path, title: str) -> list[Path]:
    plt = pyplot()
    layers = list(sink)
    grid = np.array([sink[layer]["heads"] for layer in layers])
    uniform = float(np.mean([sink[layer]["uniform"] for layer in layers]))
    fig, ax = plt.subplots(figsize=(max(5.5, 1.2 + 0.45 * grid.shape[1]), 1.4 + 0.45 * len(layers)))
    image = ax.imshow(grid, vmin=0.0, vmax=max(float(grid.max()), 1e-9), cmap="viridis",
                      aspect="auto")  # fmt: skip
    ax.set_xticks(range(grid.shape[1]), [f"h{h + 1}" for h in range(grid.shape[1])])
    ax.set_yticks(range(len(layers)), [_layer_label(layer) for layer in layers])
    ax.set_xlabel("head")
    ax.set_title(
        f"{title}\nattention to the first token (queries at positions ≥ 1; uniform "
        f"attention: {uniform:.3f})",
        fontsize=9,
    )
    fig.colorbar(image, ax=ax, label="share of attention")
    fig.tight_layout()
    return save_figure(fig, stem)


def _gate_figure(gates: dict[str, dict[str, Any]], stem: Path, title: str) -> list[Path]:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 3.6))
    for where, gate in gates.items():
        hist = gate["histogram"]
        counts = np.asarray(hist["counts"], dtype=float)
        edges = np.linspace(hist["low"], hist["high"], len(counts) + 1)
        share = counts / max(counts.sum(), 1.0)
        ax.step(edges[:-1], share, where="post", label=f"{where}: {gate['kind']}")
    ax.axvline(0.1, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("gate score")
    ax.set_ylabel("share of scores")
    ax.set_title(f"{title}\ngate scores (dotted: 0.1)", fontsize=9)
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return save_figure(fig, stem)


def _activation_figure(
    activations: dict[str, dict[str, float]], stem: Path, title: str
) -> list[Path]:
    plt = pyplot()
    layers = list(activations)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.5 + 0.6 * len(layers)), 3.2))
    x = np.arange(len(layers))
    ax.bar(x - 0.2, [activations[k]["max_abs"] for k in layers], 0.4, label="largest |h|")
    ax.bar(x + 0.2, [activations[k]["median_abs"] for k in layers], 0.4, label="median |h|")
    ax.set_yscale("log")
    ax.set_xticks(x, [_layer_label(k) for k in layers])
    ax.set_title(f"{title}\nresidual stream after each block", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, stem)


def _layer_label(layer: str) -> str:
    return layer.replace("layer", "L")


# ---------------------------------------------------------------------------- a report


def analysis_rows(groups: dict[str, Sequence[Any]], out_dir: Path | None = None) -> dict[str, Any]:
    """Per row (``groups``: row name -> its runs), the seed means of :func:`headline` over
    the runs with an ``analysis.json``, and with ``out_dir`` the figures of its first
    analysed seed there; ``{}`` where none has one (the report then has no such section)."""
    rows: dict[str, Any] = {}
    for name, runs in groups.items():
        found = [(run.seed, read_analysis(run.run_dir)) for run in runs]
        analysed = [(seed, a) for seed, a in found if a is not None]
        if not analysed:
            continue
        per_seed = {seed: headline(a) for seed, a in analysed}
        rows[name] = {
            "seeds": per_seed,
            "mean": _mean(list(per_seed.values())),
            "without": sorted(seed for seed, a in found if a is None),
        }
        if out_dir is not None:
            seed, first = analysed[0]
            stem = "analysis_" + re.sub(r"[^A-Za-z0-9._-]+", "_", name.split("/")[-1])
            files = write_figures(first, out_dir, f"{name} seed {seed}", stem)
            rows[name]["figures"] = [p.name for p in files]
    return rows


def _mean(values: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in values[0]:
        items = [v[key] for v in values if v.get(key) is not None]
        if not items:
            out[key] = None
        elif isinstance(items[0], dict):
            out[key] = {k: float(np.mean([i[k] for i in items])) for k in items[0]}
        else:
            out[key] = float(np.mean(items))
    return out


def analysis_markdown(rows: dict[str, Any]) -> list[str]:
    """The report's section of :func:`analysis_rows` (exploratory: no rule fixed it)."""
    lines = [
        "## Attention sink, gate sparsity and massive activations (exploratory)",
        "",
        "From `highway analyze` on each run (`analysis.json`): *sink* is the mean share of "
        "attention that queries at positions ≥ 1 give to the window's first token (per layer, "
        "mean over heads; *uniform* is what attention spread evenly over the keys each query "
        "sees would give); *gate mean* and *< 0.1* are over "
        "every gate score of the run (Qiu et al. 2025 call a gate sparse when most scores are "
        "below 0.1); *max |h|* is the largest activation of the residual stream, *ratio* its "
        "largest ratio to a block's median |h| (Sun et al. 2024). Seed means.",
        "",
        "| model | seeds | sink by layer | uniform | gate mean | < 0.1 | max \\|h\\| by layer "
        "| ratio |",
        "| --- | ---: | --- | ---: | ---: | ---: | --- | ---: |",
    ]
    for name, row in rows.items():
        mean = row["mean"]
        sink = ", ".join(
            f"{_layer_label(k)} {v:.3f}" for k, v in (mean["sink_by_layer"] or {}).items()
        )
        acts = ", ".join(f"{_layer_label(k)} {v:.1f}" for k, v in
                         (mean["activation_max_by_layer"] or {}).items())  # fmt: skip
        gate = "—" if mean.get("gate_mean") is None else f"{mean['gate_mean']:.3f}"
        below = "—" if mean.get("gate_below_0.1") is None else f"{mean['gate_below_0.1']:.1%}"
        ratio = (
            "—" if mean["activation_ratio_max"] is None else f"{mean['activation_ratio_max']:.0f}"
        )
        uniform = "—" if mean["sink_uniform"] is None else f"{mean['sink_uniform']:.3f}"
        lines.append(f"| {name} | {len(row['seeds'])} | {sink or '—'} | {uniform} | {gate} | "
                     f"{below} | {acts or '—'} | {ratio} |")  # fmt: skip
    for name, row in rows.items():
        if row.get("figures"):
            seed = next(iter(row["seeds"]))
            kinds = (f.removesuffix(".svg").rsplit("_", 1)[-1] for f in row["figures"])
            pictures = [f"![{name}: {k}]({f})" for k, f in zip(kinds, row["figures"], strict=True)]
            lines += ["", f"### {name} (seed {seed})", "", *pictures]
    without = [f"{name} seed {s}" for name, row in rows.items() for s in row["without"]]
    if without:
        lines += ["", f"Not analysed (no `analysis.json`): {', '.join(without)}."]
    return [*lines, ""]
