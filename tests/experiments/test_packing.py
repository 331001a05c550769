"""Several runs on one device (``experiments/packing.py``, ``highway run --device cuda --jobs
N``): the peak-memory estimate against a peak measured on the CPU and monotone in the step's
sizes; N runs refused or accepted against a device's free memory (the CUDA query replaced);
the packed runs' aggregate throughput from their run folders."""

from __future__ import annotations

import json
import weakref
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from highway_transformer.config import Config
from highway_transformer.errors import ConfigError
from highway_transformer.experiments import packing, plan_runs, runner
from highway_transformer.experiments.packing import (
    GiB,
    PeakEstimate,
    aggregate_line,
    check_fits,
    check_packing,
    estimate_peak,
)
from highway_transformer.experiments.scale import scale_config
from highway_transformer.presets import get_preset
from highway_transformer.runtime.device import autocast_context
from highway_transformer.storage import runfolder
from highway_transformer.tasks import task_class
from highway_transformer.training.optim import build_optimizer
from highway_transformer.validation import build_config


def _config(preset: str, *overrides: str) -> Config:
    extra = ["model.vocab_size=60", "data.batch_size=8", "data.seq_len=64", *overrides]
    return build_config(scale_config(get_preset(preset), "tiny"), None, extra)


class _StoragePeak(TorchDispatchMode):
    """The largest number of bytes the tensors made inside it held at once (each storage
    counted from the operation that made it to its release)."""

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[int, int] = {}
        self.now = self.peak = 0

    def _free(self, key: int) -> None:
        self.now -= self.live.pop(key, 0)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        out = func(*args, **(kwargs or {}))
        for tensor in tree_flatten(out)[0]:
            if not isinstance(tensor, torch.Tensor):
                continue
            storage = tensor.untyped_storage()
            key = storage.data_ptr()
            if key and key not in self.live:
                self.live[key] = storage.nbytes()
                self.now += storage.nbytes()
                self.peak = max(self.peak, self.now)
                weakref.finalize(storage, self._free, key)
        return out


def _measured_peak(config: Config) -> int:
    """Bytes of the model's weights plus the peak of what two training steps allocate (the
    second with the optimiser's state and, for Transformer-XL, the first step's memory)."""
    torch.manual_seed(0)
    model = task_class(config.task.name).build_model(config)
    optimizer = build_optimizer(model.parameters(), config.train)
    rows, length, vocab = config.data.batch_size, config.data.seq_len, config.model.vocab_size
    memory = None
    with _StoragePeak() as peak:
        for _ in range(2):
            x, y = torch.randint(0, vocab, (2, rows, length))
            with autocast_context(torch.device("cpu"), config.train.precision):
                out = model(x, memory=memory, targets=y, reduction="sum")
            out.loss.backward()
            memory = out.memory
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.train.clip or 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            del out
    weights = sum(t.untyped_storage().nbytes() for t in [*model.parameters(), *model.buffers()])
    return weights + peak.peak


@pytest.mark.parametrize(
    "preset, overrides",
    [
        ("ht-table1/t-l3+sigmoid", ("model.dropout_attn=0.1",)),
        ("ht-table2/rt-l3", ()),
        ("ht-table5/l6-xl", ("model.memory.mem_len=64", "model.dropout_attn=0.1")),
        ("gtrxl/char-ptb-gru", ("model.memory.mem_len=64",)),
    ],
)
def test_the_estimate_bounds_a_measured_cpu_peak(preset: str, overrides: tuple[str, ...]) -> None:
    config = _config(preset, *overrides)
    estimate = estimate_peak(config, "cpu")
    assert estimate.process == 0  # a CPU process pays no CUDA context
    measured = _measured_peak(config)
    counted = estimate.state + estimate.training  # before the allocator's slack
    assert measured <= counted <= 8 * measured  # conservative, not absurd


@pytest.mark.parametrize(
    "key, small, large",
    [
        ("data.batch_size", 4, 8),
        ("data.seq_len", 32, 64),
        ("model.d_model", 64, 128),
        ("model.memory.mem_len", 16, 64),
    ],
)
def test_the_estimate_grows_with_the_batch_the_length_and_the_width(
    key: str, small: int, large: int
) -> None:
    def total(value: int) -> int:
        return estimate_peak(_config("ht-table5/l6-xl", f"{key}={value}")).total

    assert total(small) < total(large)


def _estimate(gib: float) -> PeakEstimate:
    return PeakEstimate(parameters=1, state=0, training=0, evaluation=0, process=int(gib * GiB))


def test_runs_at_once_are_refused_beyond_the_free_memory_with_the_jobs_that_fit() -> None:
    runs = [("a", _estimate(3)), ("b", _estimate(2)), ("c", _estimate(1))]
    lines = check_fits(runs, 2, 5 * GiB, "cuda:0")
    assert "2 largest of 3 run(s) at once need at most 5.0 GiB of the 5.0 GiB free" in lines[0]
    with pytest.raises(ConfigError, match=r"--jobs 3: .* 6\.0 GiB but cuda:0 has 5\.0 GiB free"):
        check_fits(runs, 3, 5 * GiB, "cuda:0")
    with pytest.raises(ConfigError, match="use --jobs 1 or fewer"):
        check_fits(runs, 3, 4 * GiB, "cuda:0")
    with pytest.raises(ConfigError, match="a alone is estimated at 3.0 GiB .* --jobs 1"):
        check_fits(runs, 2, 2 * GiB, "cuda:0")


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """A CUDA device whose free memory is ``gpu["free"]`` bytes (the query replaced)."""
    state = {"free": 80 * GiB}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (state["free"], 80 * GiB))
    return state


def test_packing_checks_cuda_runs_against_the_devices_free_memory(gpu: dict[str, int]) -> None:
    config = _config("ht-table5/l6-xl", "train.device=cuda")
    one = estimate_peak(config).total
    gpu["free"] = 4 * one
    runs = [(f"row{i}", config) for i in range(6)]
    assert "4 largest of 6 run(s)" in check_packing(runs, 4)[0]
    with pytest.raises(ConfigError, match="use --jobs 4 or fewer"):
        check_packing(runs, 5)
    on_cpu = [(name, config.replace(**{"train.device": "cpu"})) for name, _ in runs]
    assert check_packing(on_cpu, 6) == []  # a CPU shares its cores out: nothing to check


def test_the_runner_refuses_before_any_run_starts(
    tmp_path: Path, gpu: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[object] = []
    monkeypatch.setattr(runner, "run_parallel", lambda *args: started.append(args) or [])
    rows = ["ht-table1/t-l3", "ht-table1/t-l3+sigmoid"]
    specs = plan_runs(
        rows, tmp_path, "tiny", overrides=["model.vocab_size=60", "train.device=cuda"]
    )
    gpu["free"] = estimate_peak(specs[1].config).total  # room for the larger run alone
    with pytest.raises(ConfigError, match="use --jobs 1 or fewer"):
        runner.run_planned(specs, tmp_path, jobs=2)
    assert not started and not any(tmp_path.iterdir())  # nothing written, nothing started
    gpu["free"] = 80 * GiB
    lines: list[str] = []
    runner.run_planned(specs, tmp_path, jobs=2, log=lines.append)
    assert len(started) == 1 and "2 largest of 2 run(s) at once need at most" in lines[0]


def _results(
    run_dir: Path, steps: int, tokens: int, stretches: list[tuple[int, int, float]]
) -> None:
    run_dir.mkdir(parents=True)
    record = {
        "steps": steps,
        "train_tokens": tokens,
        "stretches": [{"from_step": a, "to_step": b, "seconds": s} for a, b, s in stretches],
    }
    (run_dir / runfolder.RESULTS_FILE).write_text(json.dumps(record), encoding="utf-8")


def test_the_aggregate_throughput_counts_what_each_run_trained_now(tmp_path: Path) -> None:
    _results(tmp_path / "a", 100, 10_000, [(0, 100, 20.0)])  # started by this command
    _results(tmp_path / "b", 100, 10_000, [(0, 40, 9.0), (40, 100, 12.0)])  # resumed at 40
    (tmp_path / "c").mkdir()  # stopped before it finished: no results
    dirs = [tmp_path / name for name in "abc"]
    line = aggregate_line(dirs, 25.0, 2)
    assert line == (
        "2 run(s) trained, 2 at a time: 16,000 tokens in 25.0 s of wall time, 640 tokens/s "
        "together (each run's own rate: mean 500 tokens/s)"
    )
    assert aggregate_line([tmp_path / "c"], 25.0, 2) is None


def test_the_runner_logs_the_aggregate_after_packed_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    specs = plan_runs(["ht-table1/t-l3"], tmp_path, "tiny", seeds=2, overrides=["train.device=cpu"])

    def train(jobs_todo: list, jobs: int, log: object) -> list:
        for job in jobs_todo:
            _results(job.spec.run_dir, 10, 1_000, [(0, 10, 1.0)])
        return [job.spec for job in jobs_todo]

    monkeypatch.setattr(runner, "run_parallel", train)
    lines: list[str] = []
    runner.run_planned(specs, tmp_path, jobs=2, log=lines.append)
    assert lines[-1].startswith("2 run(s) trained, 2 at a time: 2,000 tokens in ")
    assert packing.trained_now(specs[0].run_dir) == packing.Trained(1_000, 1.0)
