"""Tasks beyond language modelling: polyphonic music, pixel-by-pixel digits / (p)MNIST,
copy memory, the adding problem and toy translation (RT §4; TCN suite; slides).

    from highway_transformer.tasks import run_task
    results = run_task(config, "runs/music")  # dispatches on config.task.name
"""

from __future__ import annotations

from ..config import check_task_config
from .definitions import TASKS, Task, build_task_model, check_max_len
from .runner import (
    TaskRun,
    evaluate_task_checkpoint,
    load_task_checkpoint,
    run_task,
)

__all__ = [
    "TASKS",
    "Task",
    "TaskRun",
    "build_task_model",
    "check_max_len",
    "check_task_config",
    "evaluate_task_checkpoint",
    "load_task_checkpoint",
    "run_task",
]
