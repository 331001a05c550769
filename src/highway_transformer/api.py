"""The checked entry points: a user's config or checkpoint comes in, is validated once
(:mod:`highway_transformer.validation`), and is built with the layers below.

* :func:`build_model`: a language model from a :class:`~highway_transformer.config.ModelConfig`;
* :func:`load_pretrained`: the model, config and vocabulary of a checkpoint folder;
* :func:`evaluate_checkpoint`: a checkpoint's metrics on the valid/test splits of its task;
* :func:`sample_text`: a continuation of a prompt by a run's best weights (the demo's samples).

Training's entry points, :func:`~highway_transformer.training.trainer.train` and
:class:`~highway_transformer.training.trainer.Trainer`, validate their config the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .config import Config, ModelConfig, apply_overrides
from .config.names import SPLIT_CAPPED_TASKS
from .data.vocab import Vocabulary, read_vocab
from .errors import ConfigError, DataError
from .models.lm import LanguageModel
from .models.resources import check_model_size
from .runtime.device import autocast_context
from .storage.folder import BEST_DIR, VOCAB_FILE, resolve, trusting_unverified
from .storage.weights import load_weights
from .tasks import Task, build_task_model, task_class
from .tasks.progress import EvalBar
from .validation import checkpoint_config, validate, validate_model, validating_once

#: The splits a checkpoint is evaluated on.
SPLITS = ("valid", "test")


def build_model(config: ModelConfig) -> LanguageModel:
    """A language model of ``config`` (validated first: wrong types, ranges, unknown names and
    settings that do not apply are one-line :class:`~highway_transformer.errors.ConfigError`,
    and so is a model whose weights cannot fit this machine's memory, before it is built)."""
    check_model_size(Config(model=validate_model(config)), torch.device("cpu"), training=False)
    return LanguageModel(config)


def load_pretrained(
    folder: str | Path, device: str | torch.device = "cpu", *, trust_unverified: bool = False
) -> tuple[nn.Module, Config, Vocabulary | None]:
    """``(model, config, vocab)`` from a checkpoint folder, in eval mode on ``device``; the
    model is built by the task named in the config (``vocab`` is None for tasks without
    one). Every file is verified against the folder's ``manifest.json``; a folder without
    one is refused unless ``trust_unverified`` (then it is read unchecked)."""
    folder = resolve(folder)
    with trusting_unverified(trust_unverified):
        config = checkpoint_config(folder)
        has_vocab = (folder / VOCAB_FILE).is_file()
        vocab = read_vocab(folder, config.model.vocab_size) if has_vocab else None
        model = build_task_model(config)
        load_weights(model, folder)
    return model.to(device).eval(), config, vocab


def sample_text(run_dir: str | Path, prompt: str, tokens: int = 240) -> str:
    """A continuation of ``prompt`` by the run's best weights: temperature 0.7, top-k 20 and
    sampling seed 1 for every run, so that runs' samples differ by their weights alone."""
    model, _, vocab = load_pretrained(Path(run_dir) / BEST_DIR)
    try:
        text = model.generate(prompt, tokens, vocab=vocab, temperature=0.7, top_k=20, seed=1)
    except DataError as exc:
        return f"(no sample: {exc})"
    return prompt + text


def evaluate_checkpoint(
    folder: str | Path,
    splits: Sequence[str] = SPLITS,
    device: str | torch.device = "cpu",
    overrides: Sequence[str] = (),
    *,
    trust_unverified: bool = False,
    progress: bool = False,
) -> dict[str, dict[str, float]]:
    """The task's metrics of a checkpoint (or run folder) on ``splits``; ``overrides`` are
    ``KEY=VALUE`` settings applied before the data are loaded (``data.path=DIR``);
    ``trust_unverified`` as for :func:`load_pretrained`; ``progress``: a bar of each split's
    scoring on stderr (the metrics are the same without)."""
    for split in splits:
        if split not in SPLITS:
            raise ConfigError(f"unknown split {split!r}; choose valid or test")
    device = torch.device(device)
    folder = resolve(folder)
    with trusting_unverified(trust_unverified), validating_once():
        config = validate(apply_overrides(checkpoint_config(folder), None, list(overrides)))
        model = build_task_model(config)  # after the overrides: evaluation settings apply
        load_weights(model, folder)
        model.to(device).eval()
        task = task_class(config.task.name).for_checkpoint(config, device, folder)
    return {split: _scored(task, model, split, progress) for split in splits}


def analyze_checkpoint(
    folder: str | Path,
    split: str = "valid",
    max_tokens: int = 20_000,
    device: str | torch.device = "cpu",
    overrides: Sequence[str] = (),
    *,
    trust_unverified: bool = False,
) -> dict[str, Any]:
    """The attention sink, gate scores, massive activations and gate biases of a checkpoint
    (:mod:`highway_transformer.models.analysis`) while its task scores the first
    ``max_tokens`` of ``split``; a model with no attention and no gate is a ConfigError."""
    from .models.analysis import probing

    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}; choose valid or test")
    device = torch.device(device)
    folder = resolve(folder)
    with trusting_unverified(trust_unverified), validating_once():
        stored = checkpoint_config(folder)
        capped = list(overrides)
        if stored.task.name in SPLIT_CAPPED_TASKS:  # the others generate their data
            capped.append(f"data.max_eval_tokens={max_tokens}")
        config = validate(apply_overrides(stored, None, capped))
        model = build_task_model(config)
        load_weights(model, folder)
        model.to(device).eval()
        task = task_class(config.task.name).for_checkpoint(config, device, folder)
    with probing(model) as probe:
        if not probe.sinks and not probe.gates:
            raise ConfigError(
                f"{folder}: this model ({config.task.name} task, {type(model).__name__}) has no "
                "dot-product attention and no gate to analyse"
            )
        metrics = _scored(task, model, split, progress=False)
    return {"weights": str(folder), "split": split, "max_tokens": max_tokens,
            "metrics": metrics, **probe.summary()}  # fmt: skip


def _scored(task: Task, model: nn.Module, split: str, progress: bool) -> dict[str, float]:
    """``task``'s metrics of ``split``, with a progress bar of the scoring if ``progress``."""
    with (
        EvalBar(f"scoring {split}", task.eval_unit, progress) as bar,
        task.reporting(bar.report),
        torch.no_grad(),
        autocast_context(task.device, task.config.train.precision),
    ):
        return task.evaluate(model, split)
