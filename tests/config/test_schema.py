"""The config schema (``config/schema.py``): defaults, derived widths, dict/JSON round trips
and dotted-key copies that leave the original alone."""

from __future__ import annotations

import json

from highway_transformer.config import Config, GateConfig, ModelConfig
from highway_transformer.config.loading import from_dict


def test_head_width_and_embedding_dropout_follow_their_sources() -> None:
    model = ModelConfig(d_model=64, n_heads=8)
    assert model.head_dim == 8 and model.embedding_dropout == model.dropout
    assert ModelConfig(d_model=64, n_heads=8, d_head=5).head_dim == 5
    assert ModelConfig(dropout=0.3, dropout_emb=0.1).embedding_dropout == 0.1


def test_a_config_round_trips_through_a_dict_and_json() -> None:
    config = Config(name="x", model=ModelConfig(gate=GateConfig("sdu", "tanh", "1-2")))
    config = config.replace(**{"model.adaptive_cutoffs": (10, 20), "train.betas": (0.8, 0.9)})
    assert from_dict(Config, config.to_dict()) == config
    assert from_dict(Config, json.loads(config.to_json())) == config
    assert json.loads(config.to_json()) == json.loads(json.dumps(config.to_dict()))


def test_replace_is_a_copy_with_dotted_overrides() -> None:
    config = Config()
    changed = config.replace(**{"model.gate.kind": "highway", "data.seq_len": 64})
    assert (changed.model.gate.kind, changed.data.seq_len) == ("highway", 64)
    assert (config.model.gate.kind, config.data.seq_len) == ("none", 400)
    assert changed.train == config.train and changed.model.memory is not config.model.memory


def test_sections_are_independent_instances() -> None:
    a, b = Config(), Config()
    a.model.gate.kind = "sdu"
    assert b.model.gate.kind == "none"  # default factories, no shared mutable defaults
