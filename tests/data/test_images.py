"""Pixel-by-pixel image data: IDX reading/writing, MNIST loading and the digits stand-in."""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from highway_transformer.data import images
from highway_transformer.data.images import (
    MNIST,
    load_digits_default,
    load_mnist,
    pixel_permutation,
    read_idx,
    write_idx,
)
from highway_transformer.errors import DataError


@pytest.mark.parametrize("name", ["a.idx3-ubyte", "a.idx3-ubyte.gz"])
def test_idx_round_trip_uint8(tmp_path: Path, name: str) -> None:
    array = np.random.RandomState(0).randint(0, 256, size=(5, 4, 3)).astype(np.uint8)
    path = write_idx(tmp_path / name, array)
    raw = path.read_bytes()
    if name.endswith(".gz"):
        raw = gzip.decompress(raw)
    assert raw[:4] == bytes([0, 0, 0x08, 3])
    assert raw[4:16] == (5).to_bytes(4, "big") + (4).to_bytes(4, "big") + (3).to_bytes(4, "big")
    back = read_idx(path)
    assert back.dtype == np.uint8 and back.shape == (5, 4, 3)
    np.testing.assert_array_equal(back, array)


def test_idx_round_trip_other_types(tmp_path: Path) -> None:
    for array in (np.arange(6, dtype=np.int32).reshape(2, 3) - 3, np.linspace(0, 1, 4)):
        back = read_idx(write_idx(tmp_path / "x.idx", array))
        assert back.dtype == array.dtype
        np.testing.assert_array_equal(back, array)
    with pytest.raises(DataError, match="cannot store"):
        write_idx(tmp_path / "y.idx", np.zeros(3, dtype=np.int64))


def test_idx_bad_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.idx"
    bad.write_bytes(bytes([1, 0, 8, 1, 0, 0, 0, 1, 7]))
    with pytest.raises(DataError, match="magic number") as info:
        read_idx(bad)
    assert "\n" not in str(info.value)
    bad.write_bytes(bytes([0, 0, 0x42, 1, 0, 0, 0, 1, 7]))
    with pytest.raises(DataError, match="magic number"):
        read_idx(bad)
    full = write_idx(tmp_path / "full.idx", np.zeros((4, 5), dtype=np.uint8)).read_bytes()
    short = tmp_path / "short.idx"
    short.write_bytes(full[:-3])
    with pytest.raises(DataError, match="truncated"):
        read_idx(short)
    short.write_bytes(full[:6])
    with pytest.raises(DataError, match="truncated"):
        read_idx(short)
    short_gz = tmp_path / "short.idx.gz"
    short_gz.write_bytes(gzip.compress(full[:-1]))
    with pytest.raises(DataError, match="truncated"):
        read_idx(short_gz)
    cut_gz = tmp_path / "cut.idx.gz"
    cut_gz.write_bytes(gzip.compress(full)[:-6])
    with pytest.raises(DataError, match="gzip"):
        read_idx(cut_gz)


def _fake_mnist(root: Path, n_train: int = 12, n_test: int = 4) -> dict[str, Path]:
    rng = np.random.RandomState(1)
    out = {}
    for part, n in (("train", n_train), ("test", n_test)):
        prefix = "train" if part == "train" else "t10k"
        pixels = rng.randint(0, 256, size=(n, 28, 28)).astype(np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        out[f"{part}-images"] = write_idx(root / f"{prefix}-images-idx3-ubyte.gz", pixels)
        out[f"{part}-labels"] = write_idx(root / f"{prefix}-labels-idx1-ubyte.gz", labels)
    return out


def test_load_mnist_from_files_and_permutation(tmp_path: Path) -> None:
    paths = _fake_mnist(tmp_path)
    splits = load_mnist(tmp_path, valid_size=2)
    x, y = splits.train
    assert x.shape == (10, 784, 1) and x.dtype == torch.float32 and y.dtype == torch.int64
    assert splits.valid[0].shape == (2, 784, 1) and splits.test[0].shape == (4, 784, 1)
    raw = read_idx(paths["train-images"])
    assert torch.allclose(x[3, :, 0], torch.from_numpy(raw[3].reshape(-1) / 255.0).float())
    assert splits.valid[1].tolist() == [0, 1]  # the last training labels (10, 11 mod 10)
    permuted = load_mnist(tmp_path, valid_size=2, permute=True, seed=5)
    perm = permuted.permutation
    assert perm is not None and torch.equal(perm, pixel_permutation(784, 5))
    for plain, shuffled in ((splits.train, permuted.train), (splits.test, permuted.test)):
        assert torch.equal(shuffled[0], plain[0][:, perm])
        assert torch.equal(shuffled[1], plain[1])
    with pytest.raises(DataError, match="download"):
        load_mnist(tmp_path / "nothing")


def test_load_mnist_download_checks_sha(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = _fake_mnist(tmp_path / "server")
    for key, path in source.items():
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        entry = replace(MNIST[key], urls=(path.as_uri(),), sha256=digest)
        monkeypatch.setitem(images.MNIST, key, entry)
    splits = load_mnist(tmp_path / "cache", download=True, valid_size=0)
    assert splits.train[0].shape == (12, 784, 1) and len(splits.valid[1]) == 0
    wrong = replace(images.MNIST["test-labels"], sha256="f" * 64)
    monkeypatch.setitem(images.MNIST, "test-labels", wrong)
    with pytest.raises(DataError, match="checksum mismatch"):
        load_mnist(tmp_path / "cache2", download=True)


def test_digits_default_shapes_split_and_permutation() -> None:
    pytest.importorskip("sklearn")
    a = load_digits_default()
    b = load_digits_default()
    sizes = [len(split[1]) for split in (a.train, a.valid, a.test)]
    assert sizes == [1257, 270, 270]
    for x, y in (a.train, a.valid, a.test):
        assert x.shape[1:] == (64, 1) and x.dtype == torch.float32 and y.dtype == torch.int64
        assert float(x.min()) >= 0.0 and float(x.max()) <= 1.0
    assert torch.equal(a.train[0], b.train[0]) and torch.equal(a.test[1], b.test[1])
    assert set(a.train[1].tolist()) == set(range(10))
    other = load_digits_default(split_seed=1)
    assert not torch.equal(other.test[1], a.test[1])
    p = load_digits_default(permute=True, seed=3)
    assert p.permutation is not None and sorted(p.permutation.tolist()) == list(range(64))
    assert not torch.equal(p.permutation, torch.arange(64))
    for plain, shuffled in ((a.train, p.train), (a.valid, p.valid), (a.test, p.test)):
        assert torch.equal(shuffled[0], plain[0][:, p.permutation])
