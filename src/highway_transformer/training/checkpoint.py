"""Resumable checkpoints: the trainer's state beside the weights, config and task files.

The folder format (file names, atomic write, manifest, verified reads) is
:mod:`highway_transformer.storage.folder`'s; this module adds what resuming needs: the step,
optimizer and scheduler state, every random generator and the task's position, as
``trainer.json`` (JSON) and ``trainer.safetensors`` (tensors). Weights, optimizer tensors and
the validation loss are checked to be finite before anything is written
(:mod:`.divergence`), so a diverged state never replaces a good checkpoint.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from ..config import Config
from ..data.vocab import Vocabulary
from ..errors import CheckpointError
from ..files import first_line
from ..storage.folder import (
    CONFIG_FILE,
    MODEL_FILE,
    STATE_FILE,
    TENSOR_FILE,
    VOCAB_FILE,
    read_json,
    resolve,
    verify,
    write_atomically,
)
from ..storage.weights import save_weights
from .divergence import check_finite_loss, check_finite_tensors, kept_message

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
    retire: Callable[[Path], None] | None = None,
) -> Path:
    """Write a checkpoint folder atomically; ``vocab`` (language models) and ``write_files``
    (a task's own files) add to the weights and config, ``trainer`` what resuming needs;
    ``retire`` takes the folder replaced (default: deleted), see
    :func:`~highway_transformer.storage.folder.write_atomically`.

    Non-finite weights, optimizer tensors or ``valid_loss`` raise :class:`TrainingDiverged`
    before anything is written: a diverged state never replaces the last good checkpoint.
    """
    step = trainer.step if trainer is not None else None
    left = kept_message(Path(folder))
    if valid_loss is not None:
        check_finite_loss(valid_loss, step, left)
    tensors = trainer.tensors.items() if trainer is not None else ()
    check_finite_tensors([*model.state_dict().items(), *tensors], step, left)

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

    write_atomically(Path(folder), write, retire)
    return Path(folder)


def _read_trainer_info(folder: Path) -> dict[str, Any]:
    """The checked JSON half of a checkpoint's trainer state (step, run, rng, ...)."""
    if not (folder / STATE_FILE).is_file():
        raise CheckpointError(
            f"{folder} holds weights only (no trainer state); it cannot be resumed"
        )
    path = verify(folder, STATE_FILE)
    info = read_json(path, "trainer state")
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
