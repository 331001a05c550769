"""Tasks: each owns its data, model, loss and metrics; one trainer runs any of them.

=============  =====================================================  ======================
task           data and model                                         metrics
=============  =====================================================  ======================
``lm``         a corpus stream, language model (HT, Transformer-XL)   nats, bits/token, ppl
``music``      piano rolls (RT §4.2; Boulanger-Lewandowski et al.),   NLL per time step
               88 Bernoulli logits at each step
``pixels``     pixel-by-pixel digits (8x8 default) or (p)MNIST        cross-entropy, accuracy
               (RT §4.1), pooled head over 10 classes
``copy``       copy memory (TCN suite), symbol logits at each step    cross-entropy, accuracy
                                                                      on the copied steps
``adding``     adding problem (TCN suite), pooled regression          mean squared error
``seq2seq``    toy reversal-translation pairs, encoder-decoder        cross-entropy, token
                                                                      accuracy, exact match
``rl``         PPO rollouts of a memory environment (corridor,        return, success rate
               MiniGrid Memory), episodic-memory Transformer policy
=============  =====================================================  ======================

Each task builds its model from the :class:`~highway_transformer.config.Config` alone, so a
checkpoint folder (weights + ``config.json``) is enough to rebuild it.
"""

from __future__ import annotations

import torch
from torch import nn

from ..config import Config
from ..errors import unknown_choice
from ..models.resources import check_model_size
from .base import Batch, EpochOrder, Task, TaskState, check_max_len
from .lm import LMTask
from .music import MusicTask
from .pixels import PixelsTask
from .rl import RLTask
from .seq2seq import Seq2SeqTask
from .synthetic import AddingTask, CopyTask

#: Every task by its ``task.name``.
TASKS: dict[str, type[Task]] = {
    task.name: task
    for task in (LMTask, MusicTask, PixelsTask, CopyTask, AddingTask, Seq2SeqTask, RLTask)
}


def task_class(name: str) -> type[Task]:
    if name not in TASKS:
        raise unknown_choice("task (task.name)", name, TASKS)
    return TASKS[name]


def task_baselines(config: Config) -> dict[str, dict[str, dict[str, float]]]:
    """The trivial models of ``config``'s task and data (:meth:`Task.baselines`), the data
    read on the CPU as training reads it."""
    return task_class(config.task.name)(config, torch.device("cpu")).baselines()


def build_task_model(config: Config) -> nn.Module:
    """The model of ``config.task.name`` (no data needed) from a validated config: for loading
    a checkpoint. A model whose weights cannot fit this machine's memory is refused before it
    is allocated."""
    build = task_class(config.task.name).build_model
    check_model_size(config, torch.device("cpu"), build, training=False)
    return build(config)


__all__ = [
    "TASKS",
    "AddingTask",
    "Batch",
    "CopyTask",
    "EpochOrder",
    "LMTask",
    "MusicTask",
    "PixelsTask",
    "RLTask",
    "Seq2SeqTask",
    "Task",
    "TaskState",
    "build_task_model",
    "check_max_len",
    "task_class",
]
