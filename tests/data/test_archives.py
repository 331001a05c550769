"""Corpus archives (``data/archives.py``): a member's size, alphabet and SHA-1 are checked, and
a local zip is accepted or refused in one line, leaving nothing behind."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from highway_transformer.data.archives import Archive, check_member, extract_archive
from highway_transformer.errors import DataError

SMALL = Archive("https://example.org/small.zip", "small", 12, alphabet=b" abc")
SHA1 = Archive("https://example.org/s.zip", "s", 3, sha1_of_member=hashlib.sha1(b"abc").hexdigest())
SHA256 = Archive(
    "https://example.org/t.zip", "t", 3, sha256_of_member=hashlib.sha256(b"abc").hexdigest()
)


@pytest.mark.parametrize(
    ("archive", "data", "says"),
    [
        (SMALL, b"abc abc abc", "bytes"),
        (SMALL, b"abc abc abcX", "alphabet"),
        (SHA1, b"abd", "SHA-1"),
        (SHA256, b"abd", "pinned SHA-256"),
    ],
)
def test_corpus_file_checks(archive: Archive, data: bytes, says: str) -> None:
    with pytest.raises(DataError, match=says):
        check_member(archive, data, "copy")


def test_a_local_zip_is_accepted_and_checked(tmp_path: Path) -> None:
    good = tmp_path / "good.zip"
    with zipfile.ZipFile(good, "w") as zf:
        zf.writestr("small", "abc abc abca")
    assert extract_archive(SMALL, tmp_path / "out", good).read_bytes() == b"abc abc abca"
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"PK not a zip")
    with pytest.raises(DataError, match="cannot unzip"):
        extract_archive(SMALL, tmp_path / "out2", bad)
    assert not (tmp_path / "out2").exists()
