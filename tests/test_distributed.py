"""Data-parallel training: N processes equal one, accumulation, resume across process counts,
rank 0 alone writes, a killed rank ends the run with one line.

The multi-process runs start ``highway train --nproc 2`` (torchrun on this machine, gloo on
the CPU, one thread each); the one-process references run in this process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from highway_transformer.cli import main
from highway_transformer.config import Config
from highway_transformer.errors import CheckpointError, ConfigError, DataError
from highway_transformer.presets import get_preset
from highway_transformer.runtime.world import World
from highway_transformer.storage.folder import MODEL_FILE, STATE_FILE
from highway_transformer.storage.runfolder import read_metrics
from highway_transformer.training import checkpoint as ckpt
from highway_transformer.training.trainer import Trainer, train
from highway_transformer.validation import build_config

PATTERN = "the quick brown fox jumps over the lazy dog; pack my box with five dozen jugs. " * 40

LM = [
    "model.d_model=16",
    "model.n_layers=2",
    "model.n_heads=2",
    "model.d_inner=32",
    "model.dropout=0",
    "data.corpus=file",
    "data.level=char",
    "data.batch_size=4",
    "data.seq_len=12",
    "data.context=4",
    "data.eval_batch_size=6",
    "data.max_eval_tokens=400",
    "train.optimizer=adam",
    "train.lr=0.01",
    "train.schedule=constant",
    "train.log_interval=1",
    "train.threads=1",
]
XL = [
    "model.family=xl",
    "model.attention=relative",
    "model.memory.mem_len=8",
    "model.gate.kind=sdu",
]


@pytest.fixture(scope="module")
def text_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "pattern.txt"
    path.write_text(PATTERN, encoding="utf-8")
    return path


def lm_args(text_file: Path, *extra: str) -> list[str]:
    return [*LM, f"data.path={text_file}", *extra]


def cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "highway_transformer.cli", "train", "--no-progress", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)


def launch(out: Path, overrides: list[str], *flags: str) -> None:
    done = cli("--nproc", "2", "--out", str(out), *flags, *overrides)
    assert done.returncode == 0, done.stderr[-2000:]


def one_process(out: Path, overrides: list[str], resume: bool = False) -> dict:
    config = build_config(Config(), None, overrides)
    return train(config, out, resume=resume, progress=False)


def losses(run: Path, split: str = "train") -> dict[int, float]:
    records = [r for r in read_metrics(run) if r["split"] == split]
    steps = [r["step"] for r in records]
    assert len(steps) == len(set(steps)), "a record was written twice (only rank 0 writes)"
    return {r["step"]: r["loss"] for r in records}


def assert_same_losses(a: dict[int, float], b: dict[int, float]) -> None:
    assert a.keys() == b.keys()
    for step in a:
        assert abs(a[step] - b[step]) < 1e-6, (step, a[step], b[step])


def test_two_processes_train_and_evaluate_like_one_transformer(tmp_path, text_file):
    overrides = lm_args(text_file, "train.max_steps=5", "train.eval_interval=5")
    launch(tmp_path / "two", overrides)
    one_process(tmp_path / "one", overrides)
    assert_same_losses(losses(tmp_path / "two"), losses(tmp_path / "one"))
    assert_same_losses(losses(tmp_path / "two", "valid"), losses(tmp_path / "one", "valid"))
    two = json.loads((tmp_path / "two" / "results.json").read_text())
    one = json.loads((tmp_path / "one" / "results.json").read_text())
    for split in ("valid", "test"):
        assert two[split]["tokens"] == one[split]["tokens"]
        assert two[split]["loss"] == pytest.approx(one[split]["loss"], abs=1e-6)
    # rank 0 alone wrote: no stray temporary folders, every record once
    assert sorted(p.name for p in (tmp_path / "two").iterdir() if p.is_dir()) == sorted(
        p.name for p in (tmp_path / "one").iterdir() if p.is_dir()
    )


def test_with_dropout_on_two_processes_are_not_one(tmp_path, text_file):
    """The condition docs/gpus.md states: each rank draws its own dropout masks, so with
    dropout on the training losses of N processes differ from one process's from the first
    step (equally valid runs, not the same numbers)."""
    overrides = lm_args(
        text_file, "model.dropout=0.3", "train.max_steps=2", "train.eval_interval=2"
    )
    launch(tmp_path / "two", overrides)
    one_process(tmp_path / "one", overrides)
    two, one = losses(tmp_path / "two"), losses(tmp_path / "one")
    assert two.keys() == one.keys() and abs(two[1] - one[1]) > 1e-4


def test_xl_memory_checkpoint_of_two_processes_resumes_in_one_and_back(tmp_path, text_file):
    base = lm_args(text_file, *XL, "train.eval_interval=3")
    one_process(tmp_path / "ref", [*base, "train.max_steps=6"])
    reference = losses(tmp_path / "ref")

    # 2 processes for steps 1-3, then 1 process continues 4-6 from the per-row memories
    launch(tmp_path / "a", [*base, "train.max_steps=3"])
    one_process(tmp_path / "a", [*base, "train.max_steps=6"], resume=True)
    assert_same_losses(losses(tmp_path / "a"), reference)

    # and the reverse: 1 process, then 2
    one_process(tmp_path / "b", [*base, "train.max_steps=3"])
    launch(tmp_path / "b", [*base, "train.max_steps=6"], "--resume")
    assert_same_losses(losses(tmp_path / "b"), reference)


def test_fsdp_sharded_run_resumes_in_one_process(tmp_path, text_file):
    """FSDP (fully_shard, gloo on the CPU): the same losses as one process; its checkpoint,
    gathered to rank 0, holds whole weights and optimizer state that one process resumes."""
    base = lm_args(text_file, *XL, "train.eval_interval=2")
    one_process(tmp_path / "ref", [*base, "train.max_steps=4"])
    launch(tmp_path / "run", [*base, "train.max_steps=2", "train.strategy=fsdp"])
    one_process(tmp_path / "run", [*base, "train.max_steps=4"], resume=True)
    assert_same_losses(losses(tmp_path / "run"), losses(tmp_path / "ref"))


def test_accumulate_two_equals_a_doubled_batch(tmp_path, text_file):
    base = lm_args(text_file, *XL, "train.max_steps=4", "train.eval_interval=4")
    one_process(tmp_path / "acc", [*base, "data.batch_size=2", "train.accumulate=2"])
    one_process(tmp_path / "big", [*base, "data.batch_size=4"])
    assert_same_losses(losses(tmp_path / "acc"), losses(tmp_path / "big"))


def test_fsdp_accumulate_two_equals_a_doubled_batch(tmp_path, text_file):
    """FSDP skips the reduce-scatter on the first micro-batch (set_requires_gradient_sync)
    and still computes the gradient of the doubled batch."""
    base = lm_args(text_file, *XL, "train.max_steps=3", "train.eval_interval=3")
    accumulated = [*base, "data.batch_size=2", "train.accumulate=2", "train.strategy=fsdp"]
    launch(tmp_path / "acc", accumulated)
    one_process(tmp_path / "big", [*base, "data.batch_size=4"])
    assert_same_losses(losses(tmp_path / "acc"), losses(tmp_path / "big"))


def test_resuming_with_another_global_batch_is_refused(tmp_path, text_file):
    base = lm_args(text_file, "train.max_steps=2", "train.eval_interval=2")
    one_process(tmp_path / "run", base)
    before = (tmp_path / "run" / "checkpoint" / MODEL_FILE).read_bytes()
    with pytest.raises(CheckpointError, match="global batch of 4 rows"):
        one_process(tmp_path / "run", [*base, "data.batch_size=8"], resume=True)
    assert (tmp_path / "run" / "checkpoint" / MODEL_FILE).read_bytes() == before


def test_a_task_trains_in_two_processes_like_in_one(tmp_path):
    # seq2seq: the counted targets differ between ranks, the mean is still the global one
    overrides = [
        "model.d_model=16",
        "model.d_inner=32",
        "model.dropout=0",
        "data.batch_size=4",
        "train.max_steps=5",
        "train.eval_interval=5",
        "train.log_interval=1",
        "train.eval_max_tokens=200",
        "data.eval_batch_size=5",  # uneven shares: 3 and 2 rows, a short last batch
        "train.threads=1",
    ]
    done = cli(
        "--preset", "seq2seq/toy", "--nproc", "2", "--out", str(tmp_path / "two"), *overrides
    )
    assert done.returncode == 0, done.stderr[-2000:]
    config = build_config(get_preset("seq2seq/toy"), None, overrides)
    train(config, tmp_path / "one", progress=False)
    assert_same_losses(losses(tmp_path / "two"), losses(tmp_path / "one"))
    assert_same_losses(losses(tmp_path / "two", "valid"), losses(tmp_path / "one", "valid"))
    # the ranks evaluate their shares; the all-reduced sums give the single-process metrics
    two = json.loads((tmp_path / "two" / "results.json").read_text())
    one = json.loads((tmp_path / "one" / "results.json").read_text())
    for split in ("valid", "test"):
        assert two[split].keys() == one[split].keys()
        for metric in ("loss", "token_accuracy", "exact_match"):
            assert two[split][metric] == pytest.approx(one[split][metric], abs=1e-6)


def test_evaluation_shares_cover_every_example_once_with_rows_in_every_batch(tmp_path):
    from highway_transformer.tasks import AddingTask

    config = Config().replace(**{"task.name": "adding", "data.eval_batch_size": 4})
    task = AddingTask(config, torch.device("cpu"))
    shares = []
    for rank in range(3):
        task.shard(World(rank=rank, size=3))
        shares.append(task.eval_slices(13))  # batches of 4, 4, 4 + the short 1 joined: 5
    assert [[(s.start, s.stop) for s in share] for share in shares] == [
        [(0, 1), (4, 5), (8, 9)],
        [(1, 2), (5, 6), (9, 11)],
        [(2, 4), (6, 8), (11, 13)],
    ]
    task.shard(World(rank=0, size=3))
    with pytest.raises(DataError, match="2 examples cannot be shared by 3 processes"):
        task.eval_slices(2)


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _rank_of(pid: int) -> int | None:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for item in environ:
        if item.startswith(b"RANK="):
            return int(item[5:])
    return None


def _ended(pid: int) -> bool:
    """Whether process ``pid`` has exited (gone, or a zombie no one has reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _start_two(
    out: Path, overrides: list[str], *flags: str
) -> tuple[subprocess.Popen, dict[int, int]]:
    """``highway train --nproc 2 FLAGS`` into ``out``, once it has written a checkpoint; its
    ranks' PIDs by rank."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "highway_transformer.cli", "train", "--no-progress"]
    process = subprocess.Popen(
        [*command, "--nproc", "2", *flags, "--out", str(out), *overrides],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 180
    while not (out / "checkpoint" / STATE_FILE).is_file():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(process.communicate()[1][-1500:])
        time.sleep(0.2)
    ranks = {_rank_of(pid): pid for pid in _children(process.pid)}
    assert sorted(ranks) == [0, 1], ranks
    return process, ranks


needs_proc = pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the ranks in /proc")


def _endless(text_file: Path) -> list[str]:
    return lm_args(text_file, "train.max_steps=100000", "train.eval_interval=2")


@needs_proc
def test_a_killed_rank_ends_the_run_with_one_line_naming_it(tmp_path, text_file):
    """Rank 0's collective fails when rank 1 dies: that is no failure of its own, so the one
    line names rank 1 (not rank 0, nor a timeout that never happened)."""
    out = tmp_path / "run"
    process, ranks = _start_two(out, _endless(text_file))
    try:
        os.kill(ranks[1], signal.SIGKILL)
        _, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 2
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr[-1500:]
    assert errors[0].startswith("error: rank 1 of 2 failed (killed by SIGKILL)")
    assert "checkpoint is intact" in errors[0] and stderr.strip().endswith(errors[0])
    assert "rank 0" not in stderr and "dist_timeout" not in stderr
    assert ckpt.load_trainer_state(out / "checkpoint").step % 2 == 0


@pytest.mark.slow
@needs_proc
def test_a_killed_rank_is_restarted_and_the_run_ends_as_if_uninterrupted(tmp_path, text_file):
    """``--max-restarts 1``: rank 1 killed after a checkpoint; torch's launcher starts both
    ranks again, they continue from the last checkpoint and the run ends with the losses of
    one uninterrupted process, the restart told in one line and one metrics record."""
    overrides = lm_args(text_file, "train.max_steps=120", "train.eval_interval=2")
    out = tmp_path / "run"
    process, ranks = _start_two(out, overrides, "--max-restarts", "1")
    try:
        os.kill(ranks[1], signal.SIGKILL)
        _, stderr = process.communicate(timeout=240)
    finally:
        process.kill()
    assert process.returncode == 0, stderr[-1500:]
    restarts = [line for line in stderr.splitlines() if line.startswith("restart ")]
    assert len(restarts) == 1 and "error" not in stderr, stderr[-1500:]
    records = [r for r in read_metrics(out) if r["split"] == "restart"]
    assert len(records) == 1 and records[0]["restart"] == 1 and records[0]["max_restarts"] == 1
    step = records[0]["step"]
    assert restarts[0] == (
        f"restart 1 of 1 after a rank failed: resumed from the checkpoint at step {step}"
    )
    assert 0 < step < 120  # the kill came mid-run, after a checkpoint
    reference = tmp_path / "one"
    one_process(reference, overrides)
    assert_same_losses(losses(out), losses(reference))
    assert_same_losses(losses(out, "valid"), losses(reference, "valid"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal: Linux")
@needs_proc
def test_a_killed_launcher_stops_its_ranks_at_a_checkpoint(tmp_path, text_file):
    """SIGKILL to ``highway train --nproc 2``: the kernel sends each rank SIGTERM, so they
    checkpoint at the same step and stop, rank 0 saying so in one line, the folder unlocked."""
    out = tmp_path / "run"
    process, ranks = _start_two(out, _endless(text_file))
    try:
        process.kill()  # the launcher cannot pass anything on
        _, stderr = process.communicate(timeout=120)  # the ranks hold its stderr until they end
        deadline = time.monotonic() + 60
        while not all(_ended(pid) for pid in ranks.values()):
            assert time.monotonic() < deadline, "a rank trains on without its launcher"
            time.sleep(0.2)
    finally:
        process.kill()
        for pid in ranks.values():
            if not _ended(pid):
                os.kill(pid, signal.SIGKILL)
    stops = [line for line in stderr.splitlines() if "stopped by" in line]
    assert len(stops) == 1, stderr[-1500:]
    step = ckpt.load_trainer_state(out / "checkpoint").step
    assert stops[0].startswith(f"stopped by SIGTERM: checkpoint at step {step} of 100000")
    assert not (out / "run.lock").exists()


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("nproc", "message"),
    [("8", "needs at least one row"), ("3", "does not divide into 3 processes")],
)
def test_process_counts_that_do_not_split_the_batch(tmp_path, text_file, capsys, nproc, message):
    # refused before any process starts
    code = main(["train", "--nproc", nproc, "--out", str(tmp_path / "x"), *lm_args(text_file)])
    stderr = capsys.readouterr().err.strip()
    assert code == 2
    assert stderr.startswith("error: ") and len(stderr.splitlines()) == 1
    assert message in stderr
    assert not (tmp_path / "x").exists()


def test_settings_for_several_processes_are_refused_in_one(tmp_path, text_file):
    for extra, message in [
        ("train.dist_backend=gloo", "applies to several processes only"),
        ("train.strategy=fsdp", "applies to several processes only"),
        ("train.pin_memory=true", "leave it off"),
    ]:
        config = build_config(Config(), None, lm_args(text_file, extra))
        with pytest.raises(ConfigError, match=message):
            Trainer(config, tmp_path / "x", progress=False)
    with pytest.raises(ConfigError, match="adam and adamw only"):
        build_config(Config(), None, ["train.fused_optimizer=true", "train.optimizer=sgd"])


# --------------------------------------------------------------------------- submitted jobs


def test_table_rows_as_submitted_jobs_skip_and_refuse(tmp_path, text_file):
    """``highway run --launcher`` through submitit's local executor (a Slurm stand-in): each
    row a job, finished rows skipped on the next call, job settings refused locally."""
    pytest.importorskip("submitit")
    from highway_transformer.experiments.runner import JobSettings, run_experiments

    rows = ["ht-table1/t-l3+sigmoid"]
    overrides = [
        *LM[:5],
        "data.corpus=file",
        f"data.path={text_file}",
        "train.max_steps=2",
        "train.eval_interval=2",
        "train.threads=1",
    ]
    messages: list[str] = []
    dirs = run_experiments(
        rows, tmp_path, "tiny", overrides=overrides, launcher="submitit-local", log=messages.append
    )
    assert sum("submitted as job" in m for m in messages) == len(rows)
    for d in dirs:
        assert json.loads((d / "results.json").read_text())["steps"] == 2
    messages.clear()
    run_experiments(
        rows, tmp_path, "tiny", overrides=overrides, launcher="submitit-local", log=messages.append
    )
    assert messages == [f"{row} seed 1: finished, skipped" for row in rows]
    with pytest.raises(ConfigError, match="add --launcher slurm"):
        run_experiments(rows, tmp_path, "tiny", overrides=overrides, job=JobSettings(nproc=2))
    with pytest.raises(ConfigError, match="add --nproc 1"):
        restarts = JobSettings(max_restarts=2)
        run_experiments(rows, tmp_path, "tiny", overrides=overrides, launcher="slurm", job=restarts)
    with pytest.raises(ConfigError, match="unknown launcher"):
        run_experiments(rows, tmp_path, "tiny", overrides=overrides, launcher="slrum")


def _processes_running(module: str) -> list[int]:
    """The PIDs whose command line runs ``python -m MODULE``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if module.encode() in argv:
            found.append(int(cmdline.parent.name))
    return found


@pytest.mark.slow
@needs_proc
def test_a_preempted_submitted_row_requeues_and_ends_as_if_uninterrupted(tmp_path, text_file):
    """submitit's local executor, the job warned as Slurm warns a preempted job (USR2): the
    row stops at a checkpoint, the job is requeued, resumes and ends with the losses of an
    uninterrupted run; train.log says so in one line."""
    pytest.importorskip("submitit")
    import threading

    from highway_transformer.experiments.runner import run_experiments

    overrides = [
        *LM[:5],
        "data.corpus=file",
        f"data.path={text_file}",
        "train.max_steps=150",
        "train.eval_interval=2",
        "train.threads=1",
    ]
    row, out = "ht-table1/t-l3+sigmoid", tmp_path / "runs"
    ended: list[BaseException | list[Path]] = []

    def sweep() -> None:
        try:
            dirs = run_experiments(
                [row], out, "tiny", overrides=overrides, launcher="submitit-local", log=print
            )
            ended.append(dirs)
        except BaseException as error:  # noqa: BLE001 - handed to the test thread
            ended.append(error)

    thread = threading.Thread(target=sweep)
    thread.start()
    run = out / "ht-table1" / "tiny" / "t-l3+sigmoid" / "seed1"
    deadline = time.monotonic() + 180
    while not (run / "checkpoint" / STATE_FILE).is_file():
        assert thread.is_alive() and time.monotonic() < deadline, ended
        time.sleep(0.2)
    (job,) = _processes_running("submitit.core._submit")
    os.kill(job, signal.SIGUSR2)  # what Slurm sends a job it is about to preempt
    thread.join(timeout=300)
    assert not thread.is_alive() and ended and isinstance(ended[0], list), ended
    log = (run / "train.log").read_text()
    requeued = [line for line in log.splitlines() if "requeued (requeue 1)" in line]
    assert len(requeued) == 1, log[-2000:]
    assert requeued[0].startswith("job warned by the scheduler (preemption or time limit): ")
    assert "stopped by SIGTERM: checkpoint at step" in log and "resumed from" in log
    assert json.loads((run / "results.json").read_text())["steps"] == 150
    reference = tmp_path / "one"
    train(build_config(Config(), run / "config.yaml", []), reference, progress=False)
    assert_same_losses(losses(run), losses(reference))
    assert_same_losses(losses(run, "valid"), losses(reference, "valid"))
