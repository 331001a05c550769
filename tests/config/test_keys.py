"""Config keys (``config/keys.py``, ``highway config``): every leaf key of the schema once, with
its default and a meaning, and the table of one section."""

from __future__ import annotations

import dataclasses
import importlib.util
import typing
from pathlib import Path

import pytest

from highway_transformer.config import Config, TrainConfig, keys, names
from highway_transformer.config.keys import choices_of, config_keys, declared_keys, format_keys
from highway_transformer.config.loading import set_dotted
from highway_transformer.config.ranges import Range
from highway_transformer.config.schema import key
from highway_transformer.errors import ConfigError
from highway_transformer.validation import check_form, check_ranges

ROOT = Path(__file__).resolve().parents[2]


def test_every_leaf_key_once_with_its_default_and_a_meaning() -> None:
    rows = config_keys()
    dotted = [name for name, _, _ in rows]
    assert len(dotted) == len(set(dotted))
    defaults = Config().to_dict()
    for name, default, meaning in rows:
        set_dotted(defaults, name, default)  # each key exists where its dots say
        assert meaning, name
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


def _hints(cls: type = Config, prefix: str = "") -> dict[str, object]:
    """The annotation of every leaf key, by dotted name."""
    out: dict[str, object] = {}
    for name, hint in typing.get_type_hints(cls).items():
        if dataclasses.is_dataclass(hint):
            out |= _hints(hint, f"{prefix}{name}.")  # type: ignore[arg-type]
        else:
            out[f"{prefix}{name}"] = hint
    return out


#: The text keys that name no list: free text, paths, a layer spec, a device form (checked by
#: its own rule), the data sets of a task (checked per task).
FREE_TEXT = {"name", "source", "data.path", "model.gate.layers", "train.device", "task.dataset"}
FREE_TEXT |= {"train.wandb_project"}


def test_every_key_declares_its_meaning_and_its_range_or_choices() -> None:
    """A field added as ``name: int = 3  # comment`` (no ``key(...)``) is caught here."""
    hints = _hints()
    for declared in declared_keys():
        spec, hint = declared.spec, hints[declared.name]
        assert spec is not None and spec.meaning.strip(), (
            f"{declared.name}: declare it in config/schema.py as `name: type = key(default, "
            "'what it means', range=... or choices=...)` (docs/architecture.md, 'Declaring a "
            "config key')"
        )
        parts = set(typing.get_args(hint) or (hint,)) | {hint}
        if parts & {int, float, tuple[int, ...], tuple[float, float]}:
            assert spec.range is not None, f"{declared.name} is numeric: give it a range"
        elif str in parts and declared.name not in FREE_TEXT:
            assert spec.choices, f"{declared.name} names a choice: give it choices"
        values = declared.default if isinstance(declared.default, tuple) else (declared.default,)
        for value in (v for v in values if v is not None):  # each default is allowed
            assert spec.range is None or spec.range.admits(value), declared.name
            read = names.READERS.get(spec.choices or "", lambda v: v)
            assert not spec.choices or read(value) in choices_of(spec), declared.name


def test_choices_are_read_when_validating_so_a_grown_registry_is_accepted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = Config().replace(**{"model.gate.kind": "mine"})
    with pytest.raises(ConfigError, match=r"^unknown gate 'mine'; choose one of: gated, "):
        check_form(config)
    monkeypatch.setattr(names, "GATE_NAMES", (*names.GATE_NAMES, "mine"))
    assert check_form(config) is config


def test_a_key_declared_once_shows_in_highway_config_validation_and_the_docs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One ``key(...)`` line is the whole declaration: a section with one more key, in place
    of ``train``, is printed, range-checked and documented with nothing else written."""
    meaning = "share of the steps spent warming up"
    ratio = key(0.0, meaning, range=Range(0, 1, fix="e.g. 0.02"), source="a paper")
    plus = dataclasses.make_dataclass(
        "TrainPlus", [("warmup_ratio", float, ratio)], bases=(TrainConfig,)
    )
    train = dataclasses.field(default_factory=plus)
    config_plus = dataclasses.make_dataclass(
        "ConfigPlus", [("train", plus, train)], bases=(Config,)
    )
    monkeypatch.setattr(keys, "Config", config_plus)
    line = next(row for row in format_keys("train").splitlines() if "warmup_ratio" in row)
    assert line.split()[:3] == ["train.warmup_ratio", "0.0", "share"] and line.endswith(meaning)
    with pytest.raises(ConfigError) as info:
        check_ranges(config_plus(train=plus(warmup_ratio=2.0)))
    assert str(info.value) == "train.warmup_ratio must be >= 0 and <= 1, got 2.0 (e.g. 0.02)"
    check_ranges(config_plus(train=plus(warmup_ratio=0.5)))
    path = ROOT / "docs_hooks" / "config_reference.py"  # imported by path, as MkDocs does
    spec = importlib.util.spec_from_file_location("docs_hook_config_reference", path)
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    rendered = hook.render(hook.config_rows(ROOT))
    row = f"| `train.warmup_ratio` | `0.0` | >= 0 and <= 1 | {meaning} (source: a paper) |"
    assert row in rendered.splitlines()
