"""The one trainer over every task: the loss falls, exact resume, refusals, writers, precision,
metadata."""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import torch

from highway_transformer.config import Config
from highway_transformer.errors import CheckpointError, ConfigError, TrainingDiverged
from highway_transformer.runtime import device as device_module
from highway_transformer.storage import runfolder
from highway_transformer.storage.folder import MODEL_FILE, STATE_FILE, TENSOR_FILE
from highway_transformer.storage.runfolder import read_metrics
from highway_transformer.tasks import TASKS
from highway_transformer.tasks.lm_scoring import evaluate
from highway_transformer.training import checkpoint as ckpt
from highway_transformer.training.trainer import Trainer, train
from highway_transformer.validation import validate

LM_RESUME = {
    "train.max_steps": 6,
    "train.eval_interval": 2,
    "train.log_interval": 1,
    "data.seq_len": 8,  # several passes over the training stream
    "data.context": 2,
    "data.max_train_tokens": 120,
}
XL_MEMORY = {"model.family": "xl", "model.attention": "relative", "model.memory.mem_len": 8}


@pytest.fixture
def case_config(
    tmp_path: Path,
    tiny_lm_config: Callable[..., Config],
    tiny_task_config: Callable[..., Config],
    write_music_file: Callable[..., Path],
) -> Callable[[str], Config]:
    """``case_config(case)``: the tiny config of a task ("lm", "xl-memory", "music", ...)."""

    def config(case: str) -> Config:
        if case in ("lm", "xl-memory"):
            text = tmp_path / "pattern.txt"
            text.write_text("abcabd abcabe xyzzy. " * 60, encoding="utf-8")
            extra = XL_MEMORY if case == "xl-memory" else {}
            return tiny_lm_config(text, **LM_RESUME, **extra)
        if case == "music":
            pytest.importorskip("scipy.io")
            mat = write_music_file(tmp_path / "tiny.mat", lengths=(6, 9, 4, 7, 5))
            return tiny_task_config("rt-table2/transformer", **{"task.dataset": str(mat)})
        if case == "pixels":
            pytest.importorskip("sklearn")
            return tiny_task_config("digits/transformer")
        preset = {
            "copy": "copy/transformer",
            "adding": "adding/transformer",
            "seq2seq": "seq2seq/toy",
        }
        return tiny_task_config(preset[case])

    return config


def _without_clock(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("time", "rate")} for r in records]


@pytest.mark.parametrize(
    "case", ["lm", "xl-memory", "music", "pixels", "copy", "adding", "seq2seq"]
)
def test_interrupted_and_resumed_equals_uninterrupted(
    case: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    interrupt_after_step: Callable[[pytest.MonkeyPatch, int], None],
    case_config: Callable[[str], Config],
) -> None:
    """Bit for bit: weights, best weights, metrics records and results."""
    config = case_config(case)
    one, two = tmp_path / "one", tmp_path / "two"
    train(config, one)
    with monkeypatch.context() as patch:
        interrupt_after_step(patch, 2)
        with pytest.raises(KeyboardInterrupt):
            train(config, two)
    assert ckpt.load_trainer_state(two / "checkpoint").step == 2
    torch.manual_seed(12345)  # the resumed run must not depend on the global RNG state
    train(config, two, resume=True)
    for folder in ("checkpoint", "best"):
        a = (one / folder / MODEL_FILE).read_bytes()
        assert a == (two / folder / MODEL_FILE).read_bytes(), folder
    a_records = _without_clock(runfolder.read_metrics(one))
    assert a_records == _without_clock(runfolder.read_metrics(two))
    assert [r["step"] for r in a_records if r["split"] == "valid"] == [2, 4, 6]
    a, b = runfolder.read_results(one), runfolder.read_results(two)
    assert a is not None and b is not None
    assert (a["valid"], a["test"], a["best_step"]) == (b["valid"], b["test"], b["best_step"])
    # Where each stretch of training ran: one stretch uninterrupted, two when resumed.
    assert [(x["from_step"], x["to_step"]) for x in a["stretches"]] == [(0, 6)]
    assert [(x["from_step"], x["to_step"]) for x in b["stretches"]] == [(0, 2), (2, 6)]
    assert all(x["threads"] >= 1 and x["seconds"] >= 0 for x in b["stretches"])
    assert sum(x["seconds"] for x in b["stretches"]) == pytest.approx(b["train_seconds"])
    # Each stretch's wall-clock start (UTC), the first one the run's start.
    starts = [datetime.fromisoformat(x["started_at"]) for x in b["stretches"]]
    assert all(t.tzinfo is not None for t in starts) and starts == sorted(starts)
    assert b["started_at"] == b["stretches"][0]["started_at"]
    assert abs(datetime.now(timezone.utc) - starts[0]) < timedelta(minutes=10)


def test_xl_memory_is_carried_in_the_checkpoint(
    tmp_path: Path, case_config: Callable[[str], Config]
) -> None:
    config = case_config("xl-memory")
    train(config, tmp_path / "run")
    state = ckpt.task_state(ckpt.load_trainer_state(tmp_path / "run" / "checkpoint"))
    assert state["memory_layers"] == 1 and state["memory.0"].shape == (4, 8, 16)


def test_resume_of_another_tasks_run_is_refused(
    tmp_path: Path, tiny_task_config: Callable[..., Config]
) -> None:
    run = tmp_path / "run"
    train(tiny_task_config("adding/transformer", **{"train.max_steps": 2}), run)
    before = (run / "checkpoint" / MODEL_FILE).read_bytes()
    with pytest.raises(CheckpointError, match="holds a adding run.*task.name=copy"):
        train(tiny_task_config("copy/transformer"), run, resume=True)
    assert (run / "checkpoint" / MODEL_FILE).read_bytes() == before


def test_resume_with_other_task_settings_is_refused(
    tmp_path: Path, tiny_task_config: Callable[..., Config]
) -> None:
    run = tmp_path / "run"
    train(tiny_task_config("copy/transformer", **{"train.max_steps": 2, "task.length": 12}), run)
    with pytest.raises(CheckpointError, match=r"task config differs in task.length=12 \(saved\)"):
        train(tiny_task_config("copy/transformer", **{"task.length": 13}), run, resume=True)


def test_task_run_refuses_to_overwrite(
    tmp_path: Path, tiny_task_config: Callable[..., Config]
) -> None:
    run = tmp_path / "run"
    train(tiny_task_config("adding/transformer", **{"train.max_steps": 2}), run)
    with pytest.raises(ConfigError, match="already holds a run .*--resume.*--overwrite"):
        train(tiny_task_config("adding/transformer"), run)


@pytest.mark.parametrize("task", ["pixels", "music", "copy", "adding", "seq2seq"])
def test_memory_settings_on_a_task_without_memory_are_an_error(task: str) -> None:
    config = Config().replace(**{"task.name": task, "model.memory.mem_len": 16})
    with pytest.raises(ConfigError, match=f"task.name={task} has no segment memory"):
        validate(config)


def test_every_task_has_its_metrics_and_headline() -> None:
    assert set(TASKS) == {"lm", "music", "pixels", "copy", "adding", "seq2seq", "rl"}
    for task in TASKS.values():
        assert task.metrics["loss"] == "lower" and task.headline in task.metrics
    assert TASKS["pixels"].metrics["accuracy"] == "higher"


def test_config_validation_reads_the_task_names(monkeypatch: pytest.MonkeyPatch) -> None:
    from highway_transformer.config import names

    config = Config().replace(**{"task.name": "lm"})
    # the registry's name list decides which names are valid (held equal to TASKS by a test)
    monkeypatch.setattr(names, "TASK_NAMES", tuple(n for n in TASKS if n != "lm"))
    with pytest.raises(ConfigError, match="unknown task 'lm'"):
        validate(config)


def test_log_records_and_live_csv(tmp_path: Path, tiny_task_config: Callable[..., Config]) -> None:
    run = tmp_path / "run"
    trainer = Trainer(tiny_task_config("adding/transformer", **{"model.gate.kind": "sdu"}), run)
    original = trainer._periodic_evaluation

    def check_csv_is_live() -> None:
        rows = list(csv.DictReader((run / runfolder.METRICS_CSV).open(encoding="utf-8")))
        steps = [int(r["step"]) for r in rows if r["split"] == "train"]
        assert steps == list(range(1, trainer.state.step + 1))
        original()

    trainer._periodic_evaluation = check_csv_is_live  # type: ignore[method-assign]
    trainer.fit()
    train_records = [r for r in runfolder.read_metrics(run) if r["split"] == "train"]
    assert len(train_records) == 6
    for record in train_records:
        assert {"loss", "lr", "rate", "grad_norm", "gate_bias_norm"} <= set(record)
        assert record["grad_norm"] > 0 and record["rate"] > 0
    rows = list(csv.DictReader((run / runfolder.METRICS_CSV).open(encoding="utf-8")))
    assert len(rows) == len(runfolder.read_metrics(run))


def test_results_record_run_metadata(
    tmp_path: Path, tiny_task_config: Callable[..., Config]
) -> None:
    results = train(tiny_task_config("adding/transformer", **{"train.max_steps": 2}), tmp_path)
    meta = results["metadata"]
    assert {"threads", "device", "precision", "torch", "cpu_capability", "host"} <= set(meta)
    assert meta["compiled"] is False  # train.compile=auto: eager on the CPU
    assert meta["precision"] == "fp32" and results["train_seconds"] > 0
    assert results["task"] == "adding" and results["headline"] == "mse"


def test_checkpoint_interval_is_honoured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_task_config: Callable[..., Config]
) -> None:
    saved: list[int] = []
    original = Trainer.save

    def record(self: Trainer) -> Path:
        saved.append(self.state.step)
        return original(self)

    monkeypatch.setattr(Trainer, "save", record)
    overrides = {"train.max_steps": 7, "train.eval_interval": 100, "train.checkpoint_interval": 3}
    train(tiny_task_config("adding/transformer", **overrides), tmp_path)
    assert saved == [3, 6, 7]


def test_keep_checkpoints_keeps_the_last_k_and_each_resumes_the_same_run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    interrupt_after_step: Callable[[pytest.MonkeyPatch, int], None],
    tiny_task_config: Callable[..., Config],
) -> None:
    """``train.keep_checkpoints=3``: checkpoint/ and the two before it in checkpoints/; a run
    resumed from the newest equals the uninterrupted one bit for bit, and so does one resumed
    from an older, archived checkpoint."""
    overrides = {
        "train.max_steps": 7,
        "train.eval_interval": 100,
        "train.checkpoint_interval": 1,
        "train.keep_checkpoints": 3,
    }
    config = tiny_task_config("adding/transformer", **overrides)
    one, two, three = tmp_path / "one", tmp_path / "two", tmp_path / "three"
    train(config, one)
    with monkeypatch.context() as patch:
        interrupt_after_step(patch, 4)
        with pytest.raises(KeyboardInterrupt):
            train(config, two)
    assert [p.name for p in runfolder.archived_checkpoints(two)] == ["step-000002", "step-000003"]
    train(config, two, resume=True)

    def kept(run: Path) -> dict[str, tuple[bytes, bytes]]:
        folders = [run / "checkpoint", *runfolder.archived_checkpoints(run)]
        return {
            f.name: ((f / MODEL_FILE).read_bytes(), (f / TENSOR_FILE).read_bytes()) for f in folders
        }

    assert list(kept(one)) == ["checkpoint", "step-000005", "step-000006"]
    assert kept(one) == kept(two)
    assert ckpt.load_trainer_state(one / "checkpoints" / "step-000005").step == 5
    (three / "checkpoint").parent.mkdir()
    shutil.copytree(two / "checkpoints" / "step-000005", three / "checkpoint")
    train(config, three, resume=True)
    assert kept(three)["checkpoint"] == kept(one)["checkpoint"]


def test_a_restart_continues_from_the_checkpoint_whatever_the_first_attempt_asked(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    interrupt_after_step: Callable[[pytest.MonkeyPatch, int], None],
    tiny_task_config: Callable[..., Config],
) -> None:
    """A process torchrun started again (``TORCHELASTIC_RESTART_COUNT`` > 0) resumes the last
    checkpoint even when the first attempt said ``--overwrite``, ends equal to an
    uninterrupted run, and says so in one log line and one ``restart`` record; without a
    checkpoint it starts again from step 0, the failed attempt's records dropped."""
    config = tiny_task_config("adding/transformer", **{"train.max_steps": 6})
    one, two, three = tmp_path / "one", tmp_path / "two", tmp_path / "three"
    train(config, one)
    with monkeypatch.context() as patch:
        interrupt_after_step(patch, 2)
        with pytest.raises(KeyboardInterrupt):
            train(config, two)
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", "2")
    said: list[str] = []
    train(config, two, overwrite=True, log=said.append)
    assert said[0] == "restart 1 of 2 after a rank failed: resumed from the checkpoint at step 2"
    assert (one / "checkpoint" / MODEL_FILE).read_bytes() == (
        two / "checkpoint" / MODEL_FILE
    ).read_bytes()
    restarts = [r for r in read_metrics(two) if r["split"] == "restart"]
    assert restarts == [{"step": 2, "split": "restart", "restart": 1, "max_restarts": 2}]
    others = [r for r in read_metrics(two) if r["split"] != "restart"]
    assert _without_clock(others) == _without_clock(read_metrics(one))
    # a failure before the first checkpoint: the attempt's records go, training starts over
    three.mkdir()
    (three / runfolder.METRICS_FILE).write_text('{"step": 1, "split": "train", "loss": 9.0}\n')
    said.clear()
    train(config, three, log=said.append)
    assert said[0].endswith("after a rank failed: no checkpoint yet: started again from step 0")
    assert _without_clock(
        [r for r in read_metrics(three) if r["split"] != "restart"]
    ) == _without_clock(read_metrics(one))


ASYNC = {
    "train.max_steps": 8,
    "train.eval_interval": 100,  # best/ at the end only
    "train.checkpoint_interval": 2,
    "train.keep_checkpoints": 2,
}


def test_checkpoints_written_in_the_background_are_those_written_in_step(
    tmp_path: Path, tiny_task_config: Callable[..., Config]
) -> None:
    """``train.async_checkpoint=true`` writes the state of the step it was taken at (later
    steps change none of it): the same checkpoints, records and results as waiting for each."""
    config = tiny_task_config("adding/transformer", **ASYNC)
    background = config.replace(**{"train.async_checkpoint": True})
    waited, threaded = tmp_path / "waited", tmp_path / "threaded"
    train(config, waited)
    train(background, threaded)
    for folder in ("checkpoint", "checkpoints/step-000006", "best"):
        for name in (MODEL_FILE, TENSOR_FILE):
            if (waited / folder / name).is_file():
                assert (waited / folder / name).read_bytes() == (
                    threaded / folder / name
                ).read_bytes(), (folder, name)
    assert _without_clock(read_metrics(waited)) == _without_clock(read_metrics(threaded))


KILL_IN_SECOND_WRITE = """
import os, signal, sys
from highway_transformer.config import Config
from highway_transformer.training import checkpoint
from highway_transformer.training.trainer import train
from highway_transformer.validation import build_config

real, calls = checkpoint.save_weights, []

def half_then_killed(model, path):
    calls.append(path)
    real(model, path)
    if len(calls) == 2:  # the second checkpoint: half its weights on disk, then SIGKILL
        os.truncate(path, os.path.getsize(path) // 2)
        os.kill(os.getpid(), signal.SIGKILL)

checkpoint.save_weights = half_then_killed
train(build_config(Config(), sys.argv[1], []), sys.argv[2], progress=False)
"""


def test_a_background_write_killed_midway_leaves_the_previous_checkpoint_newest(
    tmp_path: Path, tiny_task_config: Callable[..., Config]
) -> None:
    import signal
    import subprocess
    import sys

    from highway_transformer.api import load_pretrained
    from highway_transformer.config import save_config

    config = tiny_task_config("adding/transformer", **ASYNC, **{"train.async_checkpoint": True})
    save_config(config, tmp_path / "config.yaml")
    run = tmp_path / "run"
    command = [sys.executable, "-c", KILL_IN_SECOND_WRITE, str(tmp_path / "config.yaml"), str(run)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    assert ckpt.load_trainer_state(run / "checkpoint").step == 2  # checked against its manifest
    load_pretrained(run / "checkpoint", torch.device("cpu"))
    train(config, run, resume=True)  # and the run goes on from it
    assert runfolder.read_results(run)["steps"] == 8


def test_divergence_before_any_checkpoint_names_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_task_config: Callable[..., Config]
) -> None:
    trainer = Trainer(tiny_task_config("adding/transformer"), tmp_path / "run")
    monkeypatch.setattr(
        trainer.task,
        "loss",
        lambda model, batch: (torch.tensor(float("nan"), requires_grad=True), 1),
    )
    with pytest.raises(TrainingDiverged, match="no checkpoint was written") as caught:
        trainer.fit()
    assert "checkpoint/" not in str(caught.value) and not (tmp_path / "run" / "checkpoint").exists()


def test_fp16_trains_with_a_gradient_scaler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_task_config: Callable[..., Config]
) -> None:
    """The scaler's state is checkpointed with the rest (CPU emulation allowed for the test)."""
    monkeypatch.setattr(device_module, "check_precision", lambda device, precision: None)
    config = tiny_task_config("adding/transformer", **{"train.precision": "fp16"})
    trainer = Trainer(config, tmp_path / "run")
    assert trainer.scaler.is_enabled()
    results = trainer.fit()
    assert results["valid"]["mse"] == results["valid"]["mse"]  # finite, not NaN
    info = json.loads((tmp_path / "run" / "checkpoint" / STATE_FILE).read_text())
    assert info["scaler"]["scale"] > 0


def test_emulated_reduced_precision_is_refused(
    monkeypatch: pytest.MonkeyPatch, tiny_task_config: Callable[..., Config]
) -> None:
    monkeypatch.setattr("highway_transformer.runtime.hardware.cpu_native", lambda precision: False)
    config = tiny_task_config("adding/transformer", **{"train.precision": "bf16"})
    with pytest.raises(ConfigError, match="would be emulated"):
        Trainer(config, "unused")


def test_log_lines_go_around_the_progress_bar(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    tiny_task_config: Callable[..., Config],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("highway_transformer.training.writers.on_terminal", lambda: True)
    lines: list[str] = []
    train(tiny_task_config("adding/transformer"), tmp_path, progress=True, log=lines.append)
    steps = [line.split(":")[0] for line in lines if line.startswith("step ")]
    assert steps == ["step 2", "step 4", "step 6"]  # (six steps learn nothing: a warning too)


@pytest.mark.parametrize("weights", ["best", "last"])
def test_results_score_the_weights_final_weights_names(
    weights: str, tmp_path: Path, case_config: Callable[[str], Config]
) -> None:
    """results.json scores the best validation's weights, or the last step's (the RT char
    script reports its last epoch's model)."""
    config = case_config("lm")
    config.train.lr, config.train.final_weights = 1.0, weights  # the last step is not the best
    config.model.dropout = config.model.dropout_emb = 0.0  # no random draws: a fixed trajectory
    results = train(config, tmp_path / "run", progress=False)
    losses = {
        r["step"]: r["loss"]
        for r in runfolder.read_metrics(tmp_path / "run")
        if r.get("split") == "valid"
    }
    assert losses[6] > min(losses.values())
    expected = losses[6] if weights == "last" else min(losses.values())
    assert results["valid"]["loss"] == pytest.approx(expected, abs=1e-6)
    # what a registered comparison reads: the last weights, whichever results.json scores
    assert results["final"]["step"] == 6
    assert results["final"]["valid"]["loss"] == pytest.approx(losses[6], abs=1e-6)
    assert set(results["final"]["test"]) == set(results["test"])


def test_loss_falls_on_a_tiny_corpus(
    text_file: Path, tmp_path: Path, tiny_lm_config: Callable[..., Config]
) -> None:
    config = tiny_lm_config(
        text_file,
        **{
            "model.d_model": 32,
            "model.dropout": 0.0,
            "train.max_steps": 60,
            "train.eval_interval": 30,
            "train.log_interval": 10,
        },
    )
    trainer = Trainer(config, tmp_path / "run", progress=False)
    initial = evaluate(trainer.model, trainer.task.corpus.valid, config.data).loss
    assert initial > 1.5  # ~ln(vocabulary size) before training
    results = trainer.fit()
    assert results["steps"] == 60
    assert results["valid"]["loss"] < 0.5 * initial
    assert results["test"]["loss"] < 0.5 * initial
    train_losses = [r["loss"] for r in read_metrics(tmp_path / "run") if r["split"] == "train"]
    assert len(train_losses) == 6 and train_losses[-1] < train_losses[0]
    for name in ("results.json", "metrics.csv", "config.yaml"):
        assert (tmp_path / "run" / name).is_file()
    assert (tmp_path / "run" / "best" / MODEL_FILE).is_file()
