"""How several processes hold the model: replicated (DDP) or sharded (FSDP), one registry.

The training step calls the wrapped model's ``forward`` only (a task passes its targets and
gets its loss back), so the wrappers are PyTorch's own, unchanged.

``train.strategy=ddp`` (default): every rank holds the whole model and optimizer,
gradients are all-reduced. ``train.strategy=fsdp``: parameters, gradients and optimizer
state are sharded across ranks with ``fully_shard`` (each block, then the whole model), for
models that do not fit one device. Checkpoints are the same either way: the full weights and
optimizer state are gathered to rank 0 and written as one single-process checkpoint
(safetensors), which any strategy and process count loads.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from ..errors import unknown_choice
from ..storage.weights import load_weights
from .world import World

#: Builds a fresh single-process copy of the model (from the config alone).
Build = Callable[[], nn.Module]


class Replicated:
    """One whole model per rank (DistributedDataParallel when several ranks run)."""

    name: ClassVar[str] = "ddp"
    #: Whether a rank keeps only its share of the gradients and optimizer state.
    sharded: ClassVar[bool] = False

    def wrap(self, model: nn.Module, world: World) -> nn.Module:
        """The module the training step calls."""
        if not world.distributed:
            return model
        ids = [world.device.index] if world.device.type == "cuda" else None
        # buffers (positions, masks) never change in training: synced once, not every forward
        # (the keyword was renamed in torch 2.13)
        parameters = inspect.signature(DistributedDataParallel.__init__).parameters
        renamed = "forward_sync_buffers" in parameters
        keyword = "forward_sync_buffers" if renamed else "broadcast_buffers"
        return DistributedDataParallel(model, device_ids=ids, **{keyword: False})

    def gradient_sync_off(self, wrapped: nn.Module) -> AbstractContextManager[None]:
        """Backward passes that accumulate gradients locally (no all-reduce): the first
        ``train.accumulate - 1`` micro-batches of a step; ``wrapped`` is what :meth:`wrap`
        returned."""
        no_sync = getattr(wrapped, "no_sync", None)  # DDP; a single process has nothing to skip
        return no_sync() if no_sync is not None else nullcontext()

    def full_model(self, model: nn.Module, world: World, build: Build) -> nn.Module | None:
        """The whole model on rank 0 (None elsewhere); every rank must call it."""
        return model if world.is_main else None

    def load_weights(self, model: nn.Module, folder: Path, build: Build) -> None:
        load_weights(model, folder)

    def optimizer_state(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict:
        """The optimizer's full state in ``optimizer.state_dict()`` form (rank 0)."""
        return optimizer.state_dict()

    def load_optimizer_state(
        self, model: nn.Module, optimizer: torch.optim.Optimizer, state: dict
    ) -> None:
        optimizer.load_state_dict(state)


class Sharded(Replicated):
    """Parameters, gradients and optimizer state sharded across ranks (FSDP2 ``fully_shard``)."""

    name: ClassVar[str] = "fsdp"
    sharded: ClassVar[bool] = True

    def wrap(self, model: nn.Module, world: World) -> nn.Module:
        from torch.distributed.fsdp import fully_shard

        for block in getattr(model, "blocks", ()):  # one all-gather per block, not per model
            fully_shard(block)
        return fully_shard(model)

    @contextmanager
    def gradient_sync_off(self, wrapped: nn.Module) -> Iterator[None]:
        # unsharded gradients accumulate; the last micro-batch's backward reduce-scatters them
        wrapped.set_requires_gradient_sync(False)  # type: ignore[operator]
        try:
            yield
        finally:
            wrapped.set_requires_gradient_sync(True)  # type: ignore[operator]

    def full_model(self, model: nn.Module, world: World, build: Build) -> nn.Module | None:
        from torch.distributed.checkpoint.state_dict import get_model_state_dict

        state = get_model_state_dict(model, options=_full())
        if not world.is_main:
            return None
        whole = build()
        whole.load_state_dict(state)
        return whole

    def load_weights(self, model: nn.Module, folder: Path, build: Build) -> None:
        from torch.distributed.checkpoint.state_dict import set_model_state_dict

        whole = build()
        load_weights(whole, folder)
        set_model_state_dict(model, whole.state_dict(), options=_full(offload=False))

    def optimizer_state(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict:
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

        state = get_optimizer_state_dict(model, optimizer, options=_full())
        index = {name: i for i, name in enumerate(_names(model))}
        return _renamed(state, index)

    def load_optimizer_state(
        self, model: nn.Module, optimizer: torch.optim.Optimizer, state: dict
    ) -> None:
        from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

        names = dict(enumerate(_names(model)))
        set_optimizer_state_dict(
            model, optimizer, _renamed(state, names), options=_full(offload=False)
        )


def _full(offload: bool = True) -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, cpu_offload=offload)


def _names(model: nn.Module) -> list[str]:
    """Parameter names in the optimizer's order (build_optimizer takes model.parameters())."""
    return [name for name, p in model.named_parameters() if p.requires_grad]


def _renamed(state: dict, key: dict) -> dict:
    """An optimizer state dict with its parameter keys mapped through ``key``."""
    if not state:
        return state
    groups = [{**g, "params": [key[p] for p in g["params"]]} for g in state["param_groups"]]
    return {"state": {key[k]: v for k, v in state["state"].items()}, "param_groups": groups}


STRATEGIES: dict[str, type[Replicated]] = {cls.name: cls for cls in (Replicated, Sharded)}


def strategy(name: str) -> Replicated:
    if name not in STRATEGIES:
        raise unknown_choice("train.strategy", name, STRATEGIES)
    return STRATEGIES[name]()
