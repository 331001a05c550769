"""Several processes, one run: the process group, per-rank seeds, sharding and reductions.

A run is distributed when ``torchrun`` (or ``highway train --nproc N``, which starts it)
sets ``WORLD_SIZE`` > 1. Then every process ("rank") holds a full model copy on its own
device, takes its share of the global batch ``data.batch_size``, and gradients are averaged
by :class:`~torch.nn.parallel.DistributedDataParallel`. Rank 0 alone writes files.
Single-process runs never touch ``torch.distributed``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from ..config import TrainConfig
from ..errors import ConfigError, PeerFailed
from .device import seed_everything, setup_runtime

#: Seed offset between ranks' dropout streams (a large prime keeps them apart).
RANK_SEED_STRIDE = 1_000_003


@dataclass(frozen=True)
class World:
    """This process's place in the run: rank, number of ranks and device."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    timeout: float = 600.0

    @property
    def is_main(self) -> bool:
        """Rank 0: the one process that writes metrics, checkpoints and reports."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1

    def rows(self, total: int, what: str = "data.batch_size") -> slice:
        """This rank's contiguous share of ``total`` rows (equal shares, checked)."""
        check_divisible(total, self.size, what)
        n = total // self.size
        return slice(self.rank * n, (self.rank + 1) * n)

    def uneven_rows(self, total: int) -> slice:
        """This rank's share of ``total`` rows where shares may differ by one (evaluation)."""
        return slice(self.rank * total // self.size, (self.rank + 1) * total // self.size)

    def all_reduce_sum(self, values: Sequence[float]) -> list[float]:
        """Element-wise sums over all ranks of a few numbers (in float64)."""
        if not self.distributed:
            return [float(v) for v in values]
        tensor = torch.tensor(list(values), dtype=torch.float64, device=self._comm_device)
        self._collective(dist.all_reduce, tensor)
        return tensor.tolist()

    def all_gather_rows(self, tensor: Tensor) -> Tensor:
        """Concatenate every rank's ``tensor`` along dim 0, in rank order (on the CPU)."""
        if not self.distributed:
            return tensor.detach().cpu()
        local = tensor.detach().to(self._comm_device).contiguous()
        parts = [torch.empty_like(local) for _ in range(self.size)]
        self._collective(dist.all_gather, parts, local)
        return torch.cat(parts).cpu()

    def barrier(self) -> None:
        if self.distributed:
            self._collective(dist.barrier)

    @property
    def _comm_device(self) -> torch.device:
        # gloo reduces CPU tensors, nccl CUDA tensors
        return self.device if dist.get_backend() == "nccl" else torch.device("cpu")

    def _collective(self, op: Any, *args: Any) -> None:
        with self.guard():
            op(*args)

    @contextmanager
    def guard(self) -> Iterator[None]:
        """Turn a failed collective (here or inside DDP's backward) into one clear line: another
        rank ended (its connections closed) or stayed silent for ``train.dist_timeout``."""
        try:
            yield
        except RuntimeError as exc:
            # NCCL raises DistError; gloo a plain RuntimeError from its own sources
            if not isinstance(exc, dist.DistError) and "gloo" not in str(exc):
                raise
            raise self.peer_failed(str(exc)) from None

    def peer_failed(self, error: str) -> PeerFailed:
        """The error of a collective that failed with ``error`` (the backend's message)."""
        first = error.strip().splitlines()[0][:160] if error.strip() else "no message"
        timed_out = "timed out" in error.lower() or "timeout" in error.lower()
        if timed_out:
            what = (
                f"no answer from another of the {self.size} ranks within "
                f"train.dist_timeout={self.timeout:g}s (it hangs or is far slower: {first})"
            )
        else:
            what = f"another of the {self.size} ranks ended or was killed ({first})"
        return PeerFailed(
            f"rank {self.rank}: {what}; the last checkpoint is intact, resume with --resume",
            timed_out=timed_out,
        )


def check_divisible(total: int, size: int, what: str = "data.batch_size") -> None:
    """Refuse a global batch that cannot be split into equal per-rank shares."""
    if size > total:
        raise ConfigError(
            f"{size} processes but {what}={total}: each process needs at least one row; "
            f"use at most {total} processes or a larger {what}"
        )
    if total % size:
        raise ConfigError(
            f"{what}={total} does not divide into {size} processes; use a batch that is a "
            f"multiple of {size} (each process takes batch/{size} rows)"
        )


def env_world_size() -> int:
    """The ``WORLD_SIZE`` torchrun set (1 when not launched by it)."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        raise ConfigError(f"WORLD_SIZE={os.environ['WORLD_SIZE']!r} is not a number") from None


def restart_attempt() -> tuple[int, int] | None:
    """``(restart, max_restarts)`` in a process torchrun started again after a rank of its run
    failed (``--max-restarts``); None in a first attempt or outside torchrun."""
    try:
        count = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
        limit = int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0"))
    except ValueError:
        return None
    return (count, limit) if count > 0 else None


def is_main_process() -> bool:
    """Whether this process is rank 0 (or alone): the one that prints and writes."""
    return os.environ.get("RANK", "0") == "0"


def backend_for(device: torch.device, requested: str) -> str:
    """gloo on CPU, NCCL on CUDA (``auto``); refuse NCCL without CUDA."""
    if requested == "nccl" and device.type != "cuda":
        raise ConfigError(
            "train.dist_backend=nccl needs CUDA devices, and this run is on "
            f"{device.type}; use train.dist_backend=auto (gloo on CPU)"
        )
    if requested == "auto":
        return "nccl" if device.type == "cuda" else "gloo"
    return requested


def init_world(train: TrainConfig, device: torch.device) -> World:
    """Join the process group torchrun prepared (or stay single); ``device`` is the base device.

    Under torchrun each process takes ``cuda:LOCAL_RANK`` on CUDA. Settings that only apply to
    several processes are refused in a single one rather than silently ignored.
    """
    size = env_world_size()
    if size <= 1:
        for key, value, default in (
            ("dist_backend", train.dist_backend, "auto"),
            ("strategy", train.strategy, "ddp"),
        ):
            if value != default:
                raise ConfigError(
                    f"train.{key}={value} applies to several processes only; launch with "
                    f"`highway train --nproc N` or torchrun, or leave it at {default}"
                )
        return World(device=device, timeout=train.dist_timeout)
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    backend = backend_for(device, train.dist_backend)
    if not dist.is_initialized():
        timeout = timedelta(seconds=train.dist_timeout)
        attempt = restart_attempt()
        if attempt is None:
            dist.init_process_group(backend, timeout=timeout)
        else:
            store = _attempt_store(attempt[0], timeout)
            dist.init_process_group(
                backend, store=store, rank=rank, world_size=size, timeout=timeout
            )
    return World(rank, size, local_rank, device, train.dist_timeout)


def _attempt_store(restart: int, timeout: timedelta) -> dist.Store:
    """torchrun's store for the processes it started again, under keys of this attempt alone.

    A restarted group meets in the store its failed attempt used, where that attempt's process
    group left its keys (each rank's address, under the same names): a new rank that reads
    one of those before its peer has replaced it waits for a process that is gone, until
    ``train.dist_timeout``. Prefixed by the restart count, every attempt's keys are its own.
    """
    store, _, _ = next(dist.rendezvous("env://", timeout=timeout))
    return dist.PrefixStore(f"highway/attempt-{restart}", store)


def seed_rank(world: World, seed: int, step: int = 0) -> None:
    """Give ranks > 0 their own deterministic stream (dropout) once the model is built.

    Rank 0 keeps the single-process stream, so one process reproduces the same run;
    ``step`` separates the streams of a resumed run.
    """
    if world.rank > 0:
        seed_everything(seed + RANK_SEED_STRIDE * world.rank + step)


def shard_batch(batch: Any, world: World) -> Any:
    """This rank's rows (dim 0) of every tensor in a task batch (tuple, list or dict)."""
    if not world.distributed:
        return batch
    if isinstance(batch, Tensor):
        return batch[world.rows(batch.shape[0], "rows per batch")]
    if isinstance(batch, dict):
        return {k: shard_batch(v, world) for k, v in batch.items()}
    if isinstance(batch, tuple | list):
        return type(batch)(shard_batch(v, world) for v in batch)
    raise ConfigError(f"cannot split a batch of type {type(batch).__name__} across processes")


def setup_world(train: TrainConfig) -> World:
    """:func:`~.device.setup_runtime`, then join the process group when torchrun started
    several processes."""
    world = init_world(train, setup_runtime(train))
    if train.pin_memory and world.device.type != "cuda":
        raise ConfigError(
            f"train.pin_memory speeds up copies to a CUDA device; this run is on "
            f"{world.device.type}: leave it off"
        )
    return world


def close_world(world: World) -> None:
    """Leave the process group together: a rank that tore its gloo connections down while
    a peer was still finishing (rank 0 writes the results last) made that peer's gloo thread
    abort it (SIGABRT, "terminate called without an active exception") now and then."""
    if world.distributed and dist.is_initialized():
        world.barrier()
        dist.destroy_process_group()
