"""Checkpoints: safetensors weights + JSON config + the task's files + trainer state.

Layout of a checkpoint folder::

    model.safetensors    weights (tied weights stored once)
    config.json          the full Config (model, data incl. evaluation settings, train, task)
    vocab.json           the vocabulary (language modelling)
    tokenizer.json       the subword tokenizer (bpe/unigram levels; SHA-256 in vocab.json)
    trainer.json         step, schedule, scaler, RNG, task position (resume only)
    trainer.safetensors  optimizer tensors, RNG states, task tensors such as Transformer-XL
                         memory and generator states (resume only)
    manifest.json        the SHA-256 of every other file, verified when a file is read

Nothing is pickled. A folder is written under a temporary name, its files and the folder are
fsync'ed, weights and losses are checked to be finite, and only then is it swapped in, so an
interrupted, failed or diverged save never replaces a good checkpoint. A swap interrupted
between its two renames leaves ``NAME.old``, which the next save (or :func:`recover`) moves
back into place; it is never deleted before a new checkpoint stands.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from ..config import Config, first_line, from_dict, read_text, validate
from ..data.vocab import Vocabulary
from ..errors import CheckpointError, HighwayError, TrainingDiverged
from ..models.weights_file import load_weights_checked, save_weights

MODEL_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
VOCAB_FILE = "vocab.json"
STATE_FILE = "trainer.json"
TENSOR_FILE = "trainer.safetensors"
MANIFEST_FILE = "manifest.json"

#: What ``trainer.json`` must hold (key -> type), checked before a resume uses any of it.
TRAINER_SCHEMA: dict[str, type | tuple[type, ...]] = {
    "step": int,
    "task": dict,
    "optimizer": dict,
    "schedule": dict,
    "scaler": dict,
    "rng": dict,
    "run": dict,
}
RUN_SCHEMA: dict[str, type | tuple[type, ...]] = {
    "elapsed": (int, float),
    "items": int,
    "best_valid": (int, float),
    "best_step": int,
}


@dataclass
class TrainerState:
    """What a resumed run needs besides the weights."""

    step: int = 0
    info: dict[str, Any] = field(default_factory=dict)  # JSON-able
    tensors: dict[str, Tensor] = field(default_factory=dict)


def write_atomically(folder: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp_folder)``, add the manifest, fsync, then swap it into ``folder``.

    Any failure (a full disk included) leaves the previous checkpoint as it was.
    """
    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".tmp")
    old = folder.with_name(folder.name + ".old")
    recover(folder)
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        write(tmp)
        _write_manifest(tmp)
        _fsync_tree(tmp)
    except (OSError, SafetensorError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        full = isinstance(exc, OSError) and exc.errno == errno.ENOSPC
        reason = "the disk is full" if full or "No space" in str(exc) else first_line(exc)
        raise CheckpointError(
            f"cannot write checkpoint {folder}: {reason}; free space or choose another --out "
            "(the previous checkpoint is intact)"
        ) from None
    if folder.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(folder, old)
    os.replace(tmp, folder)
    _fsync_dir(folder.parent)
    shutil.rmtree(old, ignore_errors=True)


def recover(folder: str | Path) -> bool:
    """Move ``NAME.old`` back to ``NAME`` when a swap stopped between its renames."""
    folder = Path(folder)
    old = folder.with_name(folder.name + ".old")
    if folder.exists() or not (old / CONFIG_FILE).is_file():
        return False
    os.replace(old, folder)
    _fsync_dir(folder.parent)
    return True


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _write_manifest(folder: Path) -> None:
    files = sorted(p.name for p in folder.iterdir() if p.is_file() and p.name != MANIFEST_FILE)
    manifest = {"format": 1, "sha256": {name: _sha256(folder / name) for name in files}}
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1), encoding="utf-8")


def _fsync_tree(folder: Path) -> None:
    for path in folder.iterdir():
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())
    _fsync_dir(folder)


def _fsync_dir(folder: Path) -> None:
    if not hasattr(os, "O_DIRECTORY"):  # Windows: directories cannot be opened for fsync
        return
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def verify(folder: str | Path, name: str) -> Path:
    """``folder/name`` after checking it against the manifest; an error names a changed file.

    Checkpoints written before manifests existed (no ``manifest.json``) are read unchecked.
    """
    folder = Path(folder)
    path = folder / name
    if not path.is_file():
        raise CheckpointError(f"{path} is missing; the checkpoint is incomplete")
    manifest_path = folder / MANIFEST_FILE
    if not manifest_path.exists():
        return path
    text = read_text(manifest_path, CheckpointError, "checkpoint manifest")
    try:
        expected = json.loads(text)["sha256"][name]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise CheckpointError(
            f"{manifest_path} is malformed or does not list {name} ({first_line(exc)}); "
            "the checkpoint cannot be trusted"
        ) from None
    if _sha256(path) != expected:
        raise CheckpointError(
            f"{path} does not match its SHA-256 in {MANIFEST_FILE}: the file is corrupted or was "
            "changed after saving; use another checkpoint (e.g. best/) or retrain"
        )
    return path


def resolve(folder: str | Path) -> Path:
    """The checkpoint folder, or its ``.old`` twin left by an interrupted swap."""
    folder = Path(folder)
    if (folder / CONFIG_FILE).is_file():
        return folder
    old = folder.with_name(folder.name + ".old")
    if (old / CONFIG_FILE).is_file():
        return old
    if folder.is_dir() and (folder / "checkpoint" / CONFIG_FILE).is_file():
        return folder / "checkpoint"
    raise CheckpointError(
        f"no checkpoint at {folder} (expected {CONFIG_FILE} and {MODEL_FILE}); give a checkpoint"
        " folder or a run folder that holds one"
    )


# ------------------------------------------------------------------ optimizer state


def flatten_optimizer(state: dict[str, Any]) -> tuple[dict, dict[str, Tensor]]:
    """An ``optimizer.state_dict()`` as JSON-able info and named tensors."""
    tensors: dict[str, Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for idx, entries in state["state"].items():
        for key, value in entries.items():
            if isinstance(value, Tensor):
                tensors[f"optim.{idx}.{key}"] = value.detach().cpu().contiguous()
            else:
                scalars.setdefault(str(idx), {})[key] = value
    return {"param_groups": state["param_groups"], "scalars": scalars}, tensors


def restore_optimizer(
    optimizer: torch.optim.Optimizer,
    info: dict,
    tensors: dict[str, Tensor],
    load: Callable[[dict], None] | None = None,
) -> None:
    """Rebuild the state dict and hand it to ``load`` (``optimizer.load_state_dict``)."""
    state: dict[int, dict[str, Any]] = {}
    try:
        for name, value in tensors.items():
            if name.startswith("optim."):
                _, idx, key = name.split(".", 2)
                state.setdefault(int(idx), {})[key] = value
        for idx, entries in info["scalars"].items():
            state.setdefault(int(idx), {}).update(entries)
        (load or optimizer.load_state_dict)({"state": state, "param_groups": info["param_groups"]})
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise CheckpointError(
            f"the optimizer state does not fit this model: {first_line(exc)}"
        ) from None


# ------------------------------------------------------------------ RNG state


def capture_rng() -> tuple[dict, dict[str, Tensor]]:
    np_state = np.random.get_state()
    tensors = {
        "rng.torch": torch.get_rng_state(),
        "rng.numpy": torch.from_numpy(np.asarray(np_state[1], dtype=np.int64)),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng.cuda.{i}"] = s
    py_state = random.getstate()
    info = {
        "python": [py_state[0], list(py_state[1]), py_state[2]],
        "numpy": [np_state[0], int(np_state[2]), int(np_state[3]), float(np_state[4])],
    }
    return info, tensors


def restore_rng(info: dict, tensors: dict[str, Tensor]) -> None:
    try:
        _restore_rng(info, tensors)
    except (KeyError, TypeError, ValueError, IndexError, RuntimeError) as exc:
        raise CheckpointError(
            f"the saved random-number state is damaged ({first_line(exc)}); "
            "resume from another copy or start a new run"
        ) from None


def _restore_rng(info: dict, tensors: dict[str, Tensor]) -> None:
    torch.set_rng_state(tensors["rng.torch"])
    cuda = [tensors[k] for k in sorted(tensors) if k.startswith("rng.cuda.")]
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda)
    version, internal, gauss = info["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, pos, has_gauss, cached = info["numpy"]
    np.random.set_state(
        (kind, tensors["rng.numpy"].numpy().astype(np.uint32), pos, has_gauss, cached)
    )


# ------------------------------------------------------------------ save / load


# ------------------------------------------------------------------ task state

TASK_PREFIX = "task."


def split_task_state(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """A task's state as (JSON-able values, tensors named ``task.KEY``)."""
    info = {k: v for k, v in state.items() if not isinstance(v, Tensor)}
    tensors = {TASK_PREFIX + k: v.detach().cpu() for k, v in state.items() if isinstance(v, Tensor)}
    return info, tensors


def task_state(trainer: TrainerState) -> dict[str, Any]:
    """The task's state of a loaded checkpoint (inverse of :func:`split_task_state`)."""
    tensors = {
        k[len(TASK_PREFIX) :]: v for k, v in trainer.tensors.items() if k.startswith(TASK_PREFIX)
    }
    return {**trainer.info["task"], **tensors}


def save_checkpoint(
    folder: str | Path,
    model: nn.Module,
    config: Config,
    vocab: Vocabulary | None = None,
    trainer: TrainerState | None = None,
    write_files: Callable[[Path], None] | None = None,
    *,
    valid_loss: float | None = None,
) -> Path:
    """Write a checkpoint folder atomically; ``vocab`` (language models) and ``write_files``
    (a task's own files) add to the weights and config, ``trainer`` what resuming needs.

    Non-finite weights, optimizer tensors or ``valid_loss`` raise :class:`TrainingDiverged`
    before anything is written: a diverged state never replaces the last good checkpoint.
    """
    check_finite_state(model, trainer, valid_loss)

    def write(tmp: Path) -> None:
        save_weights(model, tmp / MODEL_FILE)
        (tmp / CONFIG_FILE).write_text(config.to_json(), encoding="utf-8")
        if vocab is not None:
            vocab.save(tmp / VOCAB_FILE)
        if write_files is not None:
            write_files(tmp)
        if trainer is not None:
            info = {"step": trainer.step, **trainer.info}
            (tmp / STATE_FILE).write_text(json.dumps(info), encoding="utf-8")
            save_file(
                {k: v.contiguous() for k, v in trainer.tensors.items()}, str(tmp / TENSOR_FILE)
            )

    write_atomically(Path(folder), write)
    return Path(folder)


def check_finite_loss(valid_loss: float, step: int | None = None) -> None:
    if not math.isfinite(valid_loss):
        raise TrainingDiverged(_diverged(f"the validation loss became {valid_loss}", step))


def _diverged(what: str, step: int | None) -> str:
    at = f" at step {step}" if step is not None else ""
    return (
        f"{what}{at}; training stopped and the last good checkpoint is intact (lower "
        "train.lr, set train.clip, or use precision=fp32)"
    )


def check_finite_state(
    model: nn.Module, trainer: TrainerState | None, valid_loss: float | None
) -> None:
    """Raise :class:`TrainingDiverged` if anything about to be saved is NaN or infinite."""
    step = trainer.step if trainer is not None else None
    if valid_loss is not None:
        check_finite_loss(valid_loss, step)
    named = list(model.state_dict().items())
    if trainer is not None:
        named += list(trainer.tensors.items())
    for name, tensor in named:
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise TrainingDiverged(_diverged(f"{name} holds NaN or infinite values", step))


def read_config(folder: str | Path) -> Config:
    """The checkpoint's config, checked like a user's config (types, ranges, choices)."""
    path = verify(resolve(folder), CONFIG_FILE)
    text = read_text(path, CheckpointError, "checkpoint config")
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise CheckpointError(f"cannot parse {path}: {first_line(exc)}") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} must hold a JSON object (the run's config)")
    try:
        return validate(from_dict(Config, data))
    except HighwayError as exc:
        raise CheckpointError(f"{path} is not a valid config for this version: {exc}") from None


def read_vocab(folder: str | Path) -> Vocabulary:
    """The checkpoint's vocabulary, verified against the manifest."""
    return Vocabulary.load(verify(resolve(folder), VOCAB_FILE))


def load_weights(model: nn.Module, folder: str | Path) -> None:
    load_weights_checked(model, verify(resolve(folder), MODEL_FILE))


def _read_trainer_info(folder: Path) -> dict[str, Any]:
    """The checked JSON half of a checkpoint's trainer state (step, run, rng, ...)."""
    if not (folder / STATE_FILE).is_file():
        raise CheckpointError(
            f"{folder} holds weights only (no trainer state); it cannot be resumed"
        )
    path = verify(folder, STATE_FILE)
    try:
        info = json.loads(read_text(path, CheckpointError, "trainer state"))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise CheckpointError(f"cannot parse {path}: {first_line(exc)}") from None
    _check_schema(info, TRAINER_SCHEMA, path)
    _check_schema(info["run"], RUN_SCHEMA, path, "run.")
    if info["step"] < 0:
        raise CheckpointError(f"{path}: step must be >= 0, got {info['step']}")
    return info


def checkpoint_step(folder: str | Path) -> int:
    """The step a checkpoint resumes at, read without loading its tensors."""
    return int(_read_trainer_info(resolve(folder))["step"])


def checkpoint_run_record(folder: str | Path) -> dict[str, Any]:
    """The checked run record of a checkpoint (elapsed, best, stretches...), without its tensors."""
    return dict(_read_trainer_info(resolve(folder))["run"])


def load_trainer_state(folder: str | Path) -> TrainerState:
    folder = resolve(folder)
    info = _read_trainer_info(folder)
    tensor_path = verify(folder, TENSOR_FILE)
    try:
        tensors = load_file(str(tensor_path))
    except (OSError, SafetensorError) as exc:
        raise CheckpointError(f"cannot read {tensor_path}: {first_line(exc)}") from None
    return TrainerState(step=info.pop("step"), info=info, tensors=tensors)


def _check_schema(data: Any, schema: dict, path: Path, prefix: str = "") -> None:
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} must hold a JSON object; the trainer state is damaged")
    for key, kind in schema.items():
        value = data.get(key)
        if isinstance(value, bool) or not isinstance(value, kind):
            wanted = getattr(kind, "__name__", "number")
            raise CheckpointError(
                f"{path}: {prefix}{key} is missing or not a {wanted} (got {repr(value)[:40]}); "
                "the trainer state is damaged: resume from another copy or start a new run"
            )


def load_pretrained(
    folder: str | Path, device: str | torch.device = "cpu"
) -> tuple[nn.Module, Config, Vocabulary | None]:
    """``(model, config, vocab)`` from a checkpoint folder, in eval mode on ``device``; the
    model is built by the task named in the config (``vocab`` is None for tasks without
    one)."""
    from ..tasks import build_task_model  # tasks build models; checkpoints only read them

    folder = resolve(folder)
    config = read_config(folder)
    vocab = read_vocab(folder) if (folder / VOCAB_FILE).is_file() else None
    if vocab is not None and len(vocab) != config.model.vocab_size:
        raise CheckpointError(
            f"{folder / VOCAB_FILE} has {len(vocab)} symbols but the model was built for "
            f"{config.model.vocab_size}; the vocabulary belongs to another run"
        )
    model = build_task_model(config)
    load_weights(model, folder)
    return model.to(device).eval(), config, vocab
