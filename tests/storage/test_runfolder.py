"""The run-folder layout (``storage/runfolder.py``): a saved config compared with a planned one,
metrics read past a torn last line and cut back to a checkpoint's step, results and gate
biases as ``results.json`` records them."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import yaml
from torch import nn

from highway_transformer.config import Config, save_config
from highway_transformer.storage.runfolder import (
    CONFIG_FILE,
    METRICS_FILE,
    config_differences,
    flatten,
    gate_bias_values,
    read_metrics,
    read_results,
    truncate_metrics,
    write_results,
)


def test_flatten_gives_dotted_keys_and_lists_for_tuples() -> None:
    assert flatten({"a": {"b": (1, 2), "c": {"d": None}}, "e": "x"}) == {
        "a.b": [1, 2], "a.c.d": None, "e": "x"
    }  # fmt: skip


def test_config_differences_name_each_changed_setting(tmp_path: Path) -> None:
    planned = Config().replace(**{"train.lr": 0.5, "model.vocab_size": 0})
    assert config_differences(tmp_path, planned) == []  # no config.yaml: nothing to compare
    save_config(
        Config().replace(**{"train.lr": 1.0, "model.vocab_size": 50}), tmp_path / CONFIG_FILE
    )
    assert config_differences(tmp_path, planned) == [("train.lr", 1.0, 0.5)]  # vocab: automatic
    assert config_differences(tmp_path, planned, ignore=frozenset({"train.lr"})) == []
    saved = yaml.safe_load((tmp_path / CONFIG_FILE).read_text())
    del saved["train"]["lr"]  # a setting added after the run trained reads as its default
    (tmp_path / CONFIG_FILE).write_text(yaml.safe_dump(saved))
    assert config_differences(tmp_path, planned) == [("train.lr", Config().train.lr, 0.5)]


def test_metrics_skip_a_torn_line_and_cut_back_to_a_step(tmp_path: Path) -> None:
    assert read_metrics(tmp_path) == []
    records = [{"step": s, "split": "train", "loss": 1.0 / s} for s in (1, 2, 3, 4)]
    text = "".join(json.dumps(r) + "\n" for r in records) + '{"step": 5, "spl'
    (tmp_path / METRICS_FILE).write_text(text)
    assert read_metrics(tmp_path) == records
    truncate_metrics(tmp_path, 2)
    assert read_metrics(tmp_path) == records[:2]
    assert (tmp_path / METRICS_FILE).read_text().endswith("}\n")


def test_results_round_trip_and_an_unreadable_file_is_none(tmp_path: Path) -> None:
    assert read_results(tmp_path) is None
    path = write_results(tmp_path, {"steps": 4, "valid": {"loss": 1.5}})
    assert read_results(tmp_path) == {"steps": 4, "valid": {"loss": 1.5}}
    path.write_text("{trunc")
    assert read_results(tmp_path) is None


def test_gate_bias_values_are_plain_float_lists() -> None:
    class Gated(nn.Module):
        def gate_biases(self) -> dict[str, torch.Tensor]:
            return {"layer1.attn": torch.tensor([0.5, -1.0], dtype=torch.bfloat16)}

    assert gate_bias_values(Gated()) == {"layer1.attn": [0.5, -1.0]}
    assert gate_bias_values(nn.Linear(2, 2)) == {}
