"""The pixel task (``tasks/pixels.py``): the digits stand-in trains above chance end to end, a
sequence longer than ``task.max_len`` is a one-line error, and the lines to beat on MNIST files
hold the class prior, 1-NN and logistic regression."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from highway_transformer.api import evaluate_checkpoint, load_pretrained
from highway_transformer.config import Config
from highway_transformer.data import images
from highway_transformer.errors import DataError
from highway_transformer.models.sequence import SequenceModel
from highway_transformer.tasks.floor import MARGIN
from highway_transformer.training.trainer import train


def test_digits_default_trains_above_chance(tmp_path, rt_preset_config: Callable[..., Config]):
    pytest.importorskip("sklearn")
    config = rt_preset_config(
        "digits/rtransformer", **{"train.max_steps": 300, "train.eval_interval": 150}
    )
    results = train(config, tmp_path, progress=False)
    assert results["test"]["accuracy"] > 0.3
    assert results["valid"]["examples"] == 270 and results["valid"]["loss_se"] > 0
    # The check reads the best trivial model: logistic regression, far below the class prior
    # (about ln 10), which a model at 30% accuracy would pass.
    check = results["learned"]
    assert set(check["baselines"]) == {"class prior", "logistic regression"}
    assert check["baseline"] == "logistic regression"
    assert check["baseline_loss"] < check["baselines"]["class prior"]
    assert check["learned"] is (check["loss"] < check["baseline_loss"] * (1 - MARGIN))
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


def test_pixel_split_caps_keep_the_first_whole_images(rt_preset_config: Callable[..., Config]):
    from highway_transformer.tasks.pixels import PixelsTask

    pytest.importorskip("sklearn")
    config = rt_preset_config("digits/transformer")
    whole = PixelsTask(config, torch.device("cpu")).splits
    capped = config.replace(**{"data.max_train_tokens": 64 * 10 + 5, "data.max_eval_tokens": 7})
    splits = PixelsTask(capped, torch.device("cpu")).splits
    assert torch.equal(splits.train[0], whole.train[0][:10])  # 10 whole 8 x 8 images
    assert torch.equal(splits.train[1], whole.train[1][:10])
    for cut, full in ((splits.valid, whole.valid), (splits.test, whole.test)):
        assert len(cut[1]) == 1 and torch.equal(cut[0], full[0][:1])  # at least one image


def _mnist_like(root: Path, monkeypatch: pytest.MonkeyPatch, n_train: int, n_test: int) -> None:
    """IDX files of noisy class templates under MNIST's names, pinned as MNIST's content."""
    rng = np.random.RandomState(0)
    templates = rng.randint(0, 256, size=(10, 28, 28))
    for key, n in (("train", n_train), ("test", n_test)):
        y = np.arange(n) % 10
        x = np.clip(templates[y] + rng.randint(-40, 41, size=(n, 28, 28)), 0, 255)
        for part, array in (("images", x.astype(np.uint8)), ("labels", y.astype(np.uint8))):
            entry = images.MNIST[f"{key}-{part}"]
            path = images.write_idx(root / entry.filename, array)
            content = gzip.decompress(path.read_bytes())
            digest = hashlib.sha256(content).hexdigest()
            pinned = replace(entry, content_sha256=digest, content_size=len(content))
            monkeypatch.setitem(images.MNIST, f"{key}-{part}", pinned)


def test_mnist_baselines_hold_the_raw_pixel_classifiers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rt_preset_config: Callable[..., Config]
) -> None:
    from highway_transformer.tasks import task_baselines

    _mnist_like(tmp_path, monkeypatch, n_train=5030, n_test=20)  # the last 5,000: valid
    config = rt_preset_config("rt-table1/transformer", **{"data.path": str(tmp_path)})
    found = task_baselines(config)
    assert list(found) == ["class prior", "1-nearest neighbour", "logistic regression"]
    assert set(found["1-nearest neighbour"]["test"]) == {"accuracy"}  # no probabilities
    assert set(found["logistic regression"]["test"]) == {"loss", "accuracy"}
    for model in ("1-nearest neighbour", "logistic regression"):
        assert found[model]["valid"]["accuracy"] > 0.9 and found[model]["test"]["accuracy"] > 0.9
    assert found["class prior"]["valid"]["accuracy"] == pytest.approx(0.1)
