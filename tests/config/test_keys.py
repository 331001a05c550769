"""Config keys (``config/keys.py``, ``highway config``): every leaf key of the schema once, with
its default and a meaning, and the table of one section."""

from __future__ import annotations

import pytest

from highway_transformer.config import Config
from highway_transformer.config.keys import config_keys, format_keys
from highway_transformer.config.loading import set_dotted
from highway_transformer.errors import ConfigError


def test_every_leaf_key_once_with_its_default_and_a_meaning() -> None:
    rows = config_keys()
    keys = [key for key, _, _ in rows]
    assert len(keys) == len(set(keys))
    defaults = Config().to_dict()
    for key, default, meaning in rows:
        set_dotted(defaults, key, default)  # each key exists where its dots say
        assert meaning, key
    assert Config().to_dict() == defaults  # ... and its default is the schema's
    assert dict((k, m) for k, _, m in rows)["model.memory.mem_len"].startswith(
        "Transformer-XL memory length in training"
    )


def test_a_section_table_lines_up_key_default_and_meaning() -> None:
    lines = format_keys("train").splitlines()
    assert all(line.startswith("train.") for line in lines)
    lr = next(line for line in lines if line.startswith("train.lr "))
    assert lr.split()[:3] == ["train.lr", "2.0", "peak"]
    assert len({line.index(line.split()[1], len("train.")) for line in lines[:3]}) == 1
    with pytest.raises(ConfigError) as info:
        format_keys("optim")
    assert str(info.value).startswith("no config section 'optim'; choose one of: ")
    assert "train" in str(info.value) and "model" in str(info.value)
