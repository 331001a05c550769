"""Token-id cache: tokenised corpora stored as memory-mapped ``uint16``/``uint32`` arrays.

A user corpus is read, tokenised and encoded once; later loads map the stored ids from disk
(no Python objects, no ``int64`` copy), so a 100M-token corpus opens in about the time it
takes to hash its source and the stored ids, and pages in only what the batches touch. An
entry is keyed by the SHA-256 of the source bytes and of everything else that decides the ids
(level, vocabulary), and is written under a temporary name then renamed into place, so an
interrupted build never leaves a half-written entry. The SHA-256 of each of its files is
recorded when it is written (``manifest.json``, as in a checkpoint) and checked on every load:
an entry changed since (a zeroed or truncated array, an edited vocabulary) is rebuilt, with one
warning line, never trained on::

    <cache>/tokens/<key>/vocab.json (+ tokenizer.json)  train.npy  valid.npy  test.npy
                         manifest.json
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..errors import CheckpointError, DataError
from ..storage.folder import MANIFEST_FILE, VOCAB_FILE, changed_files, write_manifest
from .download import CACHE_ENV, cache_dir
from .vocab import Vocabulary

FORMAT = 2  # bump when the layout or the encoding of any level changes (2: manifest.json)
SPLITS = ("train", "valid", "test")


def id_dtype(vocab_size: int) -> np.dtype:
    """The narrowest unsigned type holding every id: ``uint16`` up to 65,536 symbols."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


def cache_key(source_digests: Sequence[str], spec: Mapping[str, Any]) -> str:
    """SHA-256 of the sources' digests and the settings that decide the ids."""
    payload = {"format": FORMAT, "sources": list(source_digests), **spec}
    text = json.dumps(payload, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def vocab_digest(vocab: Vocabulary | None) -> str | None:
    """A given vocabulary (e.g. a checkpoint's) is part of the key: other ids otherwise."""
    if vocab is None:
        return None
    text = json.dumps(vocab.to_dict(), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def entry_dir(key: str) -> Path:
    return cache_dir() / "tokens" / key


def store(folder: Path, splits: Mapping[str, Tensor], vocab: Vocabulary) -> None:
    """Write the entry under a temporary name and rename it into place (atomic)."""
    tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    dtype = id_dtype(len(vocab))
    try:
        for name in SPLITS:
            np.save(tmp / f"{name}.npy", splits[name].numpy().astype(dtype))
        vocab.save(tmp / VOCAB_FILE)
        write_manifest(tmp)
        os.replace(tmp, folder)
    except OSError as exc:
        if not (folder / VOCAB_FILE).is_file():  # not a concurrent writer winning the rename
            raise DataError(
                f"cannot write the token cache {folder} ({exc.strerror}); free some space, "
                f"set {CACHE_ENV} to a writable folder or pass data.cache=false"
            ) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class DamagedEntry(Exception):
    """A cache entry that cannot be used as it is (its message says why); it is rebuilt."""


def load(folder: Path) -> tuple[dict[str, Tensor], Vocabulary] | None:
    """The entry's splits (memory-mapped, copy-on-write) and vocabulary, after every file is
    checked against the SHA-256 recorded when it was written; None when there is no entry.

    Raises :class:`DamagedEntry` for an entry that differs from its record or cannot be read.
    """
    if not folder.exists():
        return None
    changed = changed_files(folder)
    if changed == [MANIFEST_FILE]:
        raise DamagedEntry(f"has no readable {MANIFEST_FILE} (the SHA-256 of its files)")
    if changed:
        raise DamagedEntry(
            f"does not match the SHA-256 recorded when it was written ({', '.join(changed)})"
        )
    try:
        arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="c") for name in SPLITS}
        vocab = Vocabulary.load(folder / VOCAB_FILE)
    except (OSError, ValueError, CheckpointError) as exc:
        raise DamagedEntry(f"cannot be read ({type(exc).__name__})") from None
    if any(a.ndim != 1 or a.dtype != id_dtype(len(vocab)) for a in arrays.values()):
        raise DamagedEntry("holds arrays of another shape or type")
    return {name: torch.from_numpy(a) for name, a in arrays.items()}, vocab


def cached_splits(
    key: str, build: Callable[[], tuple[dict[str, Tensor], Vocabulary]]
) -> tuple[dict[str, Tensor], Vocabulary]:
    """The cached entry for ``key``, built (``build()``) and stored on a miss.

    Either way the splits come back memory-mapped, so a first and a later run see the same
    ``uint16``/``uint32`` tensors. A damaged entry is said on one line of stderr, removed and
    built again.
    """
    folder = entry_dir(key)
    try:
        hit = load(folder)
    except DamagedEntry as exc:
        print(f"warning: the token cache {folder} {exc}; rebuilding it", file=sys.stderr)
        shutil.rmtree(folder, ignore_errors=True)
        hit = None
    if hit is not None:
        return hit
    splits, vocab = build()
    store(folder, splits, vocab)
    try:
        hit = load(folder)
    except DamagedEntry:  # pragma: no cover - only if the disk changes under us
        hit = None
    return hit if hit is not None else (splits, vocab)
