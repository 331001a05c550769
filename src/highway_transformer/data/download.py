"""Downloads pinned by SHA-256 and cached in a per-user directory.

Every download is pinned: :func:`fetch` takes the file's SHA-256 and refuses to fetch without
one; :func:`fetch_archive` takes, for a tar archive whose own SHA-256 is not published, the
SHA-256 of every member the caller reads. Nothing unchecked is ever moved into the cache.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tarfile
import tempfile
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from ..errors import DataError

CACHE_ENV = "HIGHWAY_TRANSFORMER_CACHE"


def cache_dir() -> Path:
    """The per-user cache: ``$HIGHWAY_TRANSFORMER_CACHE``, else the platform's cache folder
    (``platformdirs``: ``$XDG_CACHE_HOME`` or ~/.cache on Linux, ~/Library/Caches on macOS,
    the local AppData on Windows) / highway-transformer."""
    if os.environ.get(CACHE_ENV):
        root = Path(os.environ[CACHE_ENV])
    else:
        import platformdirs  # here, not at the top: the GPU image has none until it is carried

        root = Path(platformdirs.user_cache_dir("highway-transformer", appauthor=False))
    root.mkdir(parents=True, exist_ok=True)
    return root


def sha256_of(path: Path, chunk: int = 1 << 20) -> str:
    with open(path, "rb") as handle:
        return _stream_sha256(handle, chunk)


def _stream_sha256(handle: IO[bytes], chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    while block := handle.read(chunk):
        digest.update(block)
    return digest.hexdigest()


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _check_pinned(url: str, digests: object) -> None:
    """Refuse a download without a SHA-256 (64 lowercase hex digits) for each digest."""
    values = list(digests.values()) if isinstance(digests, Mapping) else [digests]
    if not values or not all(isinstance(d, str) and _SHA256.fullmatch(d) for d in values):
        got = repr(digests)[:60]
        raise DataError(
            f"refusing to download {url}: it is not pinned by a SHA-256 (got {got}), so the "
            "file could not be checked; pin its SHA-256 (64 hex digits)"
        )


def _tar_members_match(path: Path, members: Mapping[str, str]) -> bool:
    """Whether the tar archive at ``path`` holds every member with its SHA-256."""
    try:
        with tarfile.open(path) as tar:
            for name, digest in members.items():
                handle = tar.extractfile(name)
                if handle is None or _stream_sha256(handle) != digest:
                    return False
    except (tarfile.TarError, KeyError, OSError, EOFError):
        return False
    return True


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


def fetch(url: str, sha256: str, dest: Path) -> Path:
    """Download ``url`` to ``dest`` unless a file with the right checksum is already there.

    The file is written to a temporary name in the same folder and moved into place only
    after its SHA-256 matches, so an interrupted or corrupted download never looks cached. A
    download without a SHA-256 is refused (:class:`DataError`) before anything is fetched.
    """
    _check_pinned(url, sha256)
    return _download(url, dest, lambda path: sha256_of(path) == sha256, f"sha256 {sha256}")


def fetch_archive(url: str, members: Mapping[str, str], dest: Path) -> Path:
    """Download the tar archive ``url`` to ``dest``, pinned by the SHA-256 of each member the
    caller reads (``members``: name in the archive -> SHA-256), where the archive's own
    SHA-256 is not published; it is moved into place only when every member matches."""
    _check_pinned(url, members)

    def matches(path: Path) -> bool:
        return _tar_members_match(path, members)

    return _download(url, dest, matches, f"the SHA-256 of its {len(members)} pinned members")


def _download(url: str, dest: Path, matches: Callable[[Path], bool], expected: str) -> Path:
    dest = Path(dest)
    if dest.exists() and matches(dest):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=dest.name + ".", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
            shutil.copyfileobj(response, out)
        if not matches(tmp):
            raise DataError(
                f"checksum mismatch for {url}: expected {expected}; the download was discarded"
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
