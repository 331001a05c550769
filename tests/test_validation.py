"""Validation (``validation.py``): the one place that knows every registry checks a config
where it enters, in one line per problem."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from highway_transformer.config import Config
from highway_transformer.errors import ConfigError
from highway_transformer.training.trainer import train


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
