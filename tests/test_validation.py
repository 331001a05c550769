"""Validation (``validation.py``): the one place that knows every registry checks a config
where it enters, in one line per problem."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from highway_transformer.config import Config, ModelConfig, TrainConfig
from highway_transformer.config.keys import key_ranges
from highway_transformer.config.ranges import Range
from highway_transformer.errors import CheckpointError, ConfigError
from highway_transformer.runtime.compiling import compiles
from highway_transformer.storage.folder import write_manifest
from highway_transformer.training.trainer import train
from highway_transformer.validation import (
    build_config,
    checkpoint_config,
    validate,
    validate_model,
)


def test_task_config_errors(tmp_path, rt_preset_config: Callable[..., Config]):
    with pytest.raises(ConfigError, match="pooling"):
        train(
            rt_preset_config("digits/transformer", **{"task.pooling": "max"}),
            tmp_path,
            progress=False,
        )
    with pytest.raises(ConfigError, match="pixel data set"):
        train(
            rt_preset_config("digits/transformer", **{"task.dataset": "cifar"}),
            tmp_path,
            progress=False,
        )
    with pytest.raises(ConfigError, match="score"):
        train(rt_preset_config("seq2seq/toy", **{"task.score": "nope"}), tmp_path, progress=False)


def test_the_default_config_and_every_field_range_hold() -> None:
    config = Config()
    assert validate(config) is config  # validated in place, returned for chaining
    assert all(Range(1).admits(v) for v in (1, 2.5)) and not Range(1).admits(0.5)
    assert not Range(0).admits(float("nan")) and not Range(0).admits(float("inf"))
    assert Range(0, 1, open_high=True).describe() == ">= 0 and < 1"
    assert "model.dropout" in key_ranges() and "data.seq_len" in key_ranges()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"model.dropout": 1.0}, "model.dropout must be >= 0 and < 1, got 1.0 (a dropout of 0.1"),
        ({"model.adaptive_cutoffs": (10, 0)}, "model.adaptive_cutoffs must be >= 1, got 0"),
        ({"model.d_model": 10, "model.n_heads": 3}, "model.d_model=10 does not divide into"),
        ({"data.context": 400}, "data.context=400 must be in [0, seq_len=400)"),
        ({"data.cache": False}, "data.cache applies to data.corpus=file, not pydoc"),
        (
            {"train.optimizer": "sgd", "train.fused_optimizer": True},
            "train.fused_optimizer applies",
        ),
        ({"train.schedule": "step"}, "train.lr_step=0 with train.schedule=step: the step"),
        ({"task.name": "copy", "model.memory.mem_len": 4}, "task.name=copy has no segment memory"),
        (
            {"task.name": "adding", "data.max_eval_tokens": 100},
            "data.max_train_tokens / data.max_eval_tokens cap the splits of the tasks lm, music,",
        ),
        ({"task.name": "adding", "task.length": 1}, "the adding problem needs task.length >= 2"),
        ({"train.compile": "maybe"}, "unknown train.compile value 'maybe'; choose one of: auto"),
        ({"train.compile_mode": "reduce-overhead"}, "unknown torch.compile mode"),
        (
            {"train.compile": False, "train.compile_mode": "max-autotune-no-cudagraphs"},
            "train.compile_mode=max-autotune-no-cudagraphs applies to a compiled model",
        ),
    ],
)
def test_each_problem_is_one_line_naming_the_setting(overrides: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate(Config().replace(**overrides))
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_api_built_configs_are_type_checked_where_files_are_coerced() -> None:
    config = Config()
    config.model.n_layers = "3"  # type: ignore[assignment]
    with pytest.raises(ConfigError, match="^model.n_layers must be of type int, got '3'$"):
        validate(config)
    assert build_config(Config(), overrides=["model.n_layers=3"]).model.n_layers == 3
    with pytest.raises(ConfigError, match="n_heads"):
        validate_model(ModelConfig(d_model=10, n_heads=3))


def test_a_checkpoints_invalid_config_names_the_file(tmp_path: Path) -> None:
    bad = Config().replace(**{"model.dropout": 2.0})
    (tmp_path / "config.json").write_text(bad.to_json())
    write_manifest(tmp_path)
    with pytest.raises(CheckpointError) as info:
        checkpoint_config(tmp_path)
    assert str(info.value).startswith(f"{tmp_path / 'config.json'} is not a valid config")
    assert "model.dropout must be" in str(info.value)


@pytest.mark.parametrize(
    ("written", "device", "compiled"), [(False, "cuda", False), (True, "cpu", True)]
)
def test_an_earlier_versions_boolean_train_compile_loads_and_means_the_same(
    written: bool, device: str, compiled: bool, tmp_path: Path
) -> None:
    """Configs and checkpoints written before train.compile=auto hold true / false."""
    data = Config().to_dict()
    data["train"]["compile"] = written
    (tmp_path / "config.json").write_text(json.dumps(data))  # a checkpoint's config
    write_manifest(tmp_path)
    (tmp_path / "config.yaml").write_text(f"train:\n  compile: {str(written).lower()}\n")
    from_file = build_config(Config(), tmp_path / "config.yaml")
    from_api = validate(Config(train=TrainConfig(compile=written)))
    for config in (checkpoint_config(tmp_path), from_file, from_api):
        assert compiles(config.train.compile, torch.device(device)) is compiled
    assert (
        checkpoint_config(tmp_path).train.compile == from_file.train.compile == str(written).lower()
    )
