"""Reading configs (``config/loading.py``): values coerced to the declared types, unknown keys
answered with the closest, YAML and TOML files, ``key=value`` overrides, deep merges, and
configs written back and read again unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from highway_transformer.config import Config, ModelConfig, TrainConfig
from highway_transformer.config.loading import (
    apply_overrides,
    from_dict,
    load_file,
    merge,
    parse_override,
    save_config,
    set_dotted,
)
from highway_transformer.errors import ConfigError


def test_values_are_coerced_to_the_declared_types() -> None:
    train = from_dict(TrainConfig, {"lr": "0.5", "max_steps": "1e3", "betas": "0.9,0.98",
                                    "eval_max_tokens": None})  # fmt: skip
    assert (train.lr, train.max_steps, train.betas) == (0.5, 1000, (0.9, 0.98))
    model = from_dict(ModelConfig, {"tie_weights": "no", "adaptive_cutoffs": [20, "40"]})
    assert model.tie_weights is False and model.adaptive_cutoffs == (20, 40)
    assert from_dict(ModelConfig, {"adaptive_cutoffs": ""}).adaptive_cutoffs == ()
    nested = from_dict(Config, {"model": {"gate": {"kind": "sdu"}}})
    assert nested.model.gate.kind == "sdu" and nested.model.d_model == ModelConfig().d_model


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"max_steps": 2.5}, "train.max_steps must be an integer, got 2.5"),
        ({"max_steps": True}, "train.max_steps must be an integer, got True"),
        ({"lr": "fast"}, "train.lr must be a number, got 'fast'"),
        ({"betas": 0.9}, "train.betas must be a list, got 0.9"),
        ({"betas": [0.9]}, "train.betas must have 2 items, got [0.9]"),
        ({"lr_warmup": 1}, "unknown config key in train: 'lr_warmup'"),
    ],
)
def test_bad_values_and_unknown_keys_are_one_line_errors(data: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        from_dict(TrainConfig, data, prefix="train.")
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_an_unknown_key_suggests_the_closest() -> None:
    with pytest.raises(ConfigError, match="Did you mean 'warmup_steps'"):
        from_dict(TrainConfig, {"warmup_step": 1})


def test_overrides_are_yaml_scalars_on_dotted_keys() -> None:
    assert parse_override("train.lr=0.5") == ("train.lr", 0.5)
    assert parse_override("model.gate.layers=1-3") == ("model.gate.layers", "1-3")
    assert parse_override("name=") == ("name", "")
    assert parse_override("data.path=a=b") == ("data.path", "a=b")
    assert parse_override("x=[1, 2") == ("x", "[1, 2")  # not YAML: the text itself
    with pytest.raises(ConfigError, match="must look like key=value"):
        parse_override("train.lr")
    data = {"model": {"gate": {"kind": "none"}, "d_model": 8}}
    set_dotted(data, "model.gate.kind", "sdu")
    assert data["model"]["gate"]["kind"] == "sdu"
    for key, says in (("model.d_model.x", "is a single value, not a section"),
                      ("model.gate", "is a section; set one of its fields"),
                      ("model.depth", "unknown config key under model:"),
                      ("modle.d_model", "unknown config key 'modle'")):  # fmt: skip
        with pytest.raises(ConfigError, match=says):
            set_dotted(data, key, 1)


def test_files_are_yaml_or_toml_mappings(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("train:\n  lr: 0.5\n", encoding="utf-8")
    (tmp_path / "a.toml").write_text("[train]\nlr = 0.5\n", encoding="utf-8")
    assert (
        load_file(tmp_path / "a.yaml") == load_file(tmp_path / "a.toml") == {"train": {"lr": 0.5}}
    )
    (tmp_path / "list.yaml").write_text("- 1\n", encoding="utf-8")
    (tmp_path / "bad.toml").write_text("[train\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="must hold a mapping of config sections"):
        load_file(tmp_path / "list.yaml")
    with pytest.raises(ConfigError, match=r"^cannot parse .*bad\.toml: "):
        load_file(tmp_path / "bad.toml")
    with pytest.raises(ConfigError, match="does not exist"):
        load_file(tmp_path / "none.yaml")


def test_merge_updates_existing_keys_only() -> None:
    base = {"model": {"d_model": 8, "gate": {"kind": "none"}}, "name": "x"}
    merged = merge(base, {"model": {"gate": {"kind": "sdu"}}})
    assert merged == {"model": {"d_model": 8, "gate": {"kind": "sdu"}}, "name": "x"}
    assert base["model"]["gate"]["kind"] == "none"  # a copy
    with pytest.raises(ConfigError, match="config section model.gate must be a mapping"):
        merge(base, {"model": {"gate": "sdu"}})
    with pytest.raises(ConfigError, match="config key name is a single value"):
        merge(base, {"name": {"x": 1}})
    with pytest.raises(ConfigError, match="unknown config key under model.:"):
        merge(base, {"model": {"width": 1}})


def test_a_file_then_overrides_then_back_to_disk(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("model:\n  d_model: 32\ntrain:\n  lr: 0.5\n")
    config = apply_overrides(Config(), tmp_path / "c.yaml", ["train.lr=0.25", "name=mine"])
    assert (config.model.d_model, config.train.lr, config.name) == (32, 0.25, "mine")
    for name in ("saved.yaml", "saved.json"):
        save_config(config, tmp_path / name)
        assert apply_overrides(Config(), tmp_path / name) == config
