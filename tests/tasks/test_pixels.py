"""The pixel task (``tasks/pixels.py``): the digits stand-in trains above chance end to end, and
a sequence longer than ``task.max_len`` is a one-line error."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from highway_transformer.api import evaluate_checkpoint, load_pretrained
from highway_transformer.config import Config
from highway_transformer.errors import DataError
from highway_transformer.models.sequence import SequenceModel
from highway_transformer.training.trainer import train


def test_digits_default_trains_above_chance(tmp_path, rt_preset_config: Callable[..., Config]):
    pytest.importorskip("sklearn")
    config = rt_preset_config(
        "digits/rtransformer", **{"train.max_steps": 300, "train.eval_interval": 150}
    )
    results = train(config, tmp_path, progress=False)
    assert results["test"]["accuracy"] > 0.3
    assert results["valid"]["examples"] == 270
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert all({"step", "split", "loss"} <= set(r) for r in records)
    assert [r["step"] for r in records if r["split"] == "valid"] == [150, 300]
    assert "accuracy" in records[-1]
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["test"]["accuracy"] == results["test"]["accuracy"]
    assert json.loads((tmp_path / "checkpoint" / "config.json").read_text())["task"]["name"] == (
        "pixels"
    )
    model, _ = load_pretrained(tmp_path)[:2]  # the run folder's checkpoint/
    assert isinstance(model, SequenceModel) and not model.training
    again = evaluate_checkpoint(tmp_path / "best", ("valid",))
    assert again["valid"]["accuracy"] == pytest.approx(results["valid"]["accuracy"])


def test_pixels_max_len_violation(tmp_path, rt_preset_config: Callable[..., Config]):
    pytest.importorskip("sklearn")
    config = rt_preset_config("digits/transformer", **{"task.max_len": 32})
    with pytest.raises(DataError, match="task.max_len=32"):
        train(config, tmp_path, progress=False)
