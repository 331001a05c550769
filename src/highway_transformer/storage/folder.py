"""The checkpoint folder format: its file names, atomic writes with a manifest, verified reads.

A checkpoint (``runs/NAME/checkpoint``, ``runs/NAME/best``) or pretrained folder::

    model.safetensors    weights (tied weights stored once)
    config.json          the full Config (checkpoint) or {"architecture", "model", "init"}
                         (``save_pretrained``)
    vocab.json           the vocabulary (language modelling)
    tokenizer.json       the subword tokenizer (bpe/unigram levels; SHA-256 in vocab.json)
    trainer.json         step, schedule, scaler, RNG, task position (resume only)
    trainer.safetensors  optimizer tensors, RNG states, task tensors (resume only)
    manifest.json        the SHA-256 of every other file, verified when a file is read

The manifest is required: a folder without one (deleted, or written by another tool or an
older version) is refused, since none of its files could be checked, unless the caller vouches
for it (``--trust-unverified``; ``trust_unverified=True`` in Python, which enters
:func:`trusting_unverified` for the load).

Nothing is pickled. A folder is written under a temporary name, its files and the folder are
fsync'ed, and only then is it swapped in, so an interrupted or failed save never replaces a
good checkpoint. A swap interrupted between its two renames leaves ``NAME.old``, which the next
save (or :func:`recover`) moves back into place; it is never deleted before a new checkpoint
stands. The folder a save replaces is deleted, or handed to the caller's ``retire`` (the run
folder's archive of older checkpoints keeps it by renaming it). Every file name of the format
is declared here, once.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from safetensors import SafetensorError

from ..config import Config, from_dict
from ..errors import CheckpointError, HighwayError
from ..files import first_line, read_text

MODEL_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
VOCAB_FILE = "vocab.json"
TOKENIZER_FILE = "tokenizer.json"
STATE_FILE = "trainer.json"
TENSOR_FILE = "trainer.safetensors"
MANIFEST_FILE = "manifest.json"
#: The names a run folder gives its checkpoint folders (the run folder's layout,
#: :mod:`.runfolder`, takes them from here: a damaged one's error names the other).
CHECKPOINT_DIR = "checkpoint"
BEST_DIR = "best"
#: True while a load the user vouched for (``--trust-unverified``) reads a folder without a
#: manifest; set only by :func:`trusting_unverified`, for the duration of one load.
_TRUST_UNVERIFIED: ContextVar[bool] = ContextVar("trust_unverified", default=False)


@contextmanager
def trusting_unverified(trust: bool = True) -> Iterator[None]:
    """Within the block, a folder without ``manifest.json`` is read unchecked when ``trust``
    (the entry points' ``trust_unverified=True``); a folder with one is always verified."""
    token = _TRUST_UNVERIFIED.set(bool(trust))
    try:
        yield
    finally:
        _TRUST_UNVERIFIED.reset(token)


def unchecked_note(folder: Path) -> str | None:
    """The line that says a folder the user vouched for (``--trust-unverified``) is read
    unchecked, where it has no manifest; None where its files are verified."""
    if (Path(folder) / MANIFEST_FILE).is_file():
        return None
    return f"note: {folder} has no {MANIFEST_FILE}: read unchecked (--trust-unverified)"


def write_atomically(
    folder: Path,
    write: Callable[[Path], None],
    retire: Callable[[Path], None] | None = None,
) -> None:
    """Call ``write(tmp_folder)``, add the manifest, fsync, then swap it into ``folder``.

    Any failure (a full disk included) leaves the previous checkpoint as it was. The folder
    replaced (``NAME.old``, complete) goes to ``retire`` once the new one stands, if given,
    else is deleted; so does a complete ``NAME.old`` that a save cut after its swap left.
    """
    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".tmp")
    old = folder.with_name(folder.name + ".old")
    recover(folder)
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        write(tmp)
        write_manifest(tmp)
        _fsync_tree(tmp)
    except (OSError, SafetensorError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        full = isinstance(exc, OSError) and exc.errno == errno.ENOSPC
        reason = "the disk is full" if full or "No space" in str(exc) else first_line(exc)
        kept = (
            "the previous checkpoint is intact"
            if (folder / CONFIG_FILE).is_file()
            else "no earlier checkpoint was there; nothing was written"
        )
        raise CheckpointError(
            f"cannot write checkpoint {folder}: {reason}; free space or choose another --out "
            f"({kept})"
        ) from None
    if folder.exists():
        _discard(old, retire)  # left by a save cut after its swap: the one before the last
        os.replace(folder, old)
    os.replace(tmp, folder)
    fsync_dir(folder.parent)
    _discard(old, retire)


def _discard(old: Path, retire: Callable[[Path], None] | None) -> None:
    """``retire(old)`` when ``old`` is a whole checkpoint folder, else delete what is there."""
    if not old.exists():
        return
    if retire is not None and complete(old):
        retire(old)
    else:
        shutil.rmtree(old, ignore_errors=True)


def complete(folder: Path) -> bool:
    """Whether ``folder`` holds its manifest and every file the manifest lists (a folder
    whose deletion was cut short lacks one of them); contents are not hashed here."""
    try:
        listed = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))["sha256"]
        return all((folder / name).is_file() for name in listed)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def recover(folder: str | Path) -> bool:
    """Move ``NAME.old`` back to ``NAME`` when a swap stopped between its renames."""
    folder = Path(folder)
    old = folder.with_name(folder.name + ".old")
    if folder.exists() or not (old / CONFIG_FILE).is_file():
        return False
    os.replace(old, folder)
    fsync_dir(folder.parent)
    return True


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(folder: Path, names: Iterable[str] | None = None) -> None:
    """Record the SHA-256 of every file of ``folder`` (or of ``names``) in its
    ``manifest.json``."""
    if names is None:
        names = (p.name for p in folder.iterdir() if p.is_file())
    files = sorted(name for name in names if name != MANIFEST_FILE)
    manifest = {"format": 1, "sha256": {name: _sha256(folder / name) for name in files}}
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1), encoding="utf-8")


def changed_files(folder: Path) -> list[str]:
    """The files of ``folder`` that differ from its manifest (missing, changed, or not
    listed); ``[manifest.json]`` when the manifest itself is missing or unreadable."""
    try:
        listed = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))["sha256"]
        if not isinstance(listed, dict):
            raise TypeError("sha256 is not a mapping")
    except (OSError, ValueError, KeyError, TypeError):
        return [MANIFEST_FILE]
    present = {p.name for p in folder.iterdir() if p.is_file() and p.name != MANIFEST_FILE}
    return sorted(
        name
        for name in present | set(listed)
        if name not in present or name not in listed or _sha256(folder / name) != listed[name]
    )


def _fsync_tree(folder: Path) -> None:
    for path in folder.iterdir():
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())
    fsync_dir(folder)


def fsync_dir(folder: Path) -> None:
    if not hasattr(os, "O_DIRECTORY"):  # Windows: directories cannot be opened for fsync
        return
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def verify(folder: str | Path, name: str) -> Path:
    """``folder/name`` after checking it against the manifest; an error names a changed file.

    A folder without ``manifest.json`` is refused, unless read within
    :func:`trusting_unverified` (then its files are read unchecked).
    """
    folder = Path(folder)
    path = folder / name
    if not path.is_file():
        raise CheckpointError(f"{path} is missing; the checkpoint is incomplete")
    manifest_path = folder / MANIFEST_FILE
    if not manifest_path.exists():
        if _TRUST_UNVERIFIED.get():
            return path
        raise CheckpointError(
            f"{folder} has no {MANIFEST_FILE}, so its files cannot be checked (deleted, or"
            " written by another tool or an older version); load it only if you trust it: "
            "--trust-unverified (eval, generate, train --resume, run, ab; trust_unverified=True "
            "in Python)"
        )
    text = read_text(manifest_path, CheckpointError, "checkpoint manifest")
    try:
        expected = json.loads(text)["sha256"][name]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise CheckpointError(
            f"{manifest_path} is malformed or does not list {name} ({first_line(exc)}); "
            "the checkpoint cannot be trusted"
        ) from None
    if _sha256(path) != expected:
        raise CheckpointError(
            f"{path} does not match its SHA-256 in {MANIFEST_FILE}: the file is corrupted or was "
            f"changed after saving; {_other_weights(folder)}"
        )
    return path


def _other_weights(folder: Path) -> str:
    """What to use instead of a damaged ``folder``: the run's other weights, never itself."""
    name = folder.name.removesuffix(".old")
    if name == BEST_DIR:
        return f"use the run's last weights instead (--weights last: {CHECKPOINT_DIR}/) or retrain"
    if name == CHECKPOINT_DIR:
        return f"use the run's {BEST_DIR}/ weights instead (they cannot be resumed) or retrain"
    return "use another copy of the checkpoint or retrain"


def resolve(folder: str | Path) -> Path:
    """The checkpoint folder, or its ``.old`` twin left by an interrupted swap."""
    folder = Path(folder)
    if (folder / CONFIG_FILE).is_file():
        return folder
    old = folder.with_name(folder.name + ".old")
    if (old / CONFIG_FILE).is_file():
        return old
    if folder.is_dir() and (folder / CHECKPOINT_DIR / CONFIG_FILE).is_file():
        return folder / CHECKPOINT_DIR
    raise CheckpointError(
        f"no checkpoint at {folder} (expected {CONFIG_FILE} and {MODEL_FILE}); give a checkpoint"
        " folder or a run folder that holds one"
    )


def read_json(path: Path, what: str) -> Any:
    """A JSON file of a checkpoint, parsed; a damaged one is a one-line CheckpointError."""
    text = read_text(path, CheckpointError, what)
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise CheckpointError(f"cannot parse {path}: {first_line(exc)}") from None


def read_config(folder: str | Path) -> Config:
    """The checkpoint's config as the schema reads it (types coerced, unknown keys refused),
    verified against the manifest; it is *not* validated here: the entry points that use it
    validate it (:func:`highway_transformer.validation.checkpoint_config`)."""
    path = verify(resolve(folder), CONFIG_FILE)
    data = read_json(path, "checkpoint config")
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} must hold a JSON object (the run's config)")
    try:
        return from_dict(Config, data)
    except HighwayError as exc:
        raise CheckpointError(f"{path} is not a valid config for this version: {exc}") from None
