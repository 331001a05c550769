"""The one training loop: any task, schedules, clipping, precision, evaluation, checkpoints.

The :class:`Trainer` asks its :class:`~highway_transformer.tasks.Task` for batches, the loss
of a batch (the task calls the model's ``forward`` only: targets in, loss out) and the metrics
of a split; everything else is here: optimiser and schedule, gradient clipping, fp16 loss
scaling / bf16 autocast, periodic evaluation with best-weights tracking, divergence stop,
metrics writers and atomic, exactly resumable checkpoints. The run-folder layout is
:mod:`~highway_transformer.storage.runfolder`'s.
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..config import Config, save_config
from ..data.levels import bits_label
from ..errors import CheckpointError, ConfigError, TrainingDiverged
from ..models.resources import check_model_size
from ..runtime.compiling import CompiledModule, check_compile
from ..runtime.device import autocast_context
from ..runtime.hardware import run_metadata
from ..runtime.machine import stretches_rate
from ..runtime.strategies import strategy
from ..runtime.world import (
    check_divisible,
    close_world,
    is_main_process,
    restart_attempt,
    seed_rank,
    setup_world,
)
from ..storage import runfolder
from ..storage.folder import (
    CONFIG_FILE,
    MODEL_FILE,
    resolve,
    trusting_unverified,
    unchecked_note,
)
from ..tasks import Task, task_class
from ..tasks.floor import learning_check, learning_hint, plateau_warning
from ..tasks.progress import EvalBar
from ..validation import checkpoint_config, validate
from . import announce
from . import checkpoint as ckpt
from .accumulation import accumulate_gradients
from .background import CheckpointWriter, host_copy, host_tensors
from .divergence import check_finite_loss, diverged, kept_message
from .optim import LRSchedule, build_optimizer, set_lr
from .runlock import own_run_folder
from .stopping import StopRequests, interrupted, signal_name
from .writers import (
    CsvWriter,
    JsonlWriter,
    MetricsWriter,
    Progress,
    Record,
    TensorBoardWriter,
    WandbWriter,
    check_sinks,
)


def global_rows(config: Config) -> int:
    """Rows (sequences) one optimizer step trains on: data.batch_size x train.accumulate."""
    return config.data.batch_size * config.train.accumulate


def gate_bias_norm(model: nn.Module) -> float | None:
    """Mean L2 norm of the learned gate biases (b1) of every gated sublayer, or None."""
    norms = [
        float(bias.detach().float().norm())
        for module in model.modules()
        if callable(getattr(module, "gate_bias", None)) and (bias := module.gate_bias()) is not None
    ]
    return sum(norms) / len(norms) if norms else None


@dataclass
class _Window:
    """Training figures accumulated since the last log step (checkpointed: a run stopped
    between two log steps logs the same mean when resumed)."""

    loss: float = 0.0
    steps: int = 0
    items: int = 0
    seconds: float = 0.0


@dataclass
class RunState:
    step: int = 0
    elapsed: float = 0.0  # training wall time, seconds, across resumes
    items: int = 0  # loss items (tokens, steps, examples) trained on
    best_valid: float = math.inf
    best_step: int = 0
    # One entry per uninterrupted stretch of training: the steps it trained, its wall time
    # and where it ran (a run resumed on another machine or thread count is not bit-exact).
    stretches: list[dict[str, Any]] = field(default_factory=list)
    window: _Window = field(default_factory=_Window)

    def open_stretch(self, machine: dict[str, Any]) -> None:
        # The wall-clock start (UTC): "registered before the runs" rests on it, not on commits.
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.stretches.append(
            {"from_step": self.step, "to_step": self.step, "seconds": 0.0,
             "started_at": started, **machine}
        )  # fmt: skip

    def close_stretch(self) -> None:
        """Bring the current stretch up to the current step and wall time."""
        if self.stretches:
            current = self.stretches[-1]
            before = sum(x["seconds"] or 0.0 for x in self.stretches[:-1])
            current.update(to_step=self.step, seconds=self.elapsed - before)


def unrecorded_stretch(step: int, elapsed: float) -> dict[str, Any]:
    """The training of a checkpoint written before stretches were recorded."""
    return {"from_step": 0, "to_step": step, "seconds": elapsed, "recorded": False}


class Trainer:
    """Trains one configuration of any task into one run folder."""

    def __init__(
        self,
        config: Config,
        out_dir: str | Path,
        task: Task | None = None,
        progress: bool = True,
        log: Callable[[str], None] | None = None,
        writers: Sequence[MetricsWriter] = (),
        trust_unverified: bool = False,
    ) -> None:
        """``task``: a task already built from ``config`` (default: ``config.task.name``'s);
        ``writers``: metrics sinks beside the run folder's own (JSONL, CSV, TensorBoard,
        W&B); ``trust_unverified``: a resume may read checkpoints without ``manifest.json``
        (unchecked). The config is validated here, once."""
        config = validate(config)
        self.out_dir = Path(out_dir)
        self.trust_unverified = trust_unverified
        t = config.train
        check_sinks(t.tensorboard, t.wandb_project)
        self.world = setup_world(t)  # seeds first: loading data draws no random numbers
        self.device = self.world.device
        self.progress = progress and self.world.is_main
        self.log = log if log is not None and self.world.is_main else (lambda message: None)
        check_divisible(config.data.batch_size, self.world.size)
        if config.data.eval_batch_size < self.world.size:  # a rank without evaluation rows
            raise ConfigError(
                f"data.eval_batch_size={config.data.eval_batch_size} gives some of the "
                f"{self.world.size} processes no evaluation rows; use at least {self.world.size}"
            )
        self.requested = config  # what a plan probed: before the task completes it
        self.task = task if task is not None else task_class(config.task.name)(config, self.device)
        # the task's copy of the config, completed from its data (the LM's vocabulary size)
        self.config = config = self.task.config
        t = config.train  # a task may complete it (the rl task's train.max_steps)
        self.task.shard(self.world)
        self.strategy = strategy(t.strategy)
        # before the model is allocated: it is built whole on each device (sharded strategies
        # then keep a share of its gradients and optimizer state on each)
        whole = not (self.strategy.sharded and self.world.size > 1)
        check_model_size(config, self.device, self.task.build_model, training=whole)
        self.model = self.task.build_model(config).to(self.device)
        seed_rank(self.world, t.seed)
        self.wrapped = self.strategy.wrap(self.model, self.world)  # DDP or FSDP: several ranks
        # train.compile=auto: compiled on CUDA only (runtime/compiling.py)
        self.compiled = check_compile(t, self.device)
        self.forward: nn.Module = (
            CompiledModule(self.wrapped, t.compile_mode) if self.compiled else self.wrapped
        )
        self.optimizer = build_optimizer(self.model.parameters(), t)
        self.schedule = LRSchedule(t)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=t.precision == "fp16")
        self.state = RunState()
        self.extra_writers = list(writers)
        self.writers: list[MetricsWriter] = []
        self.pending: list[Record] = []  # records for the writers once they are open
        self.checkpoints = CheckpointWriter()  # train.async_checkpoint's writes

    # ------------------------------------------------------------------ public

    def resume(self, announce: bool = True) -> bool:
        """Continue from ``out_dir/checkpoint`` if it exists; return whether it did."""
        try:
            folder = resolve(self.out_dir / runfolder.CHECKPOINT_DIR)
        except CheckpointError:
            return False
        self._note_unchecked(folder)
        with trusting_unverified(self.trust_unverified):
            self._check_compatible(checkpoint_config(folder), folder)
            self.strategy.load_weights(self.model, folder, self._build)
            saved = ckpt.load_trainer_state(folder)
        ckpt.restore_optimizer(
            self.optimizer,
            saved.info["optimizer"],
            saved.tensors,
            load=lambda state: self.strategy.load_optimizer_state(
                self.model, self.optimizer, state
            ),
        )
        self.schedule.load_state_dict(saved.info["schedule"])
        self.scaler.load_state_dict(saved.info["scaler"])
        ckpt.restore_rng(saved.info["rng"], saved.tensors)
        seed_rank(self.world, self.config.train.seed, saved.step)
        self.task.load_state_dict(ckpt.task_state(saved))
        note = self.task.resume_note()
        if note:
            self.log(note)
        run = saved.info["run"]
        self.state = RunState(
            step=saved.step,
            elapsed=run["elapsed"],
            items=run["items"],
            best_valid=run["best_valid"],
            best_step=run["best_step"],
            stretches=run.get("stretches") or [unrecorded_stretch(saved.step, run["elapsed"])],
            window=_Window(**run.get("window", {})),  # empty in checkpoints of log steps
        )
        if self.world.is_main:
            runfolder.truncate_metrics(self.out_dir, saved.step)
        if announce:
            self.log(f"resumed from {folder} at step {saved.step}")
        return True

    def _note_unchecked(self, folder: Path) -> None:
        """Say so where ``--trust-unverified`` lets a folder without a manifest be read."""
        note = unchecked_note(folder) if self.trust_unverified else None
        if note:
            self.log(note)

    def restarted(self, restart: int, limit: int) -> None:
        """Continue a run torchrun started again after one of its ranks failed
        (``--max-restarts``): from the last checkpoint, or from step 0 when none was written.
        One line in the log, one ``restart`` record in ``metrics.jsonl``."""
        resumed = self.resume(announce=False)
        if not resumed and self.world.is_main:
            runfolder.truncate_metrics(self.out_dir, 0)  # the failed attempt's records
        step = self.state.step
        how = (
            f"resumed from the checkpoint at step {step}"
            if resumed
            else "no checkpoint yet: started again from step 0"
        )
        self.log(f"restart {restart} of {limit} after a rank failed: {how}")
        self.pending.append(
            {"step": step, "split": "restart", "restart": restart, "max_restarts": limit}
        )

    def fit(self, after_step: Callable[[int], None] | None = None) -> dict[str, Any]:
        """Train to ``train.max_steps``, evaluating and checkpointing on the way;
        ``after_step(step)`` runs after each optimiser step (a profiler's step marker, say)."""
        t = self.config.train
        if self.world.is_main:  # rank 0 alone writes
            self.out_dir.mkdir(parents=True, exist_ok=True)
            save_config(self.config, self.out_dir / runfolder.CONFIG_FILE)
            self.writers = self._open_writers()
            for record in self.pending:
                for writer in self.writers:
                    writer.write(record)
        self.pending = []
        self.state.open_stretch(self._machine())
        bar = Progress(t.max_steps, self.state.step, self._title(), self.progress, self.log)
        log, self.log = self.log, bar.logger(self.log)
        # said first, bar or not: a piped log otherwise shows nothing for hours
        rate = self._known_rate()
        name, step = self.config.name, self.state.step
        self.log(announce.start_line(name, step, t.max_steps, rate, t.log_interval))
        unmeasured = (step, self.state.elapsed) if rate is None else None
        batches = self.task.local_batches()
        self.model.train()
        try:
            with StopRequests() as stops:
                while self.state.step < t.max_steps:
                    record, stop = self._step(batches, self.state.window, lambda: stops.requested)
                    bar.update(record)
                    if record is not None and unmeasured is not None:
                        self._log_first_rate(*unmeasured)
                        unmeasured = None
                    step = self.state.step
                    if after_step is not None:
                        after_step(step)
                    evaluated = step % t.eval_interval == 0 or step == t.max_steps
                    if evaluated:
                        self._periodic_evaluation()
                    interval = t.checkpoint_interval
                    saved = step == t.max_steps or (step % interval == 0 if interval else evaluated)
                    if saved:
                        self.save()
                    if stop:
                        self._stop(stops.reported, saved)
        except BaseException:
            with contextlib.suppress(Exception):  # the first error is the one to tell
                self.checkpoints.wait()
            raise
        finally:
            bar.close()
            self.log = log
        self.checkpoints.wait()
        return self.finish()

    def evaluate(self, split: str, quick: bool = False) -> dict[str, float]:
        """The task's metrics of ``split`` for the current weights (training mode kept), with
        a progress bar of the scoring when ``progress`` is on."""
        was_training = self.model.training
        self.model.eval()
        precision = self.config.train.precision
        try:
            with (
                EvalBar(f"scoring {split}", self.task.eval_unit, self.progress, False) as bar,
                self.task.reporting(bar.report),
                torch.no_grad(),
                autocast_context(self.device, precision),
            ):
                return self.task.evaluate(self.model, split, quick=quick)
        finally:
            self.model.train(was_training)

    def finish(self) -> dict[str, Any]:
        """Score the last weights on the whole valid and test splits (``final``: what a
        registered comparison reads), and the ``train.final_weights`` ones (``valid`` /
        ``test``: the best by default, evaluated again only when they are not the last);
        write ``results.json``."""
        s = self.state
        s.close_stretch()
        final = {"step": s.step, "valid": self.evaluate("valid"), "test": self.evaluate("test")}
        scored = {"valid": final["valid"], "test": final["test"]}
        best = self.out_dir / runfolder.BEST_DIR
        best_differs = s.best_step != s.step
        if (
            self.config.train.final_weights == "best"
            and best_differs
            and (best / MODEL_FILE).is_file()
        ):
            self._note_unchecked(best)
            with trusting_unverified(self.trust_unverified):
                self.strategy.load_weights(self.model, best, self._build)
            scored = {"valid": self.evaluate("valid"), "test": self.evaluate("test")}
        whole = self.strategy.full_model(self.model, self.world, self._build)  # every rank
        results = {
            "name": self.config.name,
            "task": self.task.name,
            "headline": self.task.headline,
            "level": self.task.level,  # what a token is: how the metrics are named
            "steps": s.step,
            "best_step": s.best_step,
            "started_at": next((x["started_at"] for x in s.stretches if "started_at" in x), None),
            "train_seconds": s.elapsed,
            "train_tokens": s.items,
            "tokens_per_second": s.items / max(s.elapsed, 1e-9),
            "parameters": sum(p.numel() for p in self.model.parameters() if p.requires_grad),
            **scored,
            "final": final,
            "metadata": self._machine(),
            "stretches": s.stretches,
            "processes": self.world.size,
            # the scored weights' b1, so reports need no weights (run folders stay small)
            "gate_biases": {} if whole is None else runfolder.gate_bias_values(whole),
        }
        if not self.world.is_main:
            return results
        results["learned"] = self._learning_check(float(scored["valid"]["loss"]))
        runfolder.write_results(self.out_dir, results)
        self.close_writers()
        return results

    def close_writers(self) -> None:
        """Close the metrics sinks (``finish`` does; a caller that stops ``fit`` early too)."""
        for writer in self.writers:
            writer.close()
        self.writers = []

    def _learning_check(self, valid_loss: float) -> dict[str, Any] | None:
        """The scored validation loss against the task's trivial baselines (:mod:`floor`);
        a run that did not learn beyond them says so at once."""
        check = learning_check(valid_loss, self.task.trivial_losses("valid"))
        level = self.task.level
        unit = (1 / math.log(2), bits_label(level)) if level else (1.0, "nats")
        hint = learning_hint(runfolder.flatten(self.config.to_dict()))
        warning = plateau_warning(check, str(self.out_dir), *unit, hint=hint)
        if warning:
            self.log(warning)
        return check

    def _stop(self, number: int, saved: bool) -> None:
        """End training here, after a checkpoint: stop signal ``number`` reached a process."""
        folder = self.out_dir / runfolder.CHECKPOINT_DIR if saved else self.save()
        self.checkpoints.wait()  # the line below says it is written
        # a log record; the outcome's one line is the error's ("stopped by SIGTERM: ...")
        self.log(f"step {self.state.step}: {signal_name(number)} received, checkpoint written")
        raise interrupted(
            number,
            f"checkpoint at step {self.state.step} of {self.config.train.max_steps} in {folder}",
            "continue with --resume",
        )

    def save(self) -> Path:
        """Write the resumable checkpoint (atomically): rank 0 writes, every rank joins the
        task's gather (memory rows) and waits until the folder is complete. With
        ``train.keep_checkpoints`` K > 1 the checkpoint replaced moves to ``checkpoints/``,
        which keeps the K - 1 newest."""
        folder = self.out_dir / runfolder.CHECKPOINT_DIR
        task_state = self.task.state_dict()
        # gathered whole under FSDP, so one process can load the checkpoint
        whole = self.strategy.full_model(self.model, self.world, self._build)
        optimizer = self.strategy.optimizer_state(self.model, self.optimizer)
        if whole is not None:  # rank 0
            self._write_checkpoint(folder, whole, optimizer, task_state)
        self.world.barrier()
        return folder

    def _build(self) -> nn.Module:
        """A fresh single-process copy of the model (to gather into or load through)."""
        return self.task.build_model(self.config)

    def _write_checkpoint(
        self, folder: Path, model: nn.Module, optimizer: dict, task_state: dict[str, Any]
    ) -> None:
        optim_info, optim_tensors = ckpt.flatten_optimizer(optimizer)
        rng_info, rng_tensors = ckpt.capture_rng()
        task_info, task_tensors = ckpt.split_task_state(task_state)
        s = self.state
        s.close_stretch()
        info = {
            "task": task_info,
            "optimizer": optim_info,
            "schedule": self.schedule.state_dict(),
            "scaler": self.scaler.state_dict(),
            "rng": rng_info,
            "run": {
                "elapsed": s.elapsed,
                "items": s.items,
                "best_valid": s.best_valid,
                "best_step": s.best_step,
                "stretches": s.stretches,
                "window": asdict(s.window),
            },
        }
        tensors = {**optim_tensors, **rng_tensors, **task_tensors}
        background = self.config.train.async_checkpoint
        if background:  # what later steps change, copied now
            model, info, tensors = host_copy(model), copy.deepcopy(info), host_tensors(tensors)
        state = ckpt.TrainerState(s.step, info, tensors)
        keep = self.config.train.keep_checkpoints

        def write() -> None:
            ckpt.save_checkpoint(
                folder,
                model,
                self.config,
                trainer=state,
                write_files=self.task.write_checkpoint_files,
                retire=runfolder.archiver(self.out_dir) if keep > 1 else None,
            )
            runfolder.keep_archived(self.out_dir, keep - 1)

        if background:
            self.checkpoints.submit(write)
        else:
            write()

    # ------------------------------------------------------------------ steps

    def _step(
        self, batches: Any, window: _Window, stop_asked: Callable[[], bool]
    ) -> tuple[Record | None, bool]:
        """One optimiser step; the log record when this step ends a log window, and whether
        any process was asked to stop (every rank then stops after this step)."""
        t = self.config.train
        logs = (self.state.step + 1) % t.log_interval == 0 or self.state.step + 1 == t.max_steps
        started = time.perf_counter()
        micro = [next(batches) for _ in range(self.config.train.accumulate)]
        value, count, grad_norm, stop = self._train_step(micro, logs, stop_asked)
        spent = time.perf_counter() - started
        s = self.state
        s.step, s.elapsed, s.items = s.step + 1, s.elapsed + spent, s.items + count
        window.loss, window.steps = window.loss + value, window.steps + 1
        window.items, window.seconds = window.items + count, window.seconds + spent
        if not logs:
            return None, stop
        extra: dict[str, Any] = {
            "lr": self.schedule.lr(s.step - 1),
            "rate": window.items / max(window.seconds, 1e-9),
            "grad_norm": grad_norm,
        }
        extra.update(self.task.train_metrics())
        bias_norm = gate_bias_norm(self.model)
        if bias_norm is not None:
            extra["gate_bias_norm"] = bias_norm
        record = self._record("train", {"loss": window.loss / window.steps}, **extra)
        window.loss, window.steps, window.items, window.seconds = 0.0, 0, 0, 0.0
        return record, stop

    def _train_step(
        self, batches: list[Any], measure: bool, stop_asked: Callable[[], bool] = lambda: False
    ) -> tuple[float, int, float | None, bool]:
        """Forward and backward each micro-batch, clip, step; (global mean loss, items, gradient
        norm if measured, whether any process was asked to stop)."""
        t = self.config.train
        set_lr(self.optimizer, self.schedule.lr(self.state.step))

        def micro_batch(batch: Any) -> tuple[torch.Tensor, int]:
            with autocast_context(self.device, t.precision):
                return self.task.loss(self.forward, batch)

        value, count, stop = accumulate_gradients(
            self.forward,
            self.world,
            [lambda b=b: micro_batch(b) for b in batches],
            backward=lambda loss: self.scaler.scale(loss).backward(),
            check=self._check_finite,
            sync_off=lambda: self.strategy.gradient_sync_off(self.wrapped),
            stop_asked=stop_asked,
        )
        norm = None
        if t.clip > 0 or measure:
            self.scaler.unscale_(self.optimizer)  # clip the true gradient, not the scaled one
            limit = t.clip if t.clip > 0 else math.inf
            norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), limit)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        return value, count, float(norm) if measure and norm is not None else None, stop

    def _check_finite(self, value: float) -> None:
        if not math.isfinite(value):
            raise TrainingDiverged(self._divergence_message(value))

    def _divergence_message(self, value: float) -> str:
        folder = self.out_dir / runfolder.CHECKPOINT_DIR
        if (folder / CONFIG_FILE).is_file():
            left = f"the last good checkpoint in {folder} is intact"
        else:
            left = kept_message(folder)
        return diverged(f"the training loss became {value}", self.state.step + 1, left)

    def _periodic_evaluation(self) -> None:
        metrics = self.evaluate("valid", quick=True)
        loss = float(metrics["loss"])
        annealed = self.schedule.observe_validation(loss)
        self._record("valid", metrics, lr=self.schedule.lr(self.state.step))
        if annealed:
            self.log(f"validation stalled: learning rate annealed at step {self.state.step}")
        left = kept_message(self.out_dir / runfolder.CHECKPOINT_DIR)
        check_finite_loss(loss, self.state.step, left)  # a diverged run never replaces one
        if loss < self.state.best_valid:  # the same on every rank
            self.state.best_valid, self.state.best_step = loss, self.state.step
            self._save_best()

    def _save_best(self) -> None:
        whole = self.strategy.full_model(self.model, self.world, self._build)
        if whole is not None:  # rank 0
            ckpt.save_checkpoint(
                self.out_dir / runfolder.BEST_DIR,
                whole,
                self.config,
                write_files=self.task.write_checkpoint_files,
            )
        self.world.barrier()  # no rank reads best/ before it is complete

    # ------------------------------------------------------------------ records

    def _record(self, split: str, metrics: dict[str, float], **extra: Any) -> Record:
        record: Record = {
            "step": self.state.step,
            "split": split,
            **metrics,
            **self.task.loss_metrics(float(metrics["loss"])),
            "time": self.state.elapsed,
            **extra,
        }
        for writer in self.writers:
            writer.write(record)
        if split == "valid":
            shown = ", ".join(
                f"{self.task.metric_label(k)} {v:.4f}"
                for k, v in metrics.items()
                if k not in ("loss", "loss_se") and isinstance(v, float)
            )
            se = metrics.get("loss_se")
            self.log(
                f"step {self.state.step}: valid loss {metrics['loss']:.4f}"
                + (f" ± {se:.4f}" if se is not None else "")
                + (f" ({shown})" if shown else "")
            )
        return record

    def _open_writers(self) -> list[MetricsWriter]:
        writers: list[MetricsWriter] = [
            JsonlWriter(self.out_dir),
            CsvWriter(self.out_dir, runfolder.read_metrics(self.out_dir)),
        ]
        if self.config.train.tensorboard:
            writers.append(TensorBoardWriter(self.out_dir))
        project = self.config.train.wandb_project
        if project:
            config = self.config.to_dict()
            writers.append(WandbWriter(self.out_dir, project, self.config.name, config))
        return writers + self.extra_writers

    def _machine(self) -> dict[str, Any]:
        """Where this process trains, and whether its step is compiled (both decide speed)."""
        return run_metadata(self.device, self.config.train.precision, self.compiled)

    def _known_rate(self) -> float | None:
        """Seconds per step of this run on this kind of machine: its own earlier stretches
        here (a resumed run), else a probe's of this config (:mod:`.rates`)."""
        if not self.world.is_main:
            return None  # only the main process logs
        from .rates import cached_rate

        here = self._machine()
        return stretches_rate(self.state.stretches, here) or cached_rate(self.requested, here)

    def _log_first_rate(self, from_step: int, from_elapsed: float) -> None:
        """The rate measured since ``from_step`` and the training time left at it."""
        measured = self.state.step - from_step
        rate = (self.state.elapsed - from_elapsed) / max(measured, 1)
        left = self.config.train.max_steps - self.state.step
        self.log(announce.rate_line(self.config.name, rate, measured, left))

    def _title(self) -> str:
        return f"{self.config.name} ({self.task.name})"

    # ------------------------------------------------------------------ helpers

    def _check_compatible(self, saved: Config, folder: Path) -> None:
        if saved.task.name != self.config.task.name:
            raise CheckpointError(
                f"{self.out_dir} holds a {saved.task.name} run, this config trains "
                f"task.name={self.config.task.name}; use a new --out folder (nothing was "
                "overwritten)"
            )
        self.task.check_checkpoint(folder)
        if global_rows(saved) != global_rows(self.config):
            raise CheckpointError(
                f"cannot resume {self.out_dir}: it was trained with a global batch of "
                f"{global_rows(saved)} rows per step (data.batch_size x train.accumulate), this "
                f"run asks for {global_rows(self.config)}; keep the product (any process count "
                "dividing data.batch_size resumes it) or use a new --out"
            )
        # The task's settings decide its data (e.g. task.length), so they must match as well.
        for part in ("model", "task"):
            mine, theirs = getattr(self.config, part).__dict__, getattr(saved, part).__dict__
            differing = [k for k in mine if mine[k] != theirs.get(k)]
            if differing:
                raise CheckpointError(
                    f"cannot resume {self.out_dir}: the {part} config differs in "
                    f"{', '.join(f'{part}.{k}={theirs.get(k)}' for k in differing)} (saved); "
                    "use the same config or a new --out"
                )


def train(
    config: Config,
    out_dir: str | Path,
    resume: bool = False,
    overwrite: bool = False,
    **kwargs: Any,
) -> dict:
    """Train ``config`` (its ``task.name``) into ``out_dir``, owning the folder (see
    :mod:`.runlock`; the main process holds the lock): resume its checkpoint if asked; a fresh
    run replaces earlier records only with ``overwrite``. A process torchrun started again
    after a rank failed continues from the last checkpoint whatever was asked (the first
    attempt's ``overwrite`` must not delete its own run). The :class:`Trainer` validates
    ``config``."""
    attempt = restart_attempt()
    if attempt is not None:
        resume = overwrite = False
    owner = own_run_folder(out_dir, resume, overwrite, kwargs.get("log"), restart=bool(attempt))
    with owner if is_main_process() else contextlib.nullcontext():
        trainer = Trainer(config, out_dir, **kwargs)
        if attempt is not None:
            trainer.restarted(*attempt)
        elif resume:
            trainer.resume()
        results = trainer.fit()
    close_world(trainer.world)  # after success only: a failed rank's peers are being stopped
    return results
