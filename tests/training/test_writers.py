"""Metrics writers: extra sinks, TensorBoard and Weights & Biases (faked: optional installs)."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from highway_transformer.config import Config
from highway_transformer.errors import MissingExtra
from highway_transformer.training.trainer import Trainer, train


class Collect:
    def __init__(self) -> None:
        self.records: list[dict] = []
        self.closed = False

    def write(self, record: dict) -> None:
        self.records.append(record)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def adding_config(tiny_task_config: Callable[..., Config]) -> Callable[..., Config]:
    """``adding_config(**overrides)``: two steps of the tiny adding task."""
    return lambda **overrides: tiny_task_config(
        "adding/transformer", **{"train.max_steps": 2, **overrides}
    )


def test_extra_writers_get_every_record(
    tmp_path: Path, adding_config: Callable[..., Config]
) -> None:
    sink = Collect()
    Trainer(adding_config(), tmp_path, progress=False, writers=[sink]).fit()
    assert [(r["step"], r["split"]) for r in sink.records] == [
        (1, "train"), (2, "train"), (2, "valid")
    ]  # fmt: skip
    assert sink.closed


def test_tensorboard_only_when_asked_and_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, adding_config: Callable[..., Config]
) -> None:
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # not installed
    with pytest.raises(MissingExtra, match=r"train.tensorboard=true.*\[tensorboard\]"):
        train(adding_config(**{"train.tensorboard": True}), tmp_path / "a", progress=False)
    assert not (tmp_path / "a" / "config.yaml").exists()  # refused before anything is written
    scalars: list[tuple[str, float, int]] = []

    class SummaryWriter:
        def __init__(self, log_dir: str) -> None:
            assert log_dir.endswith("tensorboard")

        def add_scalar(self, tag: str, value: float, step: int) -> None:
            scalars.append((tag, value, step))

        def close(self) -> None:
            pass

    monkeypatch.setitem(sys.modules, "tensorboard", types.ModuleType("tensorboard"))
    fake = types.ModuleType("torch.utils.tensorboard")
    fake.SummaryWriter = SummaryWriter  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", fake)
    train(adding_config(), tmp_path / "off", progress=False)
    assert scalars == [] and not (tmp_path / "off" / "tensorboard").exists()  # installed, not asked
    train(adding_config(**{"train.tensorboard": True}), tmp_path / "on", progress=False)
    tags = {tag for tag, _, _ in scalars}
    assert {"train/loss", "train/lr", "train/rate", "train/grad_norm", "valid/mse"} <= tags


def test_wandb_only_when_asked_and_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, adding_config: Callable[..., Config]
) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # not installed
    with pytest.raises(MissingExtra, match=r"highway-transformer\[wandb\]"):
        train(adding_config(**{"train.wandb_project": "p"}), tmp_path / "a", progress=False)
    assert not (tmp_path / "a" / "config.yaml").exists()  # refused before anything is written
    logged: list[tuple[dict, int]] = []
    run = types.SimpleNamespace(log=lambda data, step: logged.append((data, step)), finish=list)
    fake = types.ModuleType("wandb")
    fake.init = lambda **kwargs: run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "wandb", fake)
    train(adding_config(**{"train.wandb_project": "p"}), tmp_path / "b", progress=False)
    assert [step for _, step in logged] == [1, 2, 2] and "valid/mse" in logged[-1][0]
