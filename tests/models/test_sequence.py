"""Sequence models (``models/sequence.py``): the music NLL of a model's output by hand, every
family and gate on music and pixel shapes, pooling under a mask, causality, one-line errors."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch

from highway_transformer.config import Config, ModelConfig, TaskConfig
from highway_transformer.data.music import N_KEYS, bernoulli_nll, music_batches
from highway_transformer.errors import ConfigError, DataError
from highway_transformer.models.sequence import SequenceModel, build_sequence_model


@pytest.fixture
def seq_config(tiny_stack_config: Callable[..., ModelConfig]) -> Callable[..., ModelConfig]:
    """``seq_config(family, gate, norm)``: the tiny stack; no positions for an R-Transformer."""
    return lambda family="transformer", gate="none", norm="post": tiny_stack_config(
        family, gate, norm, positional="none" if family == "rtransformer" else "sinusoidal"
    )


def _hand_roll() -> torch.Tensor:
    roll = torch.zeros(4, N_KEYS)
    roll[0, [39, 43, 46]] = 1  # a C major chord
    roll[1, [41, 45]] = 1
    roll[3, 0] = 1  # step 2 is silent
    return roll


def test_music_nll_of_a_model_output_equals_the_hand_computed_value(
    seq_config: Callable[..., ModelConfig],
):
    torch.manual_seed(0)
    model = SequenceModel(seq_config(), N_KEYS, N_KEYS).eval()
    inputs, targets, mask = next(music_batches([_hand_roll()], 1, predict_first=False))
    with torch.no_grad():
        logits = model(inputs)
    got = float(bernoulli_nll(logits, targets, mask))
    roll = _hand_roll()
    total = 0.0
    for t in (1, 2, 3):  # step 0 has nothing before it and is not counted
        for key in range(N_KEYS):
            p = 1.0 / (1.0 + math.exp(-float(logits[0, t, key])))
            y = float(roll[t, key])
            total -= y * math.log(p) + (1.0 - y) * math.log(1.0 - p)
    assert got == pytest.approx(total / 3, rel=1e-5)
    assert torch.equal(inputs[0, 1:], roll[:-1]) and torch.equal(inputs[0, 0], torch.zeros(N_KEYS))


@pytest.mark.parametrize("family", ["transformer", "rtransformer"])
@pytest.mark.parametrize("gate", ["none", "sdu", "highway", "gated"])
def test_every_family_and_gate_on_music_and_pixel_shapes(
    family, gate, seq_config: Callable[..., ModelConfig]
):
    torch.manual_seed(0)
    config = seq_config(family, gate)
    music = SequenceModel(config, N_KEYS, N_KEYS, head="per_step")
    roll = (torch.rand(2, 12, N_KEYS) < 0.1).float()
    logits = music(roll)
    assert logits.shape == (2, 12, N_KEYS)
    pixels = SequenceModel(config, 1, 10, head="pooled")
    scores = pixels(torch.rand(3, 64, 1))
    assert scores.shape == (3, 10)
    (logits.mean() + scores.mean()).backward()
    assert all(p.grad is not None for p in pixels.parameters())
    assert (len(music.gate_biases()) > 0) == (gate != "none")


def test_pooled_last_and_mean_respect_the_mask(seq_config: Callable[..., ModelConfig]):
    torch.manual_seed(0)
    for pooling in ("last", "mean"):
        model = SequenceModel(seq_config(), 2, 1, head="pooled", pooling=pooling).eval()
        x = torch.rand(2, 9, 2)
        mask = torch.ones(2, 9, dtype=torch.bool)
        mask[1, 5:] = False
        out = model(x, mask)
        torch.testing.assert_close(out[1], model(x[1:, :5])[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(out[0], model(x[:1])[0], atol=1e-5, rtol=1e-5)


def test_per_step_model_is_causal(seq_config: Callable[..., ModelConfig]):
    torch.manual_seed(0)
    model = SequenceModel(seq_config("rtransformer", "sdu"), N_KEYS, N_KEYS).eval()
    x = torch.rand(1, 10, N_KEYS)
    changed = x.clone()
    changed[:, 6:] = 1.0
    torch.testing.assert_close(model(x)[:, :6], model(changed)[:, :6])


def test_sequence_model_errors(seq_config: Callable[..., ModelConfig]):
    config = seq_config()
    with pytest.raises(DataError, match="task.max_len=10"):
        SequenceModel(config, 1, 10, max_len=10)(torch.rand(1, 12, 1))
    with pytest.raises(DataError, match=r"\[B, T, 3\]"):
        SequenceModel(config, 3, 2)(torch.rand(1, 5, 4))
    with pytest.raises(ConfigError, match="pooling"):
        SequenceModel(config, 1, 2, head="pooled", pooling="max")
    with pytest.raises(ConfigError, match="family"):
        SequenceModel(ModelConfig(family="xl", d_model=16, n_heads=2), 1, 2)
    full = Config(model=config, task=TaskConfig(name="copy", length=5))
    tokens = build_sequence_model(full, 10, 10, token_input=True)
    assert tokens(torch.randint(0, 10, (2, 7))).shape == (2, 7, 10)
