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
from .optim import LRSchedule, apply_gradients, build_optimizer, check_finite, set_lr

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


@dataclass
class RunState:
    step: int = 0
    elapsed: float = 0.0  # training wall time, seconds, across resumes
    tokens: int = 0
    best_valid: float = math.inf
    best_step: int = 0
    memory: list[Tensor] | None = None
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
        self.log = log or (lambda message: None)
        t = config.train
        self.device = setup_runtime(t)  # seeds first: corpus loading draws no random numbers
        self.corpus = corpus if corpus is not None else load_corpus(config.data, download=True)
        if not config.model.vocab_size:
            config.model.vocab_size = len(self.corpus.vocab)
        elif config.model.vocab_size != len(self.corpus.vocab):
            raise ConfigError(
                f"model.vocab_size={config.model.vocab_size} but the corpus has "
                f"{len(self.corpus.vocab)} symbols; leave vocab_size at 0 to take it from the data"
            )
        self.model: LanguageModel = build_model(config.model).to(self.device)
        self.forward = torch.compile(self.model) if t.compile else self.model
        self.optimizer = build_optimizer(self.model.parameters(), t)
        self.schedule = LRSchedule(t)
        self.inputs, self.targets = train_rows(
            self.corpus.train, config.data.batch_size, config.data.seq_len
        )
        self.bounds = window_bounds(self.inputs.shape[1], config.data.seq_len, config.data.context)
        self.state = RunState()
        self.writer = self._tensorboard()

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
        ckpt.load_weights(self.model, folder)
        trainer = ckpt.load_trainer_state(folder)
        ckpt.restore_optimizer(self.optimizer, trainer.info["optimizer"], trainer.tensors)
        self.schedule.load_state_dict(trainer.info["schedule"])
        ckpt.restore_rng(trainer.info["rng"], trainer.tensors)
        run = trainer.info["run"]
        memory = [trainer.tensors[f"memory.{i}"] for i in range(run["memory_layers"])]
        self.state = RunState(
            step=trainer.step,
            elapsed=run["elapsed"],
            tokens=run["tokens"],
            best_valid=run["best_valid"],
            best_step=run["best_step"],
            memory=[m.to(self.device) for m in memory] or None,
        )
        self._truncate_metrics(trainer.step)
        self.log(f"resumed from {folder} at step {trainer.step}")
        return True

    def fit(self) -> dict[str, Any]:
        """Train to ``train.max_steps``, evaluating and checkpointing on the way."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        save_config(self.config, self.out_dir / "config.yaml")
        t = self.config.train
        bar = self._progress_bar()
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
        valid = evaluate(self.model, self.corpus.valid, data, self.device, t.precision)
        test = evaluate(self.model, self.corpus.test, data, self.device, t.precision)
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
        (self.out_dir / RESULTS_FILE).write_text(json.dumps(results, indent=2), encoding="utf-8")
        self._write_csv()
        if self.writer is not None:
            self.writer.close()
        return results

    # ------------------------------------------------------------------ steps

    def _train_step(self) -> tuple[float, int]:
        t = self.config.train
        index = self.state.step % len(self.bounds)
        if index == 0:
            self.state.memory = None  # a new pass over the stream starts without memory
        start, end, loss_start = self.bounds[index]
        # ids may be a memory-mapped uint16/uint32 corpus: only this window becomes int64
        x = self.inputs[:, start:end].to(self.device, torch.long, non_blocking=True)
        y = self.targets[:, start + loss_start : end].to(self.device, torch.long, non_blocking=True)
        set_lr(self.optimizer, self.schedule.lr(self.state.step))
        with autocast_context(self.device, t.precision):
            hidden, memory = self.forward(x, memory=self.state.memory)
        nll = self.model.token_nll(hidden[:, loss_start:], y)
        count = y.numel()  # training rows are never padded: no device sync to count targets
        loss = nll.sum() / count
        value = float(loss.detach())
        check_finite(value, self.state.step + 1, self.out_dir / "checkpoint")
        apply_gradients(loss, self.model, self.optimizer, t.clip)
        self.state.memory = memory
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
        )
        annealed = self.schedule.observe_validation(result.loss)
        self._record(
            "valid", result.loss, lr=self.schedule.lr(self.state.step), tokens=result.tokens
        )
        if annealed:
            self.log(f"validation stalled: learning rate annealed at step {self.state.step}")
        if result.loss < self.state.best_valid:
            self.state.best_valid, self.state.best_step = result.loss, self.state.step
            ckpt.save_checkpoint(self.out_dir / "best", self.model, self.config, self.vocab)
        self.save()
        return result

    def save(self) -> Path:
        """Write the resumable checkpoint (atomically)."""
        optim_info, optim_tensors = ckpt.flatten_optimizer(self.optimizer)
        rng_info, rng_tensors = ckpt.capture_rng()
        memory = self.state.memory or []
        tensors = {**optim_tensors, **rng_tensors}
        tensors.update({f"memory.{i}": m.detach().cpu() for i, m in enumerate(memory)})
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

    def _record(self, split: str, loss: float, **extra: Any) -> None:
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
