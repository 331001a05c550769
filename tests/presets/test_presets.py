"""The preset registry (``presets/__init__.py``): every preset validates and names its source,
``get_preset`` gives a fresh, named copy, unknown names point at ``highway presets``, users
register their own, and each task starts from its preset."""

from __future__ import annotations

import pytest

from highway_transformer.config import Config
from highway_transformer.errors import ConfigError
from highway_transformer.presets import (
    PRESETS,
    TASK_PRESETS,
    get_preset,
    gtrxl_shaw,
    ht_tables,
    modern,
    register,
    rl,
    rt_tables,
    task_preset,
    xl_tables,
)
from highway_transformer.validation import validate


def test_the_registry_is_every_table_modules_presets_once() -> None:
    modules = (ht_tables, xl_tables, gtrxl_shaw, rt_tables, rl, modern)
    names = [name for module in modules for name in module.PRESETS]
    assert len(names) == len(set(names)) == len(PRESETS)
    for name, preset in PRESETS.items():
        config = validate(preset.build())
        assert preset.name == name and preset.description and config.source, name


def test_get_preset_is_a_fresh_copy_named_after_the_preset() -> None:
    a = get_preset("ht-table1/t-l3+tanh")
    assert a.name == "ht-table1_t-l3+tanh"
    a.model.d_model = 8
    assert get_preset("ht-table1/t-l3+tanh").model.d_model == 512


def test_an_unknown_preset_names_the_closest_and_the_listing_command() -> None:
    with pytest.raises(ConfigError) as info:
        get_preset("ht-table1/t-l3+tanhh")
    message = str(info.value)
    assert message.startswith("unknown preset 'ht-table1/t-l3+tanhh'. Did you mean")
    assert message.endswith(f"`highway presets` lists all {len(PRESETS)}")


def test_a_registered_preset_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("highway_transformer.presets.PRESETS", dict(PRESETS))
    register("mine/tiny", "my tiny run", lambda: Config(source="me"))
    assert get_preset("mine/tiny").source == "me" and get_preset("mine/tiny").name == "mine_tiny"


@pytest.mark.parametrize("task", ["lm", *TASK_PRESETS])
def test_each_task_starts_from_its_preset(task: str) -> None:
    config = task_preset(task)
    assert config.task.name == task
    if task == "lm":
        assert config == Config()
