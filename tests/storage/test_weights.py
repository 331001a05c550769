"""Weights files: views into one flat buffer (cuDNN's RNN weights on a GPU) and tied weights."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_model
from torch import nn

from highway_transformer.errors import CheckpointError
from highway_transformer.storage.weights import (
    load_weights_checked,
    load_weights_file,
    save_weights,
    tied_names,
)


class PackedAndTied(nn.Module):
    """Two parameters that are views of one buffer, as cuDNN packs a GRU's weights, and an
    output layer tied to the embedding."""

    def __init__(self) -> None:
        super().__init__()
        flat = torch.randn(10)
        self.first = nn.Parameter(flat[:4].view(2, 2))
        self.second = nn.Parameter(flat[4:])
        self.embedding = nn.Embedding(5, 3)
        self.output = nn.Linear(3, 5, bias=False)
        self.output.weight = self.embedding.weight


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_packed_views_save_and_load_back(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model, other = PackedAndTied(), PackedAndTied()
    assert model.first.untyped_storage().data_ptr() == model.second.untyped_storage().data_ptr()
    save_weights(model, tmp_path / "w.safetensors")
    missing, unexpected = load_weights_file(other, tmp_path / "w.safetensors")
    assert (missing, unexpected) == ([], [])
    for name, tensor in _state(model).items():
        assert torch.equal(other.state_dict()[name], tensor), name
    # the loaded model keeps its own layout: still packed, still tied
    assert other.first.untyped_storage().data_ptr() == other.second.untyped_storage().data_ptr()
    assert other.output.weight is other.embedding.weight


def test_tied_weights_written_once_under_the_name_save_model_keeps(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Embedding(5, 3), nn.Linear(3, 5, bias=False))
    model[1].weight = model[0].weight
    assert tied_names(model.state_dict()) == [["0.weight", "1.weight"]]
    save_weights(model, tmp_path / "ours.safetensors")
    save_model(model, str(tmp_path / "theirs.safetensors"))
    ours = load_file(tmp_path / "ours.safetensors")
    theirs = load_file(tmp_path / "theirs.safetensors")
    assert ours.keys() == theirs.keys() == {"0.weight"}
    assert torch.equal(ours["0.weight"], theirs["0.weight"])


def test_missing_and_unexpected_names_are_reported(tmp_path: Path) -> None:
    save_weights(nn.Linear(2, 2), tmp_path / "w.safetensors")
    missing, unexpected = load_weights_file(nn.Linear(2, 2, bias=False), tmp_path / "w.safetensors")
    assert (missing, unexpected) == ([], ["bias"])
    save_weights(nn.Linear(2, 2, bias=False), tmp_path / "w.safetensors")
    missing, unexpected = load_weights_file(nn.Linear(2, 2), tmp_path / "w.safetensors")
    assert (missing, unexpected) == (["bias"], [])


def test_checked_loading_accepts_only_an_exact_fit(tmp_path: Path) -> None:
    """One loader serves checkpoints and from_pretrained: each way a file can be wrong is one
    CheckpointError line, and a fitting file loads."""
    model = nn.Linear(3, 2)
    save_weights(model, tmp_path / "fits.safetensors")
    load_weights_checked(nn.Linear(3, 2), tmp_path / "fits.safetensors")
    (tmp_path / "garbage.safetensors").write_bytes(b"not a safetensors file")
    cases = {
        "garbage.safetensors": "cannot read weights",
        "fits.safetensors": "do not fit the model: ",  # loaded into another shape
    }
    for name, message in cases.items():
        with pytest.raises(CheckpointError, match=message) as caught:
            load_weights_checked(nn.Linear(4, 2), tmp_path / name)
        assert "\n" not in str(caught.value)
    other_names = r"missing \['0.bias', '0.weight'\], unexpected \['bias'"
    with pytest.raises(CheckpointError, match=other_names):
        load_weights_checked(nn.ModuleDict({"0": model}), tmp_path / "fits.safetensors")
