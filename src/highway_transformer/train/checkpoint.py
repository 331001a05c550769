"""Checkpoints: safetensors weights + JSON config + the task's files + trainer state.

Layout of a checkpoint folder::

    model.safetensors    weights (tied weights stored once)
    config.json          the full Config (model, data incl. evaluation settings, train, task)
    vocab.json           the vocabulary (language modelling)
    trainer.json         step, schedule, scaler, RNG, task position (resume only)
    trainer.safetensors  optimizer tensors, RNG states, task tensors such as Transformer-XL
                         memory and generator states (resume only)

Nothing is pickled; folders are written under a temporary name and swapped in, so an
interrupted write never replaces a good checkpoint.
"""

from __future__ import annotations

import json
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
from safetensors.torch import load_file, load_model, save_file, save_model
from torch import Tensor, nn

from ..config import Config, from_dict
from ..data.vocab import Vocabulary
from ..errors import CheckpointError, HighwayError

MODEL_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
VOCAB_FILE = "vocab.json"
STATE_FILE = "trainer.json"
TENSOR_FILE = "trainer.safetensors"


@dataclass
class TrainerState:
    """What a resumed run needs besides the weights."""

    step: int = 0
    info: dict[str, Any] = field(default_factory=dict)  # JSON-able
    tensors: dict[str, Tensor] = field(default_factory=dict)


def write_atomically(folder: Path, write: Any) -> None:
    """Call ``write(tmp_folder)`` then swap ``tmp_folder`` into ``folder``."""
    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".tmp")
    old = folder.with_name(folder.name + ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write(tmp)
    if folder.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(folder, old)
    os.replace(tmp, folder)
    shutil.rmtree(old, ignore_errors=True)


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
    for name, value in tensors.items():
        if name.startswith("optim."):
            _, idx, key = name.split(".", 2)
            state.setdefault(int(idx), {})[key] = value
    for idx, entries in info["scalars"].items():
        state.setdefault(int(idx), {}).update(entries)
    try:
        (load or optimizer.load_state_dict)({"state": state, "param_groups": info["param_groups"]})
    except (ValueError, KeyError) as exc:
        raise CheckpointError(f"the optimizer state does not fit this model: {exc}") from None


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
) -> Path:
    """Write a checkpoint folder atomically; ``vocab`` (language models) and ``write_files``
    (a task's own files) add to the weights and config, ``trainer`` what resuming needs."""

    def write(tmp: Path) -> None:
        save_model(model, str(tmp / MODEL_FILE))
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


def read_config(folder: str | Path) -> Config:
    folder = resolve(folder)
    try:
        data = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
        return from_dict(Config, data)
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"cannot read {folder / CONFIG_FILE}: {exc}") from None
    except HighwayError as exc:
        raise CheckpointError(f"{folder / CONFIG_FILE} does not fit this version: {exc}") from None


def load_weights(model: nn.Module, folder: str | Path) -> None:
    path = resolve(folder) / MODEL_FILE
    try:
        missing, unexpected = load_model(model, str(path), strict=False)
    except (OSError, SafetensorError) as exc:
        raise CheckpointError(f"cannot read weights {path}: {exc}") from None
    except RuntimeError as exc:
        raise CheckpointError(f"weights in {path} do not fit the model: {str(exc)[:200]}") from None
    if missing or unexpected:
        raise CheckpointError(
            f"weights in {path} do not fit the model (missing {sorted(missing)[:3]}, "
            f"unexpected {sorted(unexpected)[:3]})"
        )


def load_trainer_state(folder: str | Path) -> TrainerState:
    folder = resolve(folder)
    try:
        info = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
        tensors = load_file(str(folder / TENSOR_FILE))
    except FileNotFoundError:
        raise CheckpointError(
            f"{folder} holds weights only (no trainer state); it cannot be resumed"
        ) from None
    except (OSError, json.JSONDecodeError, SafetensorError) as exc:
        raise CheckpointError(f"cannot read trainer state in {folder}: {exc}") from None
    return TrainerState(step=int(info.pop("step")), info=info, tensors=tensors)


def load_pretrained(
    folder: str | Path, device: str | torch.device = "cpu"
) -> tuple[nn.Module, Config, Vocabulary | None]:
    """``(model, config, vocab)`` from a checkpoint folder, in eval mode on ``device``; the
    model is built by the task named in the config (``vocab`` is None for tasks without
    one)."""
    from ..tasks import build_task_model  # tasks build models; checkpoints only read them

    folder = resolve(folder)
    config = read_config(folder)
    vocab = Vocabulary.load(folder / VOCAB_FILE) if (folder / VOCAB_FILE).is_file() else None
    model = build_task_model(config)
    load_weights(model, folder)
    return model.to(device).eval(), config, vocab
