"""The gate-bias analysis (``report/gates.py``): the PCA embedding of gate biases and the
names they are recorded under."""

from __future__ import annotations

import numpy as np
import pytest

from highway_transformer.report.gates import bias_matrices, pca_embedding, split_name


def test_pca_handles_few_points() -> None:
    for n in (1, 2, 3, 5, 40):
        coords = pca_embedding(np.random.default_rng(0).normal(size=(n, 8)))
        assert coords.shape == (n, 2) and np.isfinite(coords).all()


def test_pca_finds_the_main_axis_and_is_deterministic() -> None:
    rng = np.random.default_rng(1)
    direction = rng.normal(size=8)
    direction /= np.linalg.norm(direction)
    t = np.linspace(-5, 5, 24)
    points = t[:, None] * direction + 0.01 * rng.normal(size=(24, 8))
    coords = pca_embedding(points)
    # the first axis recovers the position along the line up to sign; the second is noise
    assert abs(np.corrcoef(coords[:, 0], t)[0, 1]) > 0.999
    assert np.abs(coords[:, 1]).max() < 0.1
    assert np.allclose(coords, pca_embedding(points[::-1])[::-1])  # signs fixed: no flips


def test_encoder_decoder_gate_names_keep_their_stack() -> None:
    """A seq2seq model's biases are ``encoder.layerN.KIND`` / ``decoder.layerN.KIND``: each
    stack's sublayers are one heatmap of their own (a report of a gated seq2seq A/B failed)."""
    assert split_name("layer3.ffn") == (3, "ffn")
    assert split_name("encoder.layer1.attn") == (1, "encoder.attn")
    biases = {"encoder.layer1.attn": np.zeros(2), "encoder.layer2.attn": np.ones(2),
              "decoder.layer1.cross": np.ones(2)}  # fmt: skip
    matrices = bias_matrices(biases)
    assert sorted(matrices) == ["decoder.cross", "encoder.attn"]
    assert matrices["encoder.attn"][0] == [1, 2]
    with pytest.raises(ValueError, match="not a gate-bias name"):
        split_name("attn")
