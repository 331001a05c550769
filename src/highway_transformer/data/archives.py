"""Zipped single-file corpora (the Hutter-prize files): their pinned checks, and unzipping.

A download is pinned by the archive's SHA-256 (:func:`~.download.fetch` refuses one without);
the extracted file is checked by its size, its published SHA-1 (enwik8) or pinned SHA-256
(text8) and its alphabet before it is used, whether it was downloaded or given by path.
"""

from __future__ import annotations

import hashlib
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import DataError
from .download import cache_dir, fetch


@dataclass(frozen=True)
class Archive:
    """A zipped single-file corpus; ``sha256`` of the archive (required to download it).

    ``sha1_of_member``, ``sha256_of_member`` and ``alphabet`` check the extracted file,
    downloaded or given by path.
    """

    url: str
    member: str
    size: int
    sha256: str | None = None
    sha1_of_member: str | None = None
    alphabet: bytes | None = None  # every byte of the file is one of these
    sha256_of_member: str | None = None


# The Hutter-prize files are published with a size and (enwik8) a SHA-1 of the extracted
# file, not a SHA-256 of the archive. The SHA-256 of both archives and of the extracted text8
# are those pinned independently by several public loaders of the data sets; they were not
# computed here (this machine has no network access). text8 is also checked by its alphabet
# (a-z and space only, by construction).
ENWIK8 = Archive(
    "https://mattmahoney.net/dc/enwik8.zip",
    "enwik8",
    100_000_000,
    sha256="547994d9980ebed1288380d652999f38a14fe291a6247c157c3d33d4932534bc",
    sha1_of_member="57b8363b814821dc9d47aa4d41f58733519076b2",
)
TEXT8 = Archive(
    "https://mattmahoney.net/dc/text8.zip",
    "text8",
    100_000_000,
    sha256="a6640522afe85d1963ad56c05b0ede0a0c000dddc9671758a6cc09b7a38e5232",
    alphabet=b" abcdefghijklmnopqrstuvwxyz",
    sha256_of_member="6e890197040d37d85beb962ae1f041ff1d9a9ca8d20c7d99c85027eebf51dca7",
)
WIKITEXT103_URL = "https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-103-v1.zip"
#: SHA-256 of wikitext-103-v1.zip, as pinned independently by several public loaders of the
#: data set (it was not computed here: this machine has no network access).
WIKITEXT103_SHA256 = "242ba0f20b329cfdf1ccc61e9e9e5b59becf189db7f7a81cd2a0e2fc31539590"


def check_member(archive: Archive, data: bytes, where: str) -> None:
    """The extracted corpus file against its size, SHA-1 or SHA-256 and alphabet."""
    if len(data) != archive.size:
        raise DataError(
            f"{where} has {len(data)} bytes, expected {archive.size}; not used (re-download it)"
        )
    if archive.sha1_of_member and hashlib.sha1(data).hexdigest() != archive.sha1_of_member:
        raise DataError(f"{where} fails its published SHA-1 check; not used (re-download it)")
    if archive.sha256_of_member and hashlib.sha256(data).hexdigest() != archive.sha256_of_member:
        raise DataError(f"{where} fails its pinned SHA-256 check; not used (re-download it)")
    if archive.alphabet is not None and data.translate(None, archive.alphabet):
        raise DataError(
            f"{where} holds bytes outside {archive.member}'s alphabet; not used (re-download it)"
        )


def extract_archive(archive: Archive, folder: Path, zipped: Path | None = None) -> Path:
    """Extract a zipped corpus (downloaded and checked unless ``zipped`` is given); verify
    the extracted file before it is written."""
    if zipped is None:
        zipped = fetch(archive.url, archive.sha256, cache_dir() / Path(archive.url).name)
    try:
        with zipfile.ZipFile(zipped) as zf:
            data = zf.read(archive.member)
    except (zipfile.BadZipFile, KeyError, OSError) as exc:
        raise DataError(f"cannot unzip {archive.member} from {zipped}: {exc}") from None
    check_member(archive, data, f"{archive.member} from {zipped}")
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / archive.member
    out.write_bytes(data)
    return out
