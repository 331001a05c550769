"""The music task (``tasks/music.py``): evaluation equals the per-step Bernoulli NLL by hand,
the periodic evaluation's cap, and a few training steps on a small file and on Nottingham."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from highway_transformer.config import Config
from highway_transformer.data.music import N_KEYS
from highway_transformer.tasks import MusicTask, build_task_model
from highway_transformer.training.trainer import train

DATA_DIR = Path(__file__).resolve().parents[3] / "shared" / "data"
NOTTINGHAM = DATA_DIR / "music" / "Nottingham.mat"


def test_music_task_evaluation_matches_constant_logits_by_hand(
    tmp_path, rt_preset_config: Callable[..., Config], write_music_file: Callable[..., Path]
):
    pytest.importorskip("scipy.io")
    mat = write_music_file(tmp_path / "tiny.mat")
    config = rt_preset_config(
        "rt-table2/transformer", **{"task.dataset": str(mat), "data.eval_batch_size": 2}
    )
    task = MusicTask(config, torch.device("cpu"))
    model = task.build_model(config).eval()
    bias = torch.linspace(-2.0, 1.0, N_KEYS)
    with torch.no_grad():  # the output no longer depends on the input: sigmoid(bias) per key
        model.output.weight.zero_()
        model.output.bias.copy_(bias)
    per_step = []
    for roll in task.splits.valid:
        for t in range(1, roll.shape[0]):
            nll = 0.0
            for key in range(N_KEYS):
                p = 1.0 / (1.0 + math.exp(-float(bias[key])))
                y = float(roll[t, key])
                nll -= y * math.log(p) + (1.0 - y) * math.log(1.0 - p)
            per_step.append(nll)
    metrics = task.evaluate(model, "valid")
    steps, expected = len(per_step), sum(per_step) / len(per_step)
    assert metrics["steps"] == steps
    assert metrics["nll"] == pytest.approx(expected, rel=1e-5)
    spread = math.sqrt(sum((v - expected) ** 2 for v in per_step) / (steps - 1))
    assert metrics["loss_se"] == pytest.approx(spread / math.sqrt(steps), rel=1e-4)
    trivial = task.trivial_losses("valid")  # the report's baselines, on the valid split
    assert trivial == {name: by["valid"]["nll"] for name, by in task.baselines().items()}


def test_music_periodic_evaluation_honours_eval_max_tokens(
    tmp_path, rt_preset_config: Callable[..., Config], write_music_file: Callable[..., Path]
):
    pytest.importorskip("scipy.io")
    mat = write_music_file(tmp_path / "tiny.mat")  # valid pieces of 7, 10 and 5 steps
    config = rt_preset_config("rt-table2/transformer", **{"task.dataset": str(mat)})
    model = build_task_model(config).eval()

    def counted(cap: int | None, quick: bool) -> float:
        capped = config.replace(**{"train.eval_max_tokens": cap})
        return MusicTask(capped, torch.device("cpu")).evaluate(model, "valid", quick)["steps"]

    # the first pieces within the cap (at least one); the first step of each is not counted
    assert counted(17, quick=True) == 6 + 9
    assert counted(3, quick=True) == 6
    assert counted(3, quick=False) == counted(None, quick=True) == 6 + 9 + 4


def test_music_split_caps_keep_the_first_whole_pieces(
    tmp_path, rt_preset_config: Callable[..., Config], write_music_file: Callable[..., Path]
):
    pytest.importorskip("scipy.io")
    mat = write_music_file(tmp_path / "tiny.mat")  # every split: pieces of 7, 10 and 5 steps
    config = rt_preset_config("rt-table2/transformer", **{"task.dataset": str(mat)})
    whole = MusicTask(config, torch.device("cpu")).splits
    capped = config.replace(**{"data.max_train_tokens": 17, "data.max_eval_tokens": 3})
    splits = MusicTask(capped, torch.device("cpu")).splits
    assert [len(p) for p in splits.train] == [len(p) for p in whole.train[:2]]  # 7 + 10
    for cut, full in ((splits.valid, whole.valid), (splits.test, whole.test)):
        assert len(cut) == 1 and torch.equal(cut[0], full[0])  # at least one piece


def test_music_run_on_a_small_file(
    tmp_path, rt_preset_config: Callable[..., Config], write_music_file: Callable[..., Path]
):
    pytest.importorskip("scipy.io")
    mat = write_music_file(tmp_path / "tiny.mat")
    config = rt_preset_config(
        "rt-table2/rtransformer",
        **{
            "task.dataset": str(mat),
            "train.max_steps": 6,
            "train.eval_interval": 3,
            "train.optimizer": "adam",
            "train.lr": 1e-2,
            "train.schedule": "constant",
            "train.anneal_rule": "best",
        },
    )
    results = train(config, tmp_path / "run", progress=False)
    assert results["valid"]["nll"] < 88 * math.log(2)  # better than p = 1/2 everywhere
    assert (tmp_path / "run" / "best" / "model.safetensors").is_file()


@pytest.mark.skipif(not NOTTINGHAM.is_file(), reason="Nottingham.mat not in ../shared/data/music")
def test_nottingham_few_steps_beat_the_uniform_guess(
    tmp_path, rt_preset_config: Callable[..., Config]
):
    config = rt_preset_config(
        "rt-table2/rtransformer+sigmoid",
        **{
            "data.path": str(DATA_DIR),
            "data.batch_size": 4,
            "data.eval_batch_size": 32,
            "train.max_steps": 8,
            "train.eval_interval": 8,
            "train.optimizer": "adam",
            "train.lr": 1e-2,
            "train.schedule": "constant",
            "train.anneal_rule": "best",
        },
    )
    results = train(config, tmp_path, progress=False)
    assert results["valid"]["steps"] == 45513 - 173  # every step but the first of each piece
    assert results["test"]["nll"] < 88 * math.log(2)
