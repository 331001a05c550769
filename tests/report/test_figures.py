"""Report figures (``report/figures.py``): every figure written as PNG and SVG, the SVG the
same bytes when drawn again, and a missing matplotlib named as its extra."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from highway_transformer.errors import MissingExtra
from highway_transformer.report.figures import (
    HEATMAP_NOTE,
    convergence_panels,
    plot_convergence,
    plot_gate_heatmaps,
    plot_pca,
    pyplot,
)

pytest.importorskip("matplotlib")

CURVES = {
    "plain": {"train": {"loss": [(10, 1.0, 2.0), (20, 2.0, 1.5)]},
              "valid": {"loss": [(10, 1.0, 2.1)], "bpc": [(10, 1.0, 3.0)]}},
    "gated": {"train": {"loss": [(10, 1.1, 1.9), (20, 2.1, 1.4)]}},
}  # fmt: skip


def test_a_figure_is_one_svg_written_the_same_again(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = plot_convergence(CURVES, "bpc", "step", tmp_path / "a" / "curves", "Table 1")
    again = plot_convergence(CURVES, "bpc", "step", tmp_path / "b" / "curves", "Table 1")
    assert [p.name for p in first] == ["curves.svg"]  # one format a figure
    assert first[0].read_bytes() == again[0].read_bytes()  # no dates, stable ids
    assert b"<svg" in first[0].read_bytes()
    timed = plot_convergence(CURVES, "ppl", "time", tmp_path / "a" / "timed")
    assert all(p.is_file() for p in timed)


def test_the_seed_band_and_the_lines_to_beat_are_drawn(tmp_path: Path) -> None:
    bands = {"plain": {"valid": {"loss": [(10, 1.0, 2.0, 2.2), (20, 2.0, 1.4, 1.6)]}}}
    lines = {"loss": {"unigram": 2.9, "bigram": 2.5}, "bpc": {"unigram": 4.2}}
    svg = plot_convergence(
        CURVES, "bpc", "step", tmp_path / "banded", bands=bands, lines_to_beat=lines
    )[0].read_text(encoding="utf-8")
    plain = plot_convergence(CURVES, "bpc", "step", tmp_path / "plain")[0].read_text("utf-8")
    assert "unigram (trivial)" in svg and "bigram (trivial)" in svg
    assert "unigram (trivial)" not in plain
    assert svg.count('id="FillBetweenPolyCollection') + svg.count('id="PolyCollection') >= 1


def test_gate_heatmaps_and_the_pca_scatter_are_drawn(tmp_path: Path) -> None:
    matrices = {"attn": ([1, 2], np.array([[0.1, -0.2], [0.0, 0.3]])),
                "ffn": ([1], np.zeros((1, 2)))}  # fmt: skip
    heat = plot_gate_heatmaps(matrices, tmp_path / "heat", "b1")
    coords = np.array([[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]])
    pca = plot_pca(coords, ["a", "a", "b"], ["attn", "ffn", "attn"], [1, 1, 2], tmp_path / "pca")
    assert all(p.is_file() and p.stat().st_size > 0 for p in (*heat, *pca))


def test_without_matplotlib_the_report_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(MissingExtra, match=r"highway-transformer\[report\]"):
        pyplot()


def test_no_empty_and_no_repeated_convergence_panel() -> None:
    """Music logs no training nll and its validation nll is its loss: two panels, not four
    (an empty "training nll" and a copy of "validation loss" read as results)."""
    music = {
        "plain": {"train": {"loss": [(10, 1.0, 9.0)], "nll": []},
                  "valid": {"loss": [(10, 1.0, 8.0)], "nll": [(10, 1.0, 8.0)]}},
    }  # fmt: skip
    assert convergence_panels(music, "nll") == [("train", "loss"), ("valid", "loss")]
    assert convergence_panels(CURVES, "bpc") == [
        ("train", "loss"), ("valid", "loss"), ("valid", "bpc")
    ]  # fmt: skip


def test_the_heatmap_says_how_to_read_it(tmp_path: Path) -> None:
    matrices = {"attn": ([1, 2], np.array([[0.1, -0.2], [0.0, 0.3]]))}
    svg = plot_gate_heatmaps(matrices, tmp_path / "heat", "b1")[0].read_text(encoding="utf-8")
    assert "gated layer" in svg and "dimension of b1" in svg
    assert "Rows: the gated layers" in HEATMAP_NOTE and "red above 0, blue below" in HEATMAP_NOTE
