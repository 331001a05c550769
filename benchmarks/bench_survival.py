"""Runs that survive a cluster without a person: ranks killed under ``--max-restarts`` and
submitted rows preempted, each time after a new checkpoint, ended against an uninterrupted run.

* **Restarts**: ``highway train --nproc 2 --max-restarts K`` on a small text; each time the
  run has written a checkpoint newer than the last kill, one rank (1, 0, 1, ...) gets SIGKILL,
  K times. The restarts are counted from ``metrics.jsonl``; the losses are set against the
  same command run uninterrupted.
* **Preemptions**: one ``highway run ROW --launcher submitit-local`` row; each time it has
  written a checkpoint newer than the last warning, its job gets USR2 (what Slurm sends a job
  it is about to preempt), K times. The requeues are counted from ``train.log``; the losses
  are set against the same row trained uninterrupted.

    python benchmarks/bench_survival.py --kills 3 --preemptions 3
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Record, add_json_argument, print_machine  # noqa: E402

TEXT = "the quick brown fox jumps over the lazy dog; pack my box with five dozen jugs. " * 40
MODEL = [
    "model.d_model=16",
    "model.n_layers=2",
    "model.n_heads=2",
    "model.d_inner=32",
    "model.dropout=0",
    "data.corpus=file",
    "data.level=char",
]
TRAIN = [
    *MODEL,
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
ROW = "ht-table1/t-l3+sigmoid"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
HIGHWAY = [sys.executable, "-m", "highway_transformer.cli"]


def losses(run: Path, split: str) -> dict[int, float]:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in records if r["split"] == split}


def largest_difference(a: Path, b: Path) -> float:
    """The largest |Δ loss| over every train and valid record; inf if their steps differ."""
    worst = 0.0
    for split in ("train", "valid"):
        x, y = losses(a, split), losses(b, split)
        if x.keys() != y.keys():
            return float("inf")
        worst = max([worst, *(abs(x[s] - y[s]) for s in x)])
    return worst


def checkpoint_step(run: Path) -> int:
    """The step of ``run``'s checkpoint (-1 while it has none, or one is being swapped in)."""
    try:
        return json.loads((run / "checkpoint" / "trainer.json").read_text())["step"]
    except (OSError, ValueError, KeyError):
        return -1


def wait_for_checkpoint_after(run: Path, step: int, alive: object, timeout: float = 300) -> int:
    deadline = time.monotonic() + timeout
    while (now := checkpoint_step(run)) <= step:
        if not alive() or time.monotonic() > deadline:
            raise SystemExit(f"{run}: no checkpoint after step {step} (the run ended or hung)")
        time.sleep(0.1)
    return now


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def rank_of(pid: int) -> int | None:
    try:
        items = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    return next((int(item[5:]) for item in items if item.startswith(b"RANK=")), None)


def running(module: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if module.encode() in cmdline.read_bytes().split(b"\0"):
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def restarts(work: Path, text: Path, kills: int, steps: int) -> list[object]:
    """Kill a rank ``kills`` times; the row of the table."""
    overrides = [*TRAIN, f"data.path={text}", f"train.max_steps={steps}", "train.eval_interval=5"]
    reference, run = work / "uninterrupted", work / "restarted"
    command = [*HIGHWAY, "train", "--no-progress", "--nproc", "2", "--max-restarts", str(kills)]
    started = time.perf_counter()
    subprocess.run([*command, "--out", str(reference), *overrides],
                   env=ENV, check=True, capture_output=True)  # fmt: skip
    alone = time.perf_counter() - started
    started = time.perf_counter()
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    process = subprocess.Popen([*command, "--out", str(run), *overrides], env=ENV, **pipes)
    last = -1
    for kill in range(kills):
        last = wait_for_checkpoint_after(run, last, lambda: process.poll() is None)
        ranks = {rank_of(pid): pid for pid in children(process.pid)}
        os.kill(ranks[1 - kill % 2], signal.SIGKILL)
    _, stderr = process.communicate(timeout=600)
    wall = time.perf_counter() - started
    said = [line for line in stderr.splitlines() if line.startswith("restart ")]
    counted = len([1 for line in (run / "metrics.jsonl").read_text().splitlines()
                   if '"split": "restart"' in line])  # fmt: skip
    ended = "finished" if process.returncode == 0 else f"exit {process.returncode}"
    return [f"{kills} ranks killed (SIGKILL)", f"{counted} ({len(said)} log lines)", ended,
            f"{largest_difference(run, reference):.1e}", f"{wall:.0f}", f"{alone:.0f}"]  # fmt: skip


def preemptions(work: Path, text: Path, warnings: int, steps: int) -> list[object]:
    """Warn a submitted row ``warnings`` times; the row of the table."""
    from highway_transformer.config import Config
    from highway_transformer.experiments.runner import run_experiments
    from highway_transformer.training.trainer import train
    from highway_transformer.validation import build_config

    overrides = [*MODEL, f"data.path={text}", f"train.max_steps={steps}",
                 "train.eval_interval=5", "train.threads=1"]  # fmt: skip
    out = work / "rows"
    ended: list[object] = []

    def sweep() -> None:
        try:
            run_experiments([ROW], out, "tiny", overrides=overrides, launcher="submitit-local",
                            log=lambda line: None)  # fmt: skip
            ended.append("finished")
        except Exception as error:  # noqa: BLE001 - reported in the table
            ended.append(f"failed: {error}")

    started = time.perf_counter()
    thread = threading.Thread(target=sweep)
    thread.start()
    run = out / "ht-table1" / "tiny" / "t-l3+sigmoid" / "seed1"
    last = -1
    for _ in range(warnings):
        last = wait_for_checkpoint_after(run, last, thread.is_alive)
        jobs = running("submitit.core._submit")
        if len(jobs) != 1:
            raise SystemExit(f"{run}: {len(jobs)} jobs running, not 1 (it finished first?)")
        job = jobs[0]
        os.kill(job, signal.SIGUSR2)
        while job in running("submitit.core._submit"):  # the requeued job is a new process
            time.sleep(0.1)
        last = checkpoint_step(run)  # the one the warned job stopped at
    thread.join()
    wall = time.perf_counter() - started
    log = (run / "train.log").read_text()
    requeued = sum("requeued (requeue" in line for line in log.splitlines())
    reference = work / "row-uninterrupted"
    started = time.perf_counter()
    train(build_config(Config(), run / "config.yaml", []), reference, progress=False)
    alone = time.perf_counter() - started
    return [f"{warnings} jobs warned (USR2)", str(requeued), str(ended[0] if ended else "?"),
            f"{largest_difference(run, reference):.1e}", f"{wall:.0f}", f"{alone:.0f}"]  # fmt: skip


def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=3, help="ranks killed under --max-restarts")
    parser.add_argument("--preemptions", type=int, default=3, help="warnings to a submitted row")
    parser.add_argument("--steps", type=int, default=400, help="steps of the 2-process runs")
    parser.add_argument("--row-steps", type=int, default=3000, help="steps of the submitted row")
    add_json_argument(parser)
    args = parser.parse_args()
    print_machine()
    record = Record()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        text = work / "pattern.txt"
        text.write_text(TEXT, encoding="utf-8")
        rows = [restarts(work, text, args.kills, args.steps)]
        if args.preemptions:  # a row trains 4-5x faster than 2 processes: more steps
            rows.append(preemptions(work, text, args.preemptions, args.row_steps))
    record.table(
        [
            "interruptions",
            "restarts / requeues",
            "run",
            "max |Δ loss| vs uninterrupted",
            "wall s",
            "uninterrupted s",
        ],  # fmt: skip
        rows,
        caption=f"runs interrupted mid-way ({args.steps} steps on 2 processes; the row "
        f"{args.row_steps} steps), every interruption after a new checkpoint; losses of every "
        "train and valid record against the same run uninterrupted",
    )
    results = {"rows": rows, "kills": args.kills, "preemptions": args.preemptions}
    record.write(args.json, results)
    return results


if __name__ == "__main__":
    main()
