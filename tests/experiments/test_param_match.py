"""Parameter-matched baselines (``experiments/param_match.py``): the plain model's FFN widened
until it has a gated row's parameter count."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from highway_transformer.config import Config, GateConfig, ModelConfig
from highway_transformer.experiments.param_match import (
    count_parameters,
    match_parameters,
    matched_d_inner,
)
from highway_transformer.models.lm import LanguageModel


def test_parameters_are_counted_at_a_fixed_vocabulary(
    tiny_model_config: Callable[..., ModelConfig],
) -> None:
    model = tiny_model_config(vocab_size=1000)
    built = LanguageModel(tiny_model_config(vocab_size=64))
    assert count_parameters(model) == sum(p.numel() for p in built.parameters())
    assert count_parameters(tiny_model_config(vocab_size=5)) == count_parameters(model)


@pytest.mark.parametrize("gate", [GateConfig(kind="sdu"), GateConfig(kind="highway", layers="1")])
def test_the_widened_plain_model_has_the_gated_rows_parameters(
    gate: GateConfig, tiny_model_config: Callable[..., ModelConfig]
) -> None:
    plain, gated = tiny_model_config(), tiny_model_config(gate=gate)
    d_inner = matched_d_inner(plain, gated)
    per_unit = 2 * plain.n_layers * plain.d_model + plain.n_layers  # fc1 column, fc2 row, bias
    widened = ModelConfig(**{**plain.__dict__, "d_inner": d_inner})
    assert d_inner > plain.d_inner
    assert abs(count_parameters(widened) - count_parameters(gated)) <= per_unit / 2
    assert matched_d_inner(plain, plain) == plain.d_inner


def test_match_parameters_changes_d_inner_alone(
    tiny_model_config: Callable[..., ModelConfig],
) -> None:
    torch.manual_seed(0)
    config = Config(model=tiny_model_config())
    target = Config(model=tiny_model_config(gate=GateConfig(kind="sdu")))
    matched = match_parameters(config, target)
    assert matched.model.d_inner == matched_d_inner(config.model, target.model)
    assert matched.replace(**{"model.d_inner": config.model.d_inner}) == config


def test_swiglu_rows_match_the_nearest_hidden_size_step() -> None:
    """A SwiGLU FFN's parameters move in steps of 8 hidden units: the match is the nearest
    step (gates-eras' parameter-matched plain row), not a division by a zero slope."""
    from highway_transformer.experiments.param_match import _count_with, matched_d_inner
    from highway_transformer.experiments.registry import get_experiment

    plain = get_experiment("gates-eras/plain").config().model
    gated = get_experiment("gates-eras/sdu-sigmoid").config().model
    goal = count_parameters(gated)
    d = matched_d_inner(plain, gated)
    best = min(abs(_count_with(plain, k) - goal) for k in range(plain.d_inner, 2 * d))
    assert abs(_count_with(plain, d) - goal) == best
    assert abs(_count_with(plain, d) - goal) / goal < 0.01
