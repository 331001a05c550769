"""Suite-wide fixtures: one thread, a tiny text corpus and music file, tiny configs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from highway_transformer.config import Config, DataConfig, GateConfig, ModelConfig, TrainConfig
from highway_transformer.data.download import CACHE_ENV
from highway_transformer.presets import get_preset

#: A small repetitive text: a tiny model learns it in a few steps.
PATTERN = "abcabd abcabe xyzzy. " * 60
#: Model settings that make any preset tiny (one layer, width 16, dropout on).
TINY_MODEL = {
    "model.d_model": 16,
    "model.d_inner": 32,
    "model.n_layers": 1,
    "model.n_heads": 2,
    "model.dropout": 0.1,
}


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny tensors: one intra-op thread avoids thread-pool overhead on a shared CPU."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Token caches and downloads go to a folder of this test session, not the user's cache."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture
def text_file(tmp_path: Path) -> Path:
    path = tmp_path / "pattern.txt"
    path.write_text(PATTERN, encoding="utf-8")
    return path


def tiny_lm_config(path: Path, **overrides) -> Config:
    """A one-layer σ-SDU character model of the text file ``path`` (8 Adam steps)."""
    config = Config(
        name="tiny",
        model=ModelConfig(
            d_model=16, n_layers=1, n_heads=2, d_inner=32, dropout=0.1, gate=GateConfig(kind="sdu")
        ),
        data=DataConfig(
            corpus="file",
            path=str(path),
            level="char",
            batch_size=4,
            seq_len=16,
            context=4,
            eval_batch_size=4,
        ),
        train=TrainConfig(
            optimizer="adam",
            lr=1e-2,
            schedule="constant",
            clip=1.0,
            max_steps=8,
            eval_interval=4,
            log_interval=2,
            seed=7,
        ),
    )
    return config.replace(**overrides) if overrides else config


@pytest.fixture
def lm_config(text_file: Path) -> Callable[..., Config]:
    """``lm_config(**overrides)``: :func:`tiny_lm_config` of the :func:`text_file`."""
    return lambda **overrides: tiny_lm_config(text_file, **overrides)


def tiny_task_config(preset: str, **overrides) -> Config:
    """``preset`` made tiny (:data:`TINY_MODEL`), 6 Adam steps, small evaluation sets."""
    small = {
        **TINY_MODEL,
        "train.max_steps": 6,
        "train.eval_interval": 2,
        "train.log_interval": 1,
        "train.eval_max_tokens": 256,
        "train.optimizer": "adam",
        "train.lr": 1e-2,
        "train.schedule": "constant",
        "train.anneal_rule": "best",  # the only rule without the anneal schedule
        "train.lr_step": 0,  # the step schedule's only
        "train.device": "cpu",
        "data.batch_size": 4,
        "data.eval_batch_size": 16,
    }
    return get_preset(preset).replace(**{**small, **overrides})


def write_music_file(path: Path, lengths: tuple[int, ...] = (6, 9, 4)) -> Path:
    """A tiny piano-roll ``.mat`` file (train/valid/test cells) in the Boulanger layout."""
    from scipy.io import savemat

    rng = np.random.RandomState(0)

    def cells(n: int) -> np.ndarray:
        out = np.empty((1, len(lengths)), dtype=object)
        for i, length in enumerate(lengths):
            out[0, i] = (rng.rand(length + n, 88) < 0.05).astype(np.uint8)
        return out

    savemat(str(path), {"traindata": cells(0), "validdata": cells(1), "testdata": cells(2)})
    return path


@pytest.fixture
def music_file(tmp_path: Path) -> Path:
    pytest.importorskip("scipy.io")
    return write_music_file(tmp_path / "tiny.mat")
