"""The training loop: streams, schedules, clipping, periodic evaluation, checkpoints, resume.

A run folder holds ``config.yaml``, ``metrics.jsonl`` / ``metrics.csv`` (one record per log
or evaluation), ``checkpoint/`` (last state, resumable), ``best/`` (best validation weights)
and ``results.json`` (final valid/test figures of the best weights).
"""

from __future__ import annotations

import csv
import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..config import Config, TrainConfig, save_config
from ..data.batching import train_rows, window_bounds
from ..data.corpora import Corpus, load_corpus
from ..data.vocab import Vocabulary
from ..errors import CheckpointError, ConfigError
from ..evaluate import EvalResult, autocast_context, evaluate
from ..models.lm import LanguageModel, build_model
from . import checkpoint as ckpt
from .accumulation import accumulate_gradients
from .distributed import World, check_divisible, init_world, seed_rank, wrap_model
from .optim import LRSchedule, build_optimizer, check_finite, set_lr, step_optimizer

METRICS_FILE = "metrics.jsonl"
RESULTS_FILE = "results.json"


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"unknown device {name!r}; use auto, cpu, cuda, cuda:N or mps") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device=cuda but no CUDA device is available; use device=auto")
    return device


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def setup_runtime(train: TrainConfig) -> torch.device:
    """Apply ``train.threads``, pick the device and seed every generator; return the device."""
    if train.threads:
        torch.set_num_threads(train.threads)
    device = resolve_device(train.device)
    seed_everything(train.seed)
    return device


def setup_world(train: TrainConfig) -> World:
    """:func:`setup_runtime`, then join the process group when torchrun started several."""
    world = init_world(train, setup_runtime(train))
    if train.pin_memory and world.device.type != "cuda":
        raise ConfigError(
            f"train.pin_memory speeds up copies to a CUDA device; this run is on "
            f"{world.device.type}: leave it off"
        )
    return world


def layout_rows(config: Config) -> int:
    """Rows of the training stream an optimizer step covers: batch_size x accumulate."""
    return config.data.batch_size * config.train.accumulate


@dataclass
class RunState:
    step: int = 0
    elapsed: float = 0.0  # training wall time, seconds, across resumes
    tokens: int = 0
    best_valid: float = math.inf
    best_step: int = 0
    memory: list[list[Tensor] | None] | None = None  # per micro-batch, per layer [rows, M, D]
    extra: dict[str, Any] = field(default_factory=dict)


class Trainer:
    """Trains one configuration into one run folder."""

    def __init__(
        self,
        config: Config,
        out_dir: str | Path,
        corpus: Corpus | None = None,
        progress: bool = True,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config.validate()
        self.out_dir = Path(out_dir)
        self.progress = progress
        t = config.train
        self.world = setup_world(t)  # seeds first: corpus loading draws no random numbers
        self.device = self.world.device
        self.log = log if log is not None and self.world.is_main else (lambda message: None)
        check_divisible(config.data.batch_size, self.world.size)
        self.corpus = corpus if corpus is not None else load_corpus(config.data, download=True)
        if not config.model.vocab_size:
            config.model.vocab_size = len(self.corpus.vocab)
        elif config.model.vocab_size != len(self.corpus.vocab):
            raise ConfigError(
                f"model.vocab_size={config.model.vocab_size} but the corpus has "
                f"{len(self.corpus.vocab)} symbols; leave vocab_size at 0 to take it from the data"
            )
        self.model: LanguageModel = build_model(config.model).to(self.device)
        seed_rank(self.world, t.seed)
        wrapped = wrap_model(self.model, self.world)
        self.forward = torch.compile(wrapped) if t.compile else wrapped
        self.optimizer = build_optimizer(self.model.parameters(), t)
        self.schedule = LRSchedule(t)
        inputs, targets = train_rows(self.corpus.train, layout_rows(config), config.data.seq_len)
        # this rank's contiguous block of rows; micro-batch k is the k-th slice of it
        mine = self.world.rows(layout_rows(config))
        self.inputs, self.targets = (
            _host(inputs[mine], t.pin_memory),
            _host(targets[mine], t.pin_memory),
        )
        self.micro_rows = config.data.batch_size // self.world.size
        self.bounds = window_bounds(self.inputs.shape[1], config.data.seq_len, config.data.context)
        self.state = RunState()
        self.writer = self._tensorboard() if self.world.is_main else None

    # ------------------------------------------------------------------ public

    @property
    def vocab(self) -> Vocabulary:
        return self.corpus.vocab

    def resume(self) -> bool:
        """Continue from ``out_dir/checkpoint`` if it exists; return whether it did."""
        folder = self.out_dir / "checkpoint"
        try:
            folder = ckpt.resolve(folder)
        except CheckpointError:
            return False
        saved = ckpt.read_config(folder)
        self._check_compatible(saved, Vocabulary.load(folder / ckpt.VOCAB_FILE))
        if layout_rows(saved) != layout_rows(self.config):
            raise CheckpointError(
                f"cannot resume {self.out_dir}: it was trained with a global batch of "
                f"{layout_rows(saved)} rows per step (data.batch_size x train.accumulate), this "
                f"run asks for {layout_rows(self.config)}; keep the product (any process count "
                "dividing data.batch_size works) or use a new --out"
            )
        ckpt.load_weights(self.model, folder)
        trainer = ckpt.load_trainer_state(folder)
        ckpt.restore_optimizer(self.optimizer, trainer.info["optimizer"], trainer.tensors)
        self.schedule.load_state_dict(trainer.info["schedule"])
        ckpt.restore_rng(trainer.info["rng"], trainer.tensors)
        seed_rank(self.world, self.config.train.seed, trainer.step)
        run = trainer.info["run"]
        memory = [trainer.tensors[f"memory.{i}"] for i in range(run["memory_layers"])]
        self.state = RunState(
            step=trainer.step,
            elapsed=run["elapsed"],
            tokens=run["tokens"],
            best_valid=run["best_valid"],
            best_step=run["best_step"],
            memory=self._split_memory(memory),
        )
        if self.world.is_main:
            self._truncate_metrics(trainer.step)
        self.log(f"resumed from {folder} at step {trainer.step}")
        return True

    def fit(self) -> dict[str, Any]:
        """Train to ``train.max_steps``, evaluating and checkpointing on the way."""
        if self.world.is_main:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            save_config(self.config, self.out_dir / "config.yaml")
        t = self.config.train
        bar = self._progress_bar() if self.world.is_main else None
        running, running_n, window_tokens, window_time = 0.0, 0, 0, 0.0
        self.model.train()
        while self.state.step < t.max_steps:
            started = time.perf_counter()
            loss, n_tokens = self._train_step()
            spent = time.perf_counter() - started
            self.state.step += 1
            self.state.elapsed += spent
            self.state.tokens += n_tokens
            running, running_n = running + loss, running_n + 1
            window_tokens, window_time = window_tokens + n_tokens, window_time + spent
            step = self.state.step
            if step % t.log_interval == 0 or step == t.max_steps:
                rate = window_tokens / max(window_time, 1e-9)
                self._record("train", running / running_n, lr=self.schedule.lr(step - 1), tps=rate)
                if bar is not None:
                    bar.set_postfix(loss=f"{running / running_n:.3f}", tok_s=f"{rate:,.0f}")
                running, running_n, window_tokens, window_time = 0.0, 0, 0, 0.0
            if bar is not None:
                bar.update(1)
            if step % t.eval_interval == 0 or step == t.max_steps:
                self._periodic_evaluation()
        if bar is not None:
            bar.close()
        return self.finish()

    def finish(self) -> dict[str, Any]:
        """Evaluate the best weights on valid and test; write ``results.json``."""
        best = self.out_dir / "best"
        if (best / ckpt.MODEL_FILE).is_file():
            ckpt.load_weights(self.model, best)
        data, t = self.config.data, self.config.train
        valid = evaluate(
            self.model, self.corpus.valid, data, self.device, t.precision, world=self.world
        )
        test = evaluate(
            self.model, self.corpus.test, data, self.device, t.precision, world=self.world
        )
        results = {
            "name": self.config.name,
            "steps": self.state.step,
            "best_step": self.state.best_step,
            "train_seconds": self.state.elapsed,
            "train_tokens": self.state.tokens,
            "tokens_per_second": self.state.tokens / max(self.state.elapsed, 1e-9),
            "parameters": self.model.num_parameters(),
            "valid": valid.as_dict(),
            "test": test.as_dict(),
        }
        if not self.world.is_main:
            return results
        (self.out_dir / RESULTS_FILE).write_text(json.dumps(results, indent=2), encoding="utf-8")
        self._write_csv()
        if self.writer is not None:
            self.writer.close()
        return results

    # ------------------------------------------------------------------ steps

    def _train_step(self) -> tuple[float, int]:
        t = self.config.train
        index = self.state.step % len(self.bounds)
        accumulate = t.accumulate
        if index == 0 or self.state.memory is None:
            # a new pass over the stream starts without memory
            self.state.memory = [None] * accumulate
        start, end, loss_start = self.bounds[index]
        set_lr(self.optimizer, self.schedule.lr(self.state.step))

        def micro_batch(k: int) -> tuple[Tensor, int]:
            rows = slice(k * self.micro_rows, (k + 1) * self.micro_rows)
            x = self.inputs[rows, start:end].to(self.device, non_blocking=True)
            y = self.targets[rows, start + loss_start : end].to(self.device, non_blocking=True)
            with autocast_context(self.device, t.precision):
                hidden, memory = self.forward(x, memory=self.state.memory[k])
            nll = self.model.token_nll(hidden[:, loss_start:], y)
            self.state.memory[k] = memory
            count = y.numel()  # training rows are never padded: no device sync to count targets
            return nll.sum() / count, count

        value, count = accumulate_gradients(
            self.forward, self.world, [lambda k=k: micro_batch(k) for k in range(accumulate)]
        )
        check_finite(value, self.state.step + 1, self.out_dir / "checkpoint")
        step_optimizer(self.model, self.optimizer, t.clip)
        return value, count

    def _periodic_evaluation(self) -> EvalResult:
        t = self.config.train
        result = evaluate(
            self.model,
            self.corpus.valid,
            self.config.data,
            self.device,
            t.precision,
            max_tokens=t.eval_max_tokens,
            world=self.world,
        )
        annealed = self.schedule.observe_validation(result.loss)
        self._record(
            "valid", result.loss, lr=self.schedule.lr(self.state.step), tokens=result.tokens
        )
        if annealed:
            self.log(f"validation stalled: learning rate annealed at step {self.state.step}")
        if result.loss < self.state.best_valid:  # the same on every rank: all-reduced sums
            self.state.best_valid, self.state.best_step = result.loss, self.state.step
            if self.world.is_main:
                ckpt.save_checkpoint(self.out_dir / "best", self.model, self.config, self.vocab)
        self.save()
        self.world.barrier()  # no rank reads best/ or checkpoint/ before rank 0 wrote them
        return result

    def save(self) -> Path:
        """Write the resumable checkpoint (atomically; rank 0, the others join the gather).

        Memories are stored as full global rows in stream order, and the data position is
        the step: any process count can resume it.
        """
        memory = self._gather_memory()
        folder = self.out_dir / "checkpoint"
        if not self.world.is_main:
            return folder
        optim_info, optim_tensors = ckpt.flatten_optimizer(self.optimizer)
        rng_info, rng_tensors = ckpt.capture_rng()
        tensors = {**optim_tensors, **rng_tensors}
        tensors.update({f"memory.{i}": m for i, m in enumerate(memory)})
        info = {
            "optimizer": optim_info,
            "schedule": self.schedule.state_dict(),
            "rng": rng_info,
            "run": {
                "elapsed": self.state.elapsed,
                "tokens": self.state.tokens,
                "best_valid": self.state.best_valid,
                "best_step": self.state.best_step,
                "memory_layers": len(memory),
            },
        }
        state = ckpt.TrainerState(self.state.step, info, tensors)
        return ckpt.save_checkpoint(
            self.out_dir / "checkpoint", self.model, self.config, self.vocab, state
        )

    # ------------------------------------------------------------------ records

    def _gather_memory(self) -> list[Tensor]:
        """Every rank's memory rows per layer, concatenated in global row order."""
        parts = self.state.memory or []
        if not parts or any(p is None for p in parts):
            return []
        layers = [torch.cat([p[i] for p in parts]) for i in range(len(parts[0]))]
        return [self.world.all_gather_rows(m) for m in layers]

    def _split_memory(self, memory: list[Tensor]) -> list[list[Tensor] | None] | None:
        """This rank's micro-batch memories from global rows (any saving process count)."""
        if not memory:
            return None
        mine = [m[self.world.rows(m.shape[0])].to(self.device) for m in memory]
        return [
            [m[k * self.micro_rows : (k + 1) * self.micro_rows] for m in mine]
            for k in range(self.config.train.accumulate)
        ]

    def _record(self, split: str, loss: float, **extra: Any) -> None:
        if not self.world.is_main:
            return
        record: dict[str, Any] = {
            "step": self.state.step,
            "split": split,
            "loss": loss,
            "bpc": loss / math.log(2),
            "ppl": math.exp(min(loss, 700.0)),
            "time": self.state.elapsed,
            **extra,
        }
        with open(self.out_dir / METRICS_FILE, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        if self.writer is not None:
            self.writer.add_scalar(f"{split}/loss", loss, self.state.step)
            self.writer.add_scalar(f"{split}/bpc", record["bpc"], self.state.step)
        if split == "valid":
            self.log(
                f"step {self.state.step}: valid loss {loss:.4f} "
                f"({record['bpc']:.4f} bits/token, ppl {record['ppl']:.2f})"
            )

    def _truncate_metrics(self, step: int) -> None:
        path = self.out_dir / METRICS_FILE
        if not path.is_file():
            return
        kept = [
            line
            for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and _record_step(line) <= step
        ]
        path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")

    def _write_csv(self) -> None:
        records = read_metrics(self.out_dir)
        if not records:
            return
        keys = sorted({k for r in records for k in r}, key=lambda k: (k != "step", k != "split", k))
        with open(self.out_dir / "metrics.csv", "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=keys)
            writer.writeheader()
            writer.writerows(records)

    # ------------------------------------------------------------------ helpers

    def _check_compatible(self, saved: Config, saved_vocab: Vocabulary) -> None:
        if saved_vocab != self.vocab:
            raise CheckpointError(
                f"the checkpoint in {self.out_dir} was trained with another vocabulary "
                f"({len(saved_vocab)} vs {len(self.vocab)} symbols); resume with the same corpus"
                " or use a new --out folder"
            )
        mine, theirs = self.config.model.__dict__, saved.model.__dict__
        differing = [k for k in mine if mine[k] != theirs.get(k)]
        if differing:
            raise CheckpointError(
                f"cannot resume {self.out_dir}: the model config differs in "
                f"{', '.join('model.' + k for k in differing)}; use the same config or a new --out"
            )

    def _progress_bar(self):
        if not self.progress:
            return None
        from tqdm.auto import tqdm

        return tqdm(
            total=self.config.train.max_steps,
            initial=self.state.step,
            desc=self.config.name,
            unit="step",
            dynamic_ncols=True,
        )

    def _tensorboard(self):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            return None
        return SummaryWriter(str(self.out_dir / "tensorboard"))


def _host(rows: Tensor, pin: bool) -> Tensor:
    """Training rows in page-locked memory when asked, so copies overlap with compute."""
    return rows.contiguous().pin_memory() if pin else rows


def _record_step(line: str) -> int:
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return 1 << 62


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of ``metrics.jsonl``; a truncated last line is skipped."""
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def train(config: Config, out_dir: str | Path, resume: bool = False, **kwargs: Any) -> dict:
    """Train ``config`` into ``out_dir`` (resuming from its checkpoint if asked)."""
    trainer = Trainer(config, out_dir, **kwargs)
    if resume:
        trainer.resume()
    elif (Path(out_dir) / "checkpoint").exists():
        raise CheckpointError(
            f"{out_dir} already holds a checkpoint; pass --resume to continue it or choose a new"
            " --out folder (nothing was overwritten)"
        )
    return trainer.fit()
