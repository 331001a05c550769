"""Downloads checked against SHA-256 and cached in a per-user directory."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import DataError

CACHE_ENV = "HIGHWAY_TRANSFORMER_CACHE"


def cache_dir() -> Path:
    """The per-user cache: ``$HIGHWAY_TRANSFORMER_CACHE``, else ``$XDG_CACHE_HOME`` or ~/.cache."""
    if os.environ.get(CACHE_ENV):
        root = Path(os.environ[CACHE_ENV])
    else:
        root = (
            Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "highway-transformer"
        )
    root.mkdir(parents=True, exist_ok=True)
    return root


def sha256_of(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _matches(path: Path, sha256: str | None) -> bool:
    return sha256 is None or sha256_of(path) == sha256


@contextmanager
def staged_folder(folder: Path) -> Iterator[Path]:
    """A temporary folder whose files move into ``folder`` only if the body succeeds, so a
    failed or interrupted extraction leaves no partial corpus behind."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=folder.name + ".", suffix=".part"))
    try:
        yield tmp
        folder.mkdir(exist_ok=True)
        for path in tmp.iterdir():
            os.replace(path, folder / path.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def fetch(url: str, sha256: str | None, dest: Path) -> Path:
    """Download ``url`` to ``dest`` unless a file with the right checksum is already there.

    The file is written to a temporary name in the same folder and moved into place only
    after its SHA-256 matches, so an interrupted or corrupted download never looks cached
    (``sha256=None`` only where the caller checks the file itself, e.g. by size and content).
    """
    dest = Path(dest)
    if dest.exists() and _matches(dest, sha256):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=dest.name + ".", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
            shutil.copyfileobj(response, out)
        if not _matches(tmp, sha256):
            raise DataError(
                f"checksum mismatch for {url}: expected sha256 {sha256}; the download was discarded"
                f" (retry, or place a good copy at {dest})"
            )
        os.replace(tmp, dest)
    except DataError:
        raise
    except OSError as exc:
        raise DataError(
            f"could not download {url} ({exc}); check the network or place the file at {dest}"
        ) from exc
    finally:
        tmp.unlink(missing_ok=True)
    return dest
