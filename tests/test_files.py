"""Files the user points at (``files.py``): output folders made and checked before any work,
and text read with one error naming the file and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from highway_transformer.errors import ConfigError, DataError
from highway_transformer.files import first_line, make_folder, read_text


def test_make_folder_creates_parents_and_accepts_an_existing_folder(tmp_path: Path) -> None:
    made = make_folder(tmp_path / "a" / "b", "--out")
    assert made == tmp_path / "a" / "b" and made.is_dir()
    assert make_folder(made, "--out") == made
    assert list(made.iterdir()) == []  # the write check leaves nothing behind


def test_make_folder_refuses_a_file_in_the_way_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError) as info:
        make_folder(tmp_path / "f", "--out")
    assert str(info.value) == f"--out {tmp_path / 'f'} is a file; give a folder"
    with pytest.raises(ConfigError, match=r"cannot be used \(.*\); choose another folder"):
        make_folder(tmp_path / "f" / "under", "--out")


def test_first_line_of_an_error() -> None:
    assert first_line(ValueError("one\ntwo")) == "one"
    assert first_line(ValueError("  \n")) == "ValueError"


@pytest.mark.parametrize(
    ("data", "options", "says"),
    [
        (b"a\0b", {}, "data f.txt is a binary file, not text; give the right file"),
        (b"caf\xe9", {}, "data f.txt is not UTF-8 text (byte 3); save it as UTF-8"),
        (b" \n", {"empty_fix": "add text"}, "data f.txt is empty; add text"),
        (b"caf\xe9", {"utf8_fix": "re-encode it"}, "(byte 3); re-encode it"),
    ],
)
def test_read_text_refuses_in_one_line_naming_the_file(
    tmp_path: Path, data: bytes, options: dict, says: str
) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(data)
    with pytest.raises(DataError) as info:
        read_text(path, DataError, "data", **options)
    assert str(info.value).endswith(says.replace("f.txt", str(path)).removeprefix("data "))
    assert "\n" not in str(info.value)


def test_read_text_reads_utf8_and_what_the_options_allow(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes("naïve\n".encode())
    assert read_text(path, DataError) == "naïve\n"
    path.write_bytes(b"a\0b")
    assert read_text(path, DataError, binary_fix=None) == "a\0b"
    path.write_bytes(b"")
    assert read_text(path, DataError) == ""
    with pytest.raises(DataError, match=r"^cannot read data .*missing\.txt: No such file"):
        read_text(tmp_path / "missing.txt", DataError, "data")
