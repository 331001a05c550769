"""Gate layer specs (``model.gate.layers``): which layers and sublayers a gate covers, and
their one-line errors."""

from __future__ import annotations

import pytest

from highway_transformer.config import Config, GateConfig, ModelConfig
from highway_transformer.errors import ConfigError
from highway_transformer.nn.layer_spec import LayerSpec, parse_layer_spec
from highway_transformer.validation import validate


@pytest.mark.parametrize(
    ("spec", "n_layers", "layers", "ffn"),
    [
        ("all", 3, {0, 1, 2}, True),
        ("none", 3, set(), True),
        ("1-3", 6, {0, 1, 2}, True),
        ("3-6", 6, {2, 3, 4, 5}, True),
        ("1,2", 3, {0, 1}, True),
        ("1-2,5", 6, {0, 1, 4}, True),
        ("L1-2", 3, {0, 1}, True),
        ("L1", 3, {0}, True),
        ("1-6\\FFN", 6, {0, 1, 2, 3, 4, 5}, False),
        ("all\\FFN", 2, {0, 1}, False),
    ],
)
def test_parse_layer_spec(spec: str, n_layers: int, layers: set[int], ffn: bool) -> None:
    parsed = parse_layer_spec(spec, n_layers)
    assert {i for i in range(-1, n_layers + 1) if i in parsed} == layers
    assert parsed.ffn == ffn


def test_a_spec_of_any_depth_is_read_at_once() -> None:
    every = parse_layer_spec("all", 10**12)  # a set of every index would never finish
    assert 0 in every and 10**12 - 1 in every and 10**12 not in every
    assert 5 in parse_layer_spec("2-10", 10**12)
    assert not LayerSpec((), True).gated(0, "attn", ("attn",))


def test_layer_spec_gated_respects_ffn_suffix_and_sublayers() -> None:
    spec = parse_layer_spec("1-2\\FFN", 3)
    both = ("attn", "ffn")
    assert spec.gated(0, "attn", both) and spec.gated(1, "attn", both)
    assert not spec.gated(0, "ffn", both)
    assert not spec.gated(2, "attn", both)
    full = parse_layer_spec("2", 3)
    assert full.gated(1, "ffn", both) and full.gated(1, "attn", both)
    assert not full.gated(1, "attn", ("ffn",))
    assert not full.gated(0, "ffn", both)


@pytest.mark.parametrize("spec", ["1-5", "0", "3-1", "4", "1,4"])
def test_layer_spec_outside_the_model(spec: str) -> None:
    with pytest.raises(ConfigError, match="outside 1..3"):
        parse_layer_spec(spec, 3)


@pytest.mark.parametrize("spec", ["abc", "1-x", "1;2"])
def test_layer_spec_unreadable(spec: str) -> None:
    with pytest.raises(ConfigError, match="cannot read gate layer spec"):
        parse_layer_spec(spec, 3)


def test_config_validation_checks_the_layer_spec() -> None:
    model = ModelConfig(d_model=16, n_heads=2, n_layers=3, gate=GateConfig("sdu", layers="1-5"))
    with pytest.raises(ConfigError, match="outside"):
        validate(Config(model=model))
