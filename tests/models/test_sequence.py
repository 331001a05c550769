"""Sequence tasks beyond language modelling: music NLL, pixels, copy, adding, presets."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from highway_transformer.api import evaluate_checkpoint, load_pretrained
from highway_transformer.config import Config, ModelConfig, TaskConfig
from highway_transformer.data.music import N_KEYS, bernoulli_nll, music_batches
from highway_transformer.errors import ConfigError, DataError
from highway_transformer.models.sequence import SequenceModel, build_sequence_model
from highway_transformer.presets import rt_tables
from highway_transformer.tasks import MusicTask, build_task_model
from highway_transformer.training.trainer import train
from highway_transformer.validation import validate

DATA_DIR = Path(__file__).resolve().parents[3] / "shared" / "data"
NOTTINGHAM = DATA_DIR / "music" / "Nottingham.mat"


@pytest.fixture
def seq_config(tiny_stack_config: Callable[..., ModelConfig]) -> Callable[..., ModelConfig]:
    """``seq_config(family, gate, norm)``: the tiny stack; no positions for an R-Transformer."""
    return lambda family="transformer", gate="none", norm="post": tiny_stack_config(
        family, gate, norm, positional="none" if family == "rtransformer" else "sinusoidal"
    )


# --------------------------------------------------------------------------- music


def _hand_roll() -> torch.Tensor:
    roll = torch.zeros(4, N_KEYS)
    roll[0, [39, 43, 46]] = 1  # a C major chord
    roll[1, [41, 45]] = 1
    roll[3, 0] = 1  # step 2 is silent
    return roll


def test_music_nll_of_a_model_output_equals_the_hand_computed_value(
    seq_config: Callable[..., ModelConfig],
):
    torch.manual_seed(0)
    model = SequenceModel(seq_config(), N_KEYS, N_KEYS).eval()
    inputs, targets, mask = next(music_batches([_hand_roll()], 1, predict_first=False))
    with torch.no_grad():
        logits = model(inputs)
    got = float(bernoulli_nll(logits, targets, mask))
    roll = _hand_roll()
    total = 0.0
    for t in (1, 2, 3):  # step 0 has nothing before it and is not counted
        for key in range(N_KEYS):
            p = 1.0 / (1.0 + math.exp(-float(logits[0, t, key])))
            y = float(roll[t, key])
            total -= y * math.log(p) + (1.0 - y) * math.log(1.0 - p)
    assert got == pytest.approx(total / 3, rel=1e-5)
    assert torch.equal(inputs[0, 1:], roll[:-1]) and torch.equal(inputs[0, 0], torch.zeros(N_KEYS))


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
    expected, steps = 0.0, 0
    for roll in task.splits.valid:
        for t in range(1, roll.shape[0]):
            for key in range(N_KEYS):
                p = 1.0 / (1.0 + math.exp(-float(bias[key])))
                y = float(roll[t, key])
                expected -= y * math.log(p) + (1.0 - y) * math.log(1.0 - p)
            steps += 1
    metrics = task.evaluate(model, "valid")
    assert metrics["steps"] == steps
    assert metrics["nll"] == pytest.approx(expected / steps, rel=1e-5)


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


# --------------------------------------------------------------------------- pixels


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


# --------------------------------------------------------------------------- copy, adding


def test_copy_memory_runs(tmp_path, rt_preset_config: Callable[..., Config]):
    config = rt_preset_config(
        "copy/rtransformer",
        **{
            "task.length": 10,
            "train.max_steps": 5,
            "train.eval_interval": 5,
            "train.eval_max_tokens": 3000,
        },
    )
    results = train(config, tmp_path, progress=False)
    valid = results["valid"]
    assert 0.0 <= valid["accuracy"] <= 1.0 and math.isfinite(valid["loss"])
    assert valid["baseline_loss"] == pytest.approx(10 * math.log(8) / 30)


def test_adding_runs_and_learns_something(tmp_path, rt_preset_config: Callable[..., Config]):
    config = rt_preset_config(
        "adding/transformer",
        **{
            "task.length": 20,
            "train.max_steps": 60,
            "train.eval_interval": 30,
            "train.eval_max_tokens": 4000,
        },
    )
    results = train(config, tmp_path, progress=False)
    assert results["test"]["mse"] < 0.5
    assert results["steps"] == 60


def test_generated_task_max_len_violation(tmp_path, rt_preset_config: Callable[..., Config]):
    config = rt_preset_config("copy/transformer", **{"task.length": 20, "task.max_len": 30})
    with pytest.raises(DataError, match="task.max_len=30"):
        train(config, tmp_path, progress=False)


# --------------------------------------------------------------------------- models


@pytest.mark.parametrize("family", ["transformer", "rtransformer"])
@pytest.mark.parametrize("gate", ["none", "sdu", "highway", "gated"])
def test_every_family_and_gate_on_music_and_pixel_shapes(
    family, gate, seq_config: Callable[..., ModelConfig]
):
    torch.manual_seed(0)
    config = seq_config(family, gate)
    music = SequenceModel(config, N_KEYS, N_KEYS, head="per_step")
    roll = (torch.rand(2, 12, N_KEYS) < 0.1).float()
    logits = music(roll)
    assert logits.shape == (2, 12, N_KEYS)
    pixels = SequenceModel(config, 1, 10, head="pooled")
    scores = pixels(torch.rand(3, 64, 1))
    assert scores.shape == (3, 10)
    (logits.mean() + scores.mean()).backward()
    assert all(p.grad is not None for p in pixels.parameters())
    assert (len(music.gate_biases()) > 0) == (gate != "none")


def test_pooled_last_and_mean_respect_the_mask(seq_config: Callable[..., ModelConfig]):
    torch.manual_seed(0)
    for pooling in ("last", "mean"):
        model = SequenceModel(seq_config(), 2, 1, head="pooled", pooling=pooling).eval()
        x = torch.rand(2, 9, 2)
        mask = torch.ones(2, 9, dtype=torch.bool)
        mask[1, 5:] = False
        out = model(x, mask)
        torch.testing.assert_close(out[1], model(x[1:, :5])[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(out[0], model(x[:1])[0], atol=1e-5, rtol=1e-5)


def test_per_step_model_is_causal(seq_config: Callable[..., ModelConfig]):
    torch.manual_seed(0)
    model = SequenceModel(seq_config("rtransformer", "sdu"), N_KEYS, N_KEYS).eval()
    x = torch.rand(1, 10, N_KEYS)
    changed = x.clone()
    changed[:, 6:] = 1.0
    torch.testing.assert_close(model(x)[:, :6], model(changed)[:, :6])


def test_sequence_model_errors(seq_config: Callable[..., ModelConfig]):
    config = seq_config()
    with pytest.raises(DataError, match="task.max_len=10"):
        SequenceModel(config, 1, 10, max_len=10)(torch.rand(1, 12, 1))
    with pytest.raises(DataError, match=r"\[B, T, 3\]"):
        SequenceModel(config, 3, 2)(torch.rand(1, 5, 4))
    with pytest.raises(ConfigError, match="pooling"):
        SequenceModel(config, 1, 2, head="pooled", pooling="max")
    with pytest.raises(ConfigError, match="family"):
        SequenceModel(ModelConfig(family="xl", d_model=16, n_heads=2), 1, 2)
    full = Config(model=config, task=TaskConfig(name="copy", length=5))
    tokens = build_sequence_model(full, 10, 10, token_input=True)
    assert tokens(torch.randint(0, 10, (2, 7))).shape == (2, 7, 10)


def test_task_config_errors(tmp_path, rt_preset_config: Callable[..., Config]):
    with pytest.raises(ConfigError, match="pooling"):
        train(
            rt_preset_config("digits/transformer", **{"task.pooling": "max"}),
            tmp_path,
            progress=False,
        )
    with pytest.raises(ConfigError, match="pixel data set"):
        train(
            rt_preset_config("digits/transformer", **{"task.dataset": "cifar"}),
            tmp_path,
            progress=False,
        )
    with pytest.raises(ConfigError, match="score"):
        train(rt_preset_config("seq2seq/toy", **{"task.score": "nope"}), tmp_path, progress=False)


# --------------------------------------------------------------------------- presets


def test_rt_presets_build():
    names = set(rt_tables.PRESETS)
    for table in ("rt-table1", "rt-table2"):
        for family in ("transformer", "rtransformer"):
            assert {f"{table}/{family}", f"{table}/{family}+sigmoid"} <= names
    assert {"digits/transformer", "digits/rtransformer", "seq2seq/toy"} <= names
    for name, (description, build) in rt_tables.PRESETS.items():
        config = validate(build())
        assert config.source and description
        assert config.task.name in ("pixels", "music", "copy", "adding", "seq2seq"), name
        if "+sigmoid" in name:
            assert (config.model.gate.kind, config.model.gate.activation) == ("sdu", "sigmoid")
    mnist = rt_tables.PRESETS["rt-table1/rtransformer"][1]()
    assert (mnist.model.n_layers, mnist.model.d_model, mnist.model.n_heads) == (8, 32, 2)
    assert (mnist.model.local_rnn.window, mnist.model.local_rnn.per_block) == (7, 2)
    assert (mnist.train.optimizer, mnist.train.lr, mnist.data.batch_size) == ("adam", 1e-3, 32)
    notts = rt_tables.PRESETS["rt-table2/rtransformer"][1]()
    assert (notts.model.n_layers, notts.model.d_model, notts.model.n_heads) == (3, 160, 4)
    assert (notts.model.local_rnn.window, notts.model.dropout) == (6, 0.1)
    # audio/experiment.py clips before backward() (nothing) and anneals after epoch 10 when a
    # validation is worse than each of the last 3.
    t = notts.train
    assert t.clip == 0.0
    assert (t.anneal_rule, t.anneal_window, t.anneal_after, t.anneal_factor) == (
        "window-strict",
        3,
        10,
        0.1,
    )
    assert t.eval_interval == rt_tables.NOTTINGHAM_STEPS_PER_EPOCH  # a validation per epoch
    model = build_task_model(rt_tables.PRESETS["rt-table1/transformer"][1]())
    assert model(torch.rand(1, 784, 1)).shape == (1, 10)
