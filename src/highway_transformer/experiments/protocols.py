"""Validation measured the way a paper measured its "eval" column (HT Table 5).

HT Table 5's eval bpc is the validation the authors' training script printed (segment 128,
memory 896), not the 80 / 2100 test protocol the final evaluation uses. After a row trains,
its best checkpoint is evaluated once more on the full validation split with the row's
``eval_overrides`` scaled like the rest of the run, into ``protocol_eval.json``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..storage import runfolder
from ..storage.runfolder import PROTOCOL_FILE
from ..training.runlock import claim_run_folder
from .registry import Experiment
from .scale import scale_config

if TYPE_CHECKING:
    from .plan import RunSpec


def protocol_overrides(experiment: Experiment, scale: str) -> list[str]:
    """The row's eval overrides at ``scale`` (lengths scaled as the scale scales them)."""
    from ..validation import build_config  # torch: only when a row is measured

    config = scale_config(
        build_config(experiment.config(), None, list(experiment.eval_overrides)), scale
    )
    d, m = config.data, config.model.memory
    same = "null" if m.eval_same_length is None else str(m.eval_same_length).lower()
    return [
        f"data.eval_layout={d.eval_layout}",
        f"data.eval_seq_len={d.eval_seq_len}",
        f"model.memory.eval_mem_len={m.eval_mem_len}",
        f"model.memory.eval_clamp_len={m.eval_clamp_len}",
        f"model.memory.eval_same_length={same}",
        "data.max_eval_tokens=null",  # the whole validation split, as the script evaluated it
    ]


def measure_protocol(
    run_dir: str | Path, experiment: Experiment, scale: str, device: str = "auto"
) -> dict[str, Any] | None:
    """Evaluate ``run_dir/best`` the paper's way once (kept in ``protocol_eval.json``), on
    ``device`` (``train.device``: where the run trained, a GPU when it had one); None for rows
    whose paper states no separate protocol, and while another process holds the folder
    (another runner measuring it: the record comes from there)."""
    if not experiment.eval_overrides:
        return None
    path = Path(run_dir) / PROTOCOL_FILE
    with claim_run_folder(run_dir) as mine:
        if not mine:
            return None
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
        return _measure(path, experiment, scale, device)


def _measure(path: Path, experiment: Experiment, scale: str, device: str) -> dict[str, Any]:
    from ..api import evaluate_checkpoint
    from ..runtime.device import resolve_device

    overrides = protocol_overrides(experiment, scale)
    best = path.parent / "best"
    metrics = evaluate_checkpoint(best, ["valid"], resolve_device(device), overrides)["valid"]
    record = {"protocol": experiment.protocols.get(f"eval_{experiment.metric}", ""),
              "overrides": overrides, "valid": metrics}  # fmt: skip
    tmp = path.with_name(path.name + ".tmp")  # a run stopped mid-write leaves no half a file
    tmp.write_text(json.dumps(record, indent=2, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)
    return record


def protocol_command(run_dir: Path, experiment: Experiment, scale: str, device: str) -> list[str]:
    """The process ``highway run --jobs N`` starts to measure a finished row, in a job slot
    of its own, so the runner goes on starting rows meanwhile."""
    module = "highway_transformer.experiments.protocol_job"
    return [sys.executable, "-m", module, str(run_dir), experiment.name, scale, device]


def needs_protocol(spec: RunSpec, log: Callable[[str], None]) -> bool:
    """HT Table 5: whether a finished row's validation is still to be measured the paper's
    way (once, as soon as it finishes: its ``best/`` weights may be dropped after that);
    a row whose weights are gone says so instead."""
    if not spec.experiment.eval_overrides or (spec.run_dir / PROTOCOL_FILE).is_file():
        return False
    if not (spec.run_dir / runfolder.BEST_DIR).is_dir():
        log(f"{spec.experiment.name} seed {spec.seed}: its best/ weights are gone, so its "
            "validation cannot be measured the paper's way; the report's paper-protocol "
            "table leaves it out")  # fmt: skip
        return False
    return True


def measured_line(spec: RunSpec) -> str:
    name = f"{spec.experiment.name} seed {spec.seed}"
    if not (spec.run_dir / PROTOCOL_FILE).is_file():
        return f"{name}: validation with the paper's protocol left to the process using its folder"
    return f"{name}: validation with the paper's protocol"
