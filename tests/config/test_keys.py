"""Config keys (``config/keys.py``, ``highway config``): every leaf key of the schema once, with
its default and a meaning, and the table of one section."""

from __future__ import annotations

import pytest

from highway_transformer.config import Config
from highway_transformer.config.keys import config_keys, declared_keys, format_keys
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


def test_every_config_field_declares_its_meaning() -> None:
    """A field added as ``name: int = 3  # comment`` (or with an empty meaning) is caught."""
    undeclared = [d.name for d in declared_keys() if d.spec is None or not d.spec.meaning.strip()]
    assert not undeclared, (
        f"config fields without a meaning: {', '.join(undeclared)}; declare each in "
        "config/schema.py as `name: type = key(default, 'what it means', range=... or "
        "choices=...)` (docs/architecture.md, 'Declaring a config key')"
    )


def test_declared_choices_and_ranges_admit_their_defaults() -> None:
    for declared in declared_keys():
        spec, default = declared.spec, declared.default
        assert spec is not None, declared.name
        values = default if isinstance(default, tuple) else (default,)
        for value in (v for v in values if v is not None):
            if spec.choices:
                normalized = spec.normalize(value) if spec.normalize else value
                assert normalized in spec.choices, declared.name
            if spec.range:
                assert spec.range.admits(value), declared.name


def test_a_declared_choice_is_checked_under_the_name_it_declares() -> None:
    from highway_transformer.validation import check_form

    with pytest.raises(ConfigError, match=r"^unknown gate 'sdux'; choose one of: gated"):
        check_form(Config().replace(**{"model.gate.kind": "sdux"}))
    with pytest.raises(ConfigError, match=r"^unknown gated sublayer kind 'mlp'"):
        check_form(Config().replace(**{"model.gate.sublayers": ["attn", "mlp"]}))
    assert check_form(Config().replace(**{"task.score": "Cosine"})).task.score == "Cosine"
