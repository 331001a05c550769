"""``highway train --nproc N`` (``training/launch.py``): the started processes never relaunch,
and the launcher's outcomes become one line: a failed rank named, a stop passed on."""

from __future__ import annotations

import signal

import pytest
import torch.distributed.run
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from highway_transformer.errors import ConfigError, TrainingInterrupted
from highway_transformer.runtime.world import DistributedError
from highway_transformer.training.launch import SHUTDOWN_GRACE_S, launch, without_nproc


@pytest.mark.parametrize(
    ("argv", "kept"),
    [
        (["train", "--nproc", "2", "a=1"], ["train", "a=1"]),
        (["train", "--nproc=4", "--out", "o"], ["train", "--out", "o"]),
        (["train", "a=1", "--nproc"], ["train", "a=1"]),
        (["train", "--nprocs", "2"], ["train", "--nprocs", "2"]),  # another option: kept
    ],
)
def test_the_started_processes_get_no_nproc(argv: list[str], kept: list[str]) -> None:
    assert without_nproc(argv) == kept


def test_fewer_than_one_process_is_refused() -> None:
    with pytest.raises(ConfigError, match="^--nproc must be >= 1, got 0$"):
        launch(0, [])


def _launcher_raising(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> list[list[str]]:
    started: list[list[str]] = []

    def run(args: object) -> None:
        started.append([str(args.nproc_per_node), args.training_script, *args.training_script_args])
        raise error

    monkeypatch.setattr(torch.distributed.run, "run", run)
    return started


@pytest.mark.parametrize(("exitcode", "how"), [(-9, "killed by SIGKILL"), (3, "exit status 3")])
def test_a_failed_rank_is_named_in_one_line(
    monkeypatch: pytest.MonkeyPatch, exitcode: int, how: str
) -> None:
    failure = ProcessFailure(local_rank=1, pid=4242, exitcode=exitcode, error_file="<N/A>")
    started = _launcher_raising(monkeypatch, ChildFailedError("train", {1: failure}))
    with pytest.raises(DistributedError) as info:
        launch(2, ["model.d_model=8", "--out", "o"])
    assert started == [["2", "highway_transformer.cli", "train", "model.d_model=8", "--out", "o"]]
    assert str(info.value) == (
        f"rank 1 of 2 failed ({how}); the other ranks were stopped and the last checkpoint is "
        "intact: fix the cause above and continue with --resume"
    )


def test_a_stop_passed_on_to_the_ranks_ends_as_an_interruption(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _launcher_raising(monkeypatch, SignalException("stop", sigval=signal.SIGTERM))
    with pytest.raises(TrainingInterrupted) as info:
        launch(3, [])
    assert info.value.exit_status == 128 + signal.SIGTERM
    assert str(info.value).startswith("stopped by SIGTERM: the 3 processes were asked to stop")
    assert f"within {SHUTDOWN_GRACE_S} s" in str(info.value)
    assert str(info.value).endswith("continue with --resume")
