"""A module's weights in one safetensors file, on any device.

``safetensors.torch.save_model`` / ``load_model`` refuse a tensor that is a view into a
larger storage, and cuDNN packs an RNN's weights into one flat buffer when the module moves to
a GPU: an R-Transformer (LocalRNN) on CUDA could neither save nor load its weights. Here each
such view is saved as a tensor of its own, and tied weights (one tensor under several names)
are written once under the first name in sorted order, as ``save_model`` writes them, so files
written by either load with either.
"""

from __future__ import annotations

from pathlib import Path

from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from ..errors import CheckpointError
from .folder import MODEL_FILE, resolve, verify


def _owns_storage(tensor: Tensor) -> bool:
    return tensor.storage_offset() == 0 and (
        tensor.untyped_storage().nbytes() == tensor.nelement() * tensor.element_size()
    )


def tied_names(state: dict[str, Tensor]) -> list[list[str]]:
    """Groups of names, sorted, whose tensors are one tensor (same memory, shape and dtype)."""
    groups: dict[tuple[int, tuple[int, ...], str], list[str]] = {}
    for name, tensor in state.items():
        key = (tensor.data_ptr(), tuple(tensor.shape), str(tensor.dtype))
        groups.setdefault(key, []).append(name)
    return [sorted(names) for names in groups.values() if len(names) > 1]


def save_weights(model: nn.Module, path: str | Path) -> None:
    """Write ``model``'s state to ``path``: each tensor once, each owning its storage."""
    state = model.state_dict()
    metadata: dict[str, str] = {}
    for kept, *dropped in tied_names(state):
        for name in dropped:
            metadata[name] = kept
            del state[name]
    owned = {
        name: (t if _owns_storage(t) else t.clone()).detach().contiguous()
        for name, t in state.items()
    }
    save_file(owned, str(path), metadata=metadata or None)


def load_weights_file(model: nn.Module, path: str | Path) -> tuple[list[str], list[str]]:
    """Copy the weights in ``path`` into ``model`` (any device); return the model's names the
    file did not fill and the file's names the model has not (a tied name counts as filled
    when the file holds one name of its group)."""
    state = load_file(str(path))
    missing, unexpected = model.load_state_dict(state, strict=False)
    filled = set(state)
    for names in tied_names(model.state_dict()):
        if filled.intersection(names):
            missing = [name for name in missing if name not in names]
    return list(missing), list(unexpected)


def load_weights_checked(model: nn.Module, path: Path) -> None:
    """``load_weights_file`` that accepts only a file filling the model exactly; anything else
    (unreadable, other shapes, other names) is a one-line ``CheckpointError``."""
    try:
        missing, unexpected = load_weights_file(model, path)
    except (OSError, SafetensorError) as exc:
        raise CheckpointError(f"cannot read weights {path}: {_one_line(exc)}") from None
    except RuntimeError as exc:
        raise CheckpointError(f"weights in {path} do not fit the model: {_one_line(exc)}") from None
    if missing or unexpected:
        raise CheckpointError(
            f"weights in {path} do not fit the model (missing {sorted(missing)[:3]}, "
            f"unexpected {sorted(unexpected)[:3]})"
        )


def load_weights(model: nn.Module, folder: str | Path) -> None:
    """The weights of a checkpoint or pretrained folder into ``model``, verified against the
    folder's manifest and required to fill the model exactly."""
    load_weights_checked(model, verify(resolve(folder), MODEL_FILE))


def _one_line(exc: Exception) -> str:
    """torch's message on one line, shortened."""
    return " ".join(str(exc).split())[:200]
