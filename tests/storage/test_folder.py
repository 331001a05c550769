"""The checkpoint folder format (``storage/folder.py``): written aside and swapped in with a
manifest of SHA-256s, a failed write leaving the old folder as it was, a swap cut between its
renames recovered, verified reads, and the config read back."""

from __future__ import annotations

import errno
import hashlib
import json
from pathlib import Path

import pytest

from highway_transformer.config import Config
from highway_transformer.errors import CheckpointError
from highway_transformer.storage.folder import (
    CONFIG_FILE,
    MANIFEST_FILE,
    MODEL_FILE,
    changed_files,
    read_config,
    read_json,
    recover,
    resolve,
    trusting_unverified,
    verify,
    write_atomically,
)


def _writer(config: Config, weights: bytes = b"weights") -> object:
    def write(folder: Path) -> None:
        (folder / CONFIG_FILE).write_text(config.to_json(), encoding="utf-8")
        (folder / MODEL_FILE).write_bytes(weights)

    return write


def test_a_written_folder_lists_every_file_in_its_manifest(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoint"
    write_atomically(folder, _writer(Config(name="a")))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]  # no .tmp, no .old
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    assert manifest["format"] == 1
    assert manifest["sha256"] == {
        name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
        for name in (CONFIG_FILE, MODEL_FILE)
    }
    assert verify(folder, MODEL_FILE) == folder / MODEL_FILE
    assert read_config(folder) == Config(name="a")


def test_a_changed_or_missing_file_is_refused_by_name(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoint"
    write_atomically(folder, _writer(Config()))
    (folder / MODEL_FILE).write_bytes(b"weightz")
    with pytest.raises(CheckpointError, match=f"{MODEL_FILE} does not match its SHA-256"):
        verify(folder, MODEL_FILE)
    (folder / MODEL_FILE).unlink()
    with pytest.raises(CheckpointError, match="is missing; the checkpoint is incomplete"):
        verify(folder, MODEL_FILE)
    (folder / MANIFEST_FILE).write_text("[]")
    with pytest.raises(CheckpointError, match="is malformed or does not list config.json"):
        verify(folder, CONFIG_FILE)
    (folder / MANIFEST_FILE).unlink()  # deleted: nothing can be checked, so it is refused
    with pytest.raises(CheckpointError, match="has no manifest.json.*--trust-unverified"):
        verify(folder, CONFIG_FILE)
    with trusting_unverified():  # unless the caller vouches for the folder
        assert verify(folder, CONFIG_FILE) == folder / CONFIG_FILE
    with trusting_unverified(False), pytest.raises(CheckpointError, match="no manifest.json"):
        verify(folder, CONFIG_FILE)


def test_changed_files_names_what_differs_from_the_manifest(tmp_path: Path) -> None:
    folder = tmp_path / "entry"
    write_atomically(folder, _writer(Config()))
    assert changed_files(folder) == []
    (folder / MODEL_FILE).write_bytes(b"weightz")
    (folder / "extra.bin").write_bytes(b"")
    (folder / CONFIG_FILE).unlink()
    assert changed_files(folder) == sorted([CONFIG_FILE, "extra.bin", MODEL_FILE])
    (folder / MANIFEST_FILE).write_text("{")
    assert changed_files(folder) == [MANIFEST_FILE]


def test_a_failed_write_leaves_the_previous_folder_as_it_was(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoint"
    write_atomically(folder, _writer(Config(name="first")))
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    def full_disk(tmp: Path) -> None:
        (tmp / MODEL_FILE).write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(CheckpointError) as info:
        write_atomically(folder, full_disk)
    assert str(info.value) == (
        f"cannot write checkpoint {folder}: the disk is full; free space or choose another "
        "--out (the previous checkpoint is intact)"
    )
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]
    write_atomically(folder, _writer(Config(name="second")))  # a later save replaces it
    assert read_config(folder).name == "second"


def test_a_swap_cut_between_its_renames_is_recovered(tmp_path: Path) -> None:
    folder = tmp_path / "best"
    write_atomically(folder, _writer(Config(name="kept")))
    old = folder.rename(tmp_path / "best.old")  # the first rename done, the second not
    assert resolve(folder) == old  # readers find it where it is
    assert read_config(folder).name == "kept"
    assert recover(folder) is True and folder.is_dir() and not old.exists()
    assert recover(folder) is False


def test_resolve_finds_the_checkpoint_of_a_run_folder(tmp_path: Path) -> None:
    write_atomically(tmp_path / "run" / "checkpoint", _writer(Config()))
    assert resolve(tmp_path / "run") == tmp_path / "run" / "checkpoint"
    with pytest.raises(CheckpointError, match="^no checkpoint at .*nowhere"):
        resolve(tmp_path / "nowhere")


def test_malformed_json_and_configs_are_one_line_checkpoint_errors(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(CheckpointError, match=r"^cannot parse .*bad\.json: "):
        read_json(tmp_path / "bad.json", "trainer state")
    folder = tmp_path / "checkpoint"
    write_atomically(folder, lambda f: (f / CONFIG_FILE).write_text('{"model": {"depth": 3}}'))
    with pytest.raises(CheckpointError, match="is not a valid config for this version"):
        read_config(folder)
    write_atomically(folder, lambda f: (f / CONFIG_FILE).write_text("[1, 2]"))
    with pytest.raises(CheckpointError, match="must hold a JSON object"):
        read_config(folder)
