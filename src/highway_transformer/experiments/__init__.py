"""The papers' experiments: named table rows, scaled-down budgets and a resumable runner.

from highway_transformer.experiments import run_experiments
run_dirs = run_experiments("ht-table1", "runs", scale="small", data_path="data/ptb")

Your own A/B (``highway ab``): ``run_planned(plan_ab(["plain=ht-table1/t-l3",
"tanh=ht-table1/t-l3+tanh"], "runs", "tiny").specs, "runs")``.
"""

from __future__ import annotations

from ..errors import ExperimentFailed
from .ab import plan_ab
from .plan import experiment_config, plan_runs, run_dir_for
from .registry import (
    EXPERIMENTS,
    TABLES,
    Experiment,
    get_experiment,
    list_experiments,
    resolve_experiments,
    table_experiments,
)
from .runner import run_experiments, run_planned
from .scale import SCALES, Scale, describe_scale, get_scale, scale_config

__all__ = [
    "EXPERIMENTS",
    "SCALES",
    "TABLES",
    "Experiment",
    "ExperimentFailed",
    "Scale",
    "describe_scale",
    "experiment_config",
    "get_experiment",
    "get_scale",
    "list_experiments",
    "plan_ab",
    "plan_runs",
    "resolve_experiments",
    "run_dir_for",
    "run_experiments",
    "run_planned",
    "scale_config",
    "table_experiments",
]
