"""Polyphonic music data: loading .mat files, batching and the per-step Bernoulli NLL."""

from __future__ import annotations

import hashlib
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from highway_transformer.data import music
from highway_transformer.data.music import (
    MUSIC_DATASETS,
    bernoulli_nll,
    load_music,
    music_batches,
)
from highway_transformer.errors import ConfigError, DataError

scipy_io = pytest.importorskip("scipy.io")

MUSIC_DIR = Path(__file__).resolve().parents[3] / "shared" / "data" / "music"


def _cells(pieces: list[np.ndarray]) -> np.ndarray:
    """A MATLAB-style 1 x N cell array of pieces."""
    cells = np.empty((1, len(pieces)), dtype=object)
    for i, piece in enumerate(pieces):
        cells[0, i] = piece
    return cells


def _roll(steps: list[list[int]]) -> np.ndarray:
    """A T x 88 uint8 roll from per-step lists of key indices (0..87)."""
    roll = np.zeros((len(steps), 88), dtype=np.uint8)
    for t, keys in enumerate(steps):
        roll[t, keys] = 1
    return roll


def _write_mat(path: Path, **splits: np.ndarray) -> Path:
    scipy_io.savemat(str(path), splits)
    return path


def test_bernoulli_nll_matches_hand_computation() -> None:
    targets = torch.zeros(1, 3, 88)
    targets[0, 0, [0, 5]] = 1
    targets[0, 1, 10] = 1
    logits = torch.zeros(1, 3, 88)
    logits[0, 0, 0] = 2.0  # a correct, confident note
    logits[0, 1, 10] = -1.0  # a sounding note given low probability
    mask = torch.tensor([[True, True, False]])  # step 2 is padding

    def bce(z: float, y: float) -> float:
        p = 1 / (1 + math.exp(-z))
        return -(y * math.log(p) + (1 - y) * math.log(1 - p))

    step0 = bce(2.0, 1) + bce(0.0, 1) + 86 * bce(0.0, 0)
    step1 = bce(-1.0, 1) + 87 * bce(0.0, 0)
    expected = (step0 + step1) / 2
    got = bernoulli_nll(logits, targets, mask)
    assert got.item() == pytest.approx(expected, rel=1e-6)
    # all-zero logits: every note costs ln 2
    assert bernoulli_nll(torch.zeros(2, 4, 88), torch.ones(2, 4, 88)).item() == pytest.approx(
        88 * math.log(2), rel=1e-6
    )


def test_bernoulli_nll_per_piece_weights_pieces_equally() -> None:
    logits = torch.zeros(2, 3, 88)
    logits[1] = 3.0
    targets = torch.zeros(2, 3, 88)
    mask = torch.tensor([[True, False, False], [True, True, True]])
    per_step = torch.nn.functional.softplus(torch.tensor([0.0, 3.0])) * 88
    pooled = bernoulli_nll(logits, targets, mask)
    assert pooled.item() == pytest.approx(((per_step[0] + 3 * per_step[1]) / 4).item(), 1e-6)
    pieces = bernoulli_nll(logits, targets, mask, per_piece=True)
    assert pieces.item() == pytest.approx(per_step.mean().item(), rel=1e-6)
    with pytest.raises(DataError):
        bernoulli_nll(logits, targets, torch.zeros(2, 3, dtype=torch.bool))
    with pytest.raises(DataError):
        bernoulli_nll(logits[:, :2], targets, mask)


def test_music_batches_shift_and_mask() -> None:
    a = torch.from_numpy(_roll([[0], [1, 2], [3]])).float()
    b = torch.from_numpy(_roll([[4], [5]])).float()
    ((inputs, targets, mask),) = list(music_batches([a, b], batch_size=2))
    assert inputs.shape == targets.shape == (2, 3, 88)
    assert mask.tolist() == [[True, True, True], [True, True, False]]
    assert torch.equal(targets[0], a)
    assert torch.equal(targets[1, :2], b) and targets[1, 2].sum() == 0
    assert inputs[:, 0].sum() == 0  # zero vector at t = 0
    assert torch.equal(inputs[0, 1:], a[:-1])
    assert torch.equal(inputs[1, 1], b[0]) and inputs[1, 2].sum() == 0
    ((_, _, mask2),) = list(music_batches([a, b], batch_size=2, predict_first=False))
    assert mask2.tolist() == [[False, True, True], [False, True, False]]


def test_music_batches_shuffle_is_seeded_and_covers_all() -> None:
    pieces = [torch.full((i + 1, 88), float(i % 2)) for i in range(7)]

    def lengths(seed: int) -> list[int]:
        gen = torch.Generator().manual_seed(seed)
        out = []
        for _, _, mask in music_batches(pieces, 3, shuffle=True, generator=gen):
            out += mask.sum(1).tolist()
        return out

    assert lengths(3) == lengths(3)
    assert sorted(lengths(3)) == list(range(1, 8))
    with pytest.raises(ConfigError):
        next(music_batches(pieces, 0))


def test_load_music_converts_rolls_and_note_numbers(tmp_path: Path) -> None:
    roll = _roll([[0, 87], [39]])
    path = _write_mat(
        tmp_path / "rolls.mat",
        traindata=_cells([roll, _roll([[1], [2], [3]])]),
        validdata=_cells([roll]),
        testdata=_cells([roll]),
    )
    splits = load_music(str(path))
    assert splits.sizes() == (2, 1, 1)
    assert splits.train[0].dtype == torch.float32
    assert torch.equal(splits.train[0], torch.from_numpy(roll).float())
    assert splits.train[1].shape == (3, 88)
    # The other encoding: each step a list of MIDI note numbers (21..108).
    steps = np.empty((1, 3), dtype=object)
    steps[0, 0] = np.array([[21.0, 108.0]])
    steps[0, 1] = np.zeros((0, 0))
    steps[0, 2] = np.array([[60.0]])
    notes = np.empty((1, 1), dtype=object)
    notes[0, 0] = steps
    path = _write_mat(tmp_path / "notes.mat", traindata=notes, validdata=notes, testdata=notes)
    piece = load_music(str(path)).train[0]
    assert piece.shape == (3, 88)
    assert piece[0].nonzero().ravel().tolist() == [0, 87]
    assert piece[1].sum() == 0
    assert piece[2].nonzero().ravel().tolist() == [60 - 21]


def test_load_music_errors(tmp_path: Path) -> None:
    good = _cells([_roll([[0]])])
    path = _write_mat(tmp_path / "nokeys.mat", traindata=good, testdata=good)
    with pytest.raises(DataError, match="validdata") as info:
        load_music(str(path))
    assert "\n" not in str(info.value)
    wide = _cells([np.zeros((4, 12), dtype=np.uint8)])
    path = _write_mat(tmp_path / "wide.mat", traindata=wide, validdata=good, testdata=good)
    with pytest.raises(DataError, match="width 12; expected 88"):
        load_music(str(path))
    with pytest.raises(DataError, match="download"):
        load_music("nottingham", data_dir=str(tmp_path / "empty"))
    with pytest.raises(ConfigError, match="nottingham"):
        load_music("nottinghm")
    (tmp_path / "junk.mat").write_bytes(b"not a mat file at all")
    with pytest.raises(DataError):
        load_music(str(tmp_path / "junk.mat"))


@pytest.mark.parametrize("download", [False, True])
def test_a_data_path_that_is_a_file_asks_for_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, download: bool
) -> None:
    monkeypatch.setattr(music, "fetch", _never_fetch)
    given = tmp_path / "Piano_midi.mat"
    given.write_bytes(b"whatever the user has")
    with pytest.raises(DataError) as info:
        load_music("piano-midi", data_dir=str(given), download=download)
    message = str(info.value)
    assert "must be a folder holding Piano_midi.mat" in message and "\n" not in message
    assert f"task.dataset={given}" in message  # the way to read that very file
    assert given.read_bytes() == b"whatever the user has"


def _never_fetch(*args: object) -> Path:
    raise AssertionError("a file given as data.path must be refused before any download")


def test_load_music_download_checks_sha(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    roll = _cells([_roll([[0], [1]])])
    source = _write_mat(tmp_path / "src.mat", traindata=roll, validdata=roll, testdata=roll)
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    entry = replace(MUSIC_DATASETS["jsb"], url=source.as_uri(), sha256=digest)
    monkeypatch.setitem(music.MUSIC_DATASETS, "jsb", entry)
    splits = load_music("jsb", data_dir=str(tmp_path / "cache"), download=True)
    assert splits.sizes() == (1, 1, 1)
    assert (tmp_path / "cache" / entry.filename).is_file()
    bad = replace(entry, sha256="0" * 64)
    monkeypatch.setitem(music.MUSIC_DATASETS, "jsb", bad)
    with pytest.raises(DataError, match="checksum mismatch"):
        load_music("jsb", data_dir=str(tmp_path / "other"), download=True)
    assert not (tmp_path / "other" / entry.filename).exists()


@pytest.mark.parametrize(("name", "sizes"), [("nottingham", (694, 173, 170)), ("jsb", None)])
def test_real_music_files(name: str, sizes: tuple[int, int, int] | None) -> None:
    entry = MUSIC_DATASETS[name]
    path = MUSIC_DIR / entry.filename
    if not path.is_file():
        pytest.skip(f"reference music data not present at {path}")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == entry.sha256
    splits = load_music(name, data_dir=str(MUSIC_DIR))
    assert splits.sizes() == (sizes or entry.splits)
    for split in (splits.train, splits.valid, splits.test):
        for piece in split:
            assert piece.dim() == 2 and piece.shape[1] == 88
    first = splits.train[0]
    assert set(first.unique().tolist()) <= {0.0, 1.0}
