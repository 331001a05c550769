"""Checkpoints prove themselves; run folders have one owner and never mix two runs."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors import SafetensorError

from highway_transformer import cli
from highway_transformer.api import evaluate_checkpoint, load_pretrained
from highway_transformer.config import Config
from highway_transformer.errors import (
    CheckpointError,
    ConfigError,
    RunFolderBusy,
    TrainingDiverged,
)
from highway_transformer.storage.folder import (
    CONFIG_FILE,
    MANIFEST_FILE,
    MODEL_FILE,
    STATE_FILE,
    TENSOR_FILE,
    VOCAB_FILE,
    write_manifest,
)
from highway_transformer.training import checkpoint as ckpt
from highway_transformer.training import runlock
from highway_transformer.training.divergence import check_finite_loss
from highway_transformer.training.trainer import Trainer, train
from highway_transformer.validation import checkpoint_config

TEXT = "abcabd abcabe xyzzy. " * 60


@pytest.fixture(scope="module")
def tiny(tiny_file_config: Callable[..., Config]) -> Callable[..., Config]:
    """``tiny(path, **overrides)``: the tiny model of ``path``, 2 Adam steps, seed 3."""
    steps = {"name": "tiny", "train.max_steps": 2, "train.eval_interval": 2, "train.seed": 3}
    return lambda path, **overrides: tiny_file_config(path, **{**steps, **overrides})


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, tiny: Callable[..., Config]) -> Path:
    root = tmp_path_factory.mktemp("trained")
    text = root / "text.txt"
    text.write_text(TEXT, encoding="utf-8")
    train(tiny(text), root / "run", progress=False)
    return root


@pytest.fixture
def run(trained: Path, tmp_path: Path) -> Path:
    """A private copy of the trained run folder (and its corpus, at the same path)."""
    copy = tmp_path / "run"
    shutil.copytree(trained / "run", copy)
    return copy


def config_of(run: Path) -> Config:
    return checkpoint_config(run / "checkpoint")


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


# ------------------------------------------------------------------ manifest


@pytest.mark.parametrize("name", [MODEL_FILE, CONFIG_FILE, VOCAB_FILE])
def test_a_bit_flip_is_an_error_naming_the_file(run: Path, name: str) -> None:
    path = run / "checkpoint" / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=name.replace(".", r"\.") + ".*SHA-256"):
        load_pretrained(run / "checkpoint")


def test_a_bit_flip_in_the_trainer_state_stops_resume(run: Path) -> None:
    path = run / "checkpoint" / TENSOR_FILE
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="trainer.safetensors"):
        ckpt.load_trainer_state(run / "checkpoint")


def test_manifest_lists_every_file(run: Path) -> None:
    manifest = json.loads((run / "checkpoint" / MANIFEST_FILE).read_text())
    files = {p.name for p in (run / "checkpoint").iterdir()} - {MANIFEST_FILE}
    assert set(manifest["sha256"]) == files


def test_a_malformed_manifest(run: Path) -> None:
    (run / "checkpoint" / MANIFEST_FILE).write_text("{nope")
    with pytest.raises(CheckpointError, match="manifest"):
        load_pretrained(run / "checkpoint")


# ------------------------------------------------------------------ schemas


def _rewrite(folder: Path, name: str, content: bytes) -> None:
    """Change a file as a hand edit would, with the manifest updated (schema, not hash)."""
    (folder / name).write_bytes(content)
    write_manifest(folder)


@pytest.mark.parametrize(
    "edit",
    [
        {"model": {"n_heads": 0}},
        {"model": {"family": "nonsense"}},
        {"model": {"d_model": "wide"}},
        {"train": {"lr": -1}},
        {"model": 3},
    ],
)
def test_a_checkpoint_config_is_validated(run: Path, edit: dict) -> None:
    data = json.loads((run / "checkpoint" / CONFIG_FILE).read_text())
    for key, value in edit.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) else value
    _rewrite(run / "checkpoint", CONFIG_FILE, json.dumps(data).encode())
    with pytest.raises(CheckpointError, match="config.json"):
        load_pretrained(run / "checkpoint")


@pytest.mark.parametrize("name", [CONFIG_FILE, VOCAB_FILE])
def test_non_utf8_checkpoint_files(run: Path, name: str) -> None:
    _rewrite(run / "checkpoint", name, b'{"x": "\xe9"}')
    with pytest.raises(CheckpointError, match="UTF-8"):
        load_pretrained(run / "checkpoint")


@pytest.mark.parametrize("size", [5, 200])
def test_a_vocabulary_that_does_not_fit_the_model(run: Path, size: int) -> None:
    symbols = [chr(ord("a") + i) if i < 26 else f"s{i}" for i in range(size)]
    vocab = {"level": "char", "unk": None, "eos": None, "symbols": symbols}
    _rewrite(run / "checkpoint", VOCAB_FILE, json.dumps(vocab).encode())
    with pytest.raises(CheckpointError, match="symbols"):
        load_pretrained(run / "checkpoint")


def test_eval_with_the_vocabulary_of_another_run_gives_eval_advice(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    symbols = [chr(ord("a") + i) for i in range(5)]
    vocab = {"level": "char", "unk": None, "eos": None, "symbols": symbols}
    _rewrite(run / "best", VOCAB_FILE, json.dumps(vocab).encode())
    err = run_cli_error(["eval", str(run), "--device", "cpu", "--split", "valid"], capsys)
    assert "has 5 symbols but the model was built for" in err and "another run" in err
    assert "vocab_size at 0" not in err  # a training setting: no advice for evaluation
    with pytest.raises(CheckpointError, match="restore the checkpoint's own vocab.json"):
        evaluate_checkpoint(run / "best", ["valid"])


def run_cli_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the CLI, assert exit 2 and that the last stderr line is one ``error:`` line."""
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: ") and "Traceback" not in err
    return err


TRAINER_EDITS = [
    b"[]",
    b"{trunc",
    b'{"step": "four"}',
    b'{"step": -1, "optimizer": {}, "schedule": {}, "rng": {}, "run": {}}',
]


@pytest.mark.parametrize("content", TRAINER_EDITS)
def test_a_malformed_trainer_state_on_resume(
    run: Path, content: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    _rewrite(run / "checkpoint", STATE_FILE, content)
    config = config_of(run).replace(**{"train.max_steps": 4})
    with pytest.raises(CheckpointError, match="trainer.json"):
        train(config, run, resume=True, progress=False)


def test_a_trainer_state_missing_run_fields(run: Path) -> None:
    info = json.loads((run / "checkpoint" / STATE_FILE).read_text())
    del info["run"]["items"]
    _rewrite(run / "checkpoint", STATE_FILE, json.dumps(info).encode())
    with pytest.raises(CheckpointError, match="run.items"):
        ckpt.load_trainer_state(run / "checkpoint")


def test_a_damaged_rng_state(run: Path) -> None:
    info = json.loads((run / "checkpoint" / STATE_FILE).read_text())
    info["rng"]["python"] = [3]
    _rewrite(run / "checkpoint", STATE_FILE, json.dumps(info).encode())
    state = ckpt.load_trainer_state(run / "checkpoint")
    with pytest.raises(CheckpointError, match="random-number state"):
        ckpt.restore_rng(state.info["rng"], state.tensors)


def test_generate_on_a_task_checkpoint(run: Path) -> None:
    data = json.loads((run / "checkpoint" / CONFIG_FILE).read_text())
    data["task"]["name"] = "copy"
    _rewrite(run / "checkpoint", CONFIG_FILE, json.dumps(data).encode())
    with pytest.raises(CheckpointError, match="do not fit the model"):
        load_pretrained(run / "checkpoint")


# ------------------------------------------------------------------ saving


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        SafetensorError("Error while serializing: IoError(No space left on device)"),
    ],
)
def test_disk_full_during_a_save_keeps_the_previous_checkpoint(
    run: Path, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    model, config, vocab = load_pretrained(run / "checkpoint")
    before = snapshot(run / "checkpoint")

    def full(*args, **kwargs):
        raise error

    monkeypatch.setattr(ckpt, "save_weights", full)
    with pytest.raises(CheckpointError, match="disk is full.*previous checkpoint is intact"):
        ckpt.save_checkpoint(run / "checkpoint", model, config, vocab)
    assert snapshot(run / "checkpoint") == before
    assert not (run / "checkpoint.tmp").exists()
    with pytest.raises(CheckpointError, match=r"disk is full.*\(no earlier checkpoint was there"):
        ckpt.save_checkpoint(run / "first", model, config, vocab)  # nothing to keep intact
    assert not (run / "first").exists() and not (run / "first.tmp").exists()


def test_disk_full_on_the_cli_is_one_line(
    run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    config = run / "checkpoint" / CONFIG_FILE
    argv = ["train", "--config", str(run / "config.yaml"), "--out", str(run.parent / "new")]
    assert config.is_file()
    assert cli.main([*argv, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err


def test_non_finite_weights_are_never_saved(run: Path) -> None:
    model, config, vocab = load_pretrained(run / "checkpoint")
    before = snapshot(run / "checkpoint")
    with torch.no_grad():
        next(model.parameters())[0].fill_(float("inf"))
    with pytest.raises(TrainingDiverged, match="intact"):
        ckpt.save_checkpoint(run / "checkpoint", model, config, vocab)
    with pytest.raises(TrainingDiverged, match="validation loss"):
        check_finite_loss(float("nan"), 3)
    assert snapshot(run / "checkpoint") == before
    with pytest.raises(TrainingDiverged, match="no checkpoint was written before it"):
        ckpt.save_checkpoint(run / "first", model, config, vocab)  # none to keep intact
    assert not (run / "first").exists()


def test_adam_at_a_huge_learning_rate_leaves_finite_checkpoints(
    tmp_path: Path, tiny: Callable[..., Config]
) -> None:
    # Adam moves every weight by about lr a step: at 1e30 the products overflow on any CPU
    # (at 1e4 an AVX512/AMX machine kept the loss finite for all 12 steps)
    text = tmp_path / "text.txt"
    text.write_text(TEXT, encoding="utf-8")
    config = tiny(text, **{"train.lr": 1e30, "train.max_steps": 12, "train.eval_interval": 1})
    with pytest.raises(TrainingDiverged):
        train(config, tmp_path / "run", progress=False)
    if (tmp_path / "run" / "checkpoint").exists():
        model, _, _ = load_pretrained(tmp_path / "run" / "checkpoint")
        assert all(torch.isfinite(p).all() for p in model.parameters())


def test_an_interrupted_swap_is_recovered_never_deleted(run: Path) -> None:
    os.replace(run / "checkpoint", run / "checkpoint.old")  # killed between the two renames
    before = snapshot(run / "checkpoint.old")
    config = config_of_old = checkpoint_config(run / "checkpoint")  # read falls back to .old
    assert config_of_old.name == "tiny"
    with pytest.raises(ConfigError, match="already holds a run"):
        train(config, run, progress=False)
    assert snapshot(run / "checkpoint") == before  # moved back into place, intact
    train(config.replace(**{"train.max_steps": 4}), run, resume=True, progress=False)
    assert ckpt.load_trainer_state(run / "checkpoint").step == 4


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_checkpoint_without_manifest_is_refused_unless_trusted(run: Path) -> None:
    (run / "best" / MANIFEST_FILE).unlink()  # deleting it must not turn the checks off
    flip_a_byte(run / "best" / MODEL_FILE)
    unverified = r"^\S+best has no manifest\.json.*--trust-unverified"
    with pytest.raises(CheckpointError, match=unverified):
        load_pretrained(run / "best")
    with pytest.raises(CheckpointError, match="no manifest.json"):
        checkpoint_config(run / "best")
    load_pretrained(run / "best", trust_unverified=True)  # the user vouches for it
    with pytest.raises(CheckpointError, match="no manifest.json"):
        load_pretrained(run / "best")  # trust lasts one load, never longer


def test_the_cli_refuses_an_unverified_checkpoint_in_one_line(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (run / "best" / MANIFEST_FILE).unlink()
    assert cli.main(["eval", str(run), "--device", "cpu", "--split", "valid"]) == 2
    weights, err = capsys.readouterr().err.splitlines()
    assert err.startswith("error: ") and "--trust-unverified" in err
    generate = ["generate", str(run), "--prompt", "ab", "--tokens", "3", "--device", "cpu"]
    assert cli.main(generate) == 2
    assert "--trust-unverified" in capsys.readouterr().err
    trusted = ["eval", str(run), "--device", "cpu", "--split", "valid", "--trust-unverified"]
    assert cli.main([*trusted, "--json"]) == 0
    captured = capsys.readouterr()
    assert "read unchecked" in captured.err and json.loads(captured.out)["valid"]["loss"] > 0
    assert cli.main([*generate, "--trust-unverified", "--seed", "1"]) == 0


def test_resume_of_an_unverified_checkpoint_needs_trust(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (run / "checkpoint" / MANIFEST_FILE).unlink()
    config = config_of_best(run).replace(**{"train.max_steps": 4})
    with pytest.raises(CheckpointError, match="no manifest.json"):
        train(config, run, resume=True, progress=False)
    argv = ["train", "--config", str(run / "config.yaml"), "--out", str(run), "--resume"]
    assert cli.main([*argv, "train.max_steps=4", "--no-progress"]) == 2
    assert "--trust-unverified" in capsys.readouterr().err
    train(config, run, resume=True, progress=False, trust_unverified=True)
    assert ckpt.load_trainer_state(run / "checkpoint").step == 4  # rewritten with a manifest


def test_a_trusted_resume_says_the_checkpoint_is_read_unchecked(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (run / "checkpoint" / MANIFEST_FILE).unlink()
    argv = ["train", "--config", str(run / "config.yaml"), "--out", str(run), "--resume"]
    argv += ["--trust-unverified", "--no-progress"]
    assert cli.main([*argv, "train.max_steps=4"]) == 0
    err = capsys.readouterr().err.splitlines()
    note = f"note: {run / 'checkpoint'} has no {MANIFEST_FILE}: read unchecked (--trust-unverified)"
    assert note in err  # docs/training.md: it "reads it unchecked and says so"
    assert err.index(note) < next(i for i, line in enumerate(err) if "resumed from" in line)
    assert cli.main([*argv, "train.max_steps=5"]) == 0  # the checkpoint has a manifest again
    assert "read unchecked" not in capsys.readouterr().err


def test_a_damaged_weights_folder_points_to_the_other_one(run: Path) -> None:
    flip_a_byte(run / "best" / MODEL_FILE)
    with pytest.raises(CheckpointError) as info:
        load_pretrained(run / "best")
    advice = str(info.value).split("after saving; ")[1]  # never the damaged folder itself
    assert "best" not in advice and "--weights last" in advice
    flip_a_byte(run / "checkpoint" / MODEL_FILE)
    with pytest.raises(CheckpointError, match="use the run's best/ weights"):
        load_pretrained(run / "checkpoint")


# ------------------------------------------------------------------ run folders


@pytest.mark.skipif(runlock.fcntl is None, reason="the kernel's flock: POSIX")
def test_a_second_writer_is_refused_naming_the_owner(
    run: Path, hold_folder: Callable[[Path], subprocess.Popen[str]]
) -> None:
    owner = hold_folder(run)
    with pytest.raises(RunFolderBusy, match=f"PID {owner.pid}"):
        train(config_of(run), run, resume=True, progress=False)


def test_a_lock_left_by_an_ended_process_is_noted_and_taken(run: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock = {"pid": dead.pid, "host": os.uname().nodename, "started": 0}
    (run / runlock.LOCK_FILE).write_text(json.dumps(lock))
    messages: list[str] = []
    config = config_of(run).replace(**{"train.max_steps": 4})
    train(config, run, resume=True, progress=False, log=messages.append)
    assert any(str(dead.pid) in m and "run.lock" in m for m in messages), messages
    assert not (run / runlock.LOCK_FILE).exists()  # released at the end


@pytest.mark.skipif(runlock.fcntl is None, reason="the kernel's flock: POSIX")
def test_a_record_of_another_host_or_unreadable_locks_nothing(run: Path) -> None:
    """The kernel's lock decides: a job resumed on another node of a cluster (the first one
    preempted) takes the folder over without anyone deleting the file."""
    for record in (json.dumps({"pid": 1, "host": "elsewhere"}).encode(), b"\x00garbage"):
        (run / runlock.LOCK_FILE).write_bytes(record)
        train(config_of(run), run, resume=True, progress=False)
        assert not (run / runlock.LOCK_FILE).exists()


def test_a_fresh_run_into_a_used_folder(run: Path) -> None:
    metrics = (run / "metrics.jsonl").read_bytes()
    with pytest.raises(ConfigError, match="--overwrite"):
        train(config_of(run), run, progress=False)
    assert (run / "metrics.jsonl").read_bytes() == metrics
    train(config_of(run), run, overwrite=True, progress=False)
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(steps)  # one run's records, in order


def test_a_run_killed_before_its_first_checkpoint(run: Path) -> None:
    shutil.rmtree(run / "checkpoint")
    with pytest.raises(ConfigError, match="already holds a run"):
        train(config_of_best(run), run, progress=False)
    with pytest.raises(ConfigError, match="no checkpoint"):
        train(config_of_best(run), run, resume=True, progress=False)


def config_of_best(run: Path) -> Config:
    return checkpoint_config(run / "best")


@pytest.mark.parametrize("where", ["missing", "empty"])
def test_resume_without_a_checkpoint(
    tmp_path: Path, where: str, trained: Path, tiny: Callable[..., Config]
) -> None:
    out = tmp_path / "out"
    if where == "empty":
        out.mkdir()
    with pytest.raises(ConfigError, match="no checkpoint"):
        train(tiny(trained / "text.txt"), out, resume=True, progress=False)


def test_resume_and_overwrite_together(
    tmp_path: Path, trained: Path, tiny: Callable[..., Config]
) -> None:
    with pytest.raises(ConfigError, match="give one"):
        train(tiny(trained / "text.txt"), tmp_path, resume=True, overwrite=True, progress=False)


def test_a_task_run_into_a_used_folder(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["train", "--task", "copy", "--out", str(run), "--no-progress"]
    assert cli.main([*argv, "task.length=3", "train.max_steps=1"]) == 2
    assert "--overwrite" in capsys.readouterr().err


def test_trainer_resume_reports_no_checkpoint(
    tmp_path: Path, trained: Path, tiny: Callable[..., Config]
) -> None:
    trainer = Trainer(tiny(trained / "text.txt"), tmp_path / "fresh", progress=False)
    assert trainer.resume() is False


def test_resume_verifies_the_vocabulary(run: Path) -> None:
    path = run / "checkpoint" / VOCAB_FILE
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    config = config_of_best(run).replace(**{"train.max_steps": 4})
    with pytest.raises(CheckpointError, match=r"vocab\.json.*SHA-256"):
        train(config, run, resume=True, progress=False)
