"""Property-based bad input: generated config overrides and corrupted checkpoint and
run-folder files. Every outcome is success or one of our errors (never another exception),
and reading never changes a checkpoint."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from highway_transformer.api import load_pretrained
from highway_transformer.config import Config
from highway_transformer.errors import HighwayError
from highway_transformer.report.runs import group_runs, load_run
from highway_transformer.report.tables import mean_curve, paper_rows
from highway_transformer.storage.folder import (
    CONFIG_FILE,
    MANIFEST_FILE,
    MODEL_FILE,
    STATE_FILE,
    TENSOR_FILE,
    VOCAB_FILE,
)
from highway_transformer.training import checkpoint as ckpt
from highway_transformer.training.optim import build_optimizer
from highway_transformer.training.trainer import train
from highway_transformer.validation import build_config, checkpoint_config, validate

FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", 60)),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _dotted_keys(data: dict[str, Any], prefix: str = "") -> list[str]:
    keys = []
    for key, value in data.items():
        keys.append(prefix + key)
        if isinstance(value, dict):
            keys += _dotted_keys(value, f"{prefix}{key}.")
    return keys


KEYS = _dotted_keys(Config().to_dict())
VALUES = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda f: repr(f).replace("inf", ".inf")),
    st.sampled_from(["", "null", "true", "[]", "{}", "[1, 2]", "{a: 1}", ".nan", "-.inf", "all"]),
    st.text(max_size=12),
)
OVERRIDE = st.tuples(st.one_of(st.sampled_from(KEYS), st.text(max_size=15)), VALUES).map(
    lambda kv: f"{kv[0]}={kv[1]}"
)


@FUZZ
@given(st.lists(OVERRIDE, min_size=1, max_size=4))
def test_config_overrides_are_accepted_or_refused_cleanly(overrides: list[str]) -> None:
    try:
        config = build_config(Config(), None, overrides)
    except HighwayError as exc:
        assert str(exc) and "\n" not in str(exc).strip()
        return
    validate(config)  # what was accepted stays valid


# ------------------------------------------------------------------ checkpoints

TEXT = "the quick brown fox jumps over the lazy dog. " * 40


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fuzz")
    text = root / "text.txt"
    text.write_text(TEXT, encoding="utf-8")
    config = Config().replace(
        **{
            "model.d_model": 16, "model.n_layers": 1, "model.n_heads": 2, "model.d_inner": 16,
            "data.corpus": "file", "data.path": str(text), "data.batch_size": 2,
            "data.seq_len": 8, "train.max_steps": 2, "train.eval_interval": 2,
            "train.optimizer": "adam", "train.lr": 0.01,
        }
    )  # fmt: skip
    train(config, root / "run", progress=False)
    return root / "run" / "checkpoint"


CORRUPTIONS = st.sampled_from(["flip", "truncate", "replace", "delete", "append"])
FILES = st.sampled_from(
    [
        MODEL_FILE, CONFIG_FILE, VOCAB_FILE, STATE_FILE,
        TENSOR_FILE, MANIFEST_FILE,
    ]
)  # fmt: skip


def corrupt(path: Path, how: str, where: float, junk: bytes) -> None:
    data = path.read_bytes()
    at = int(where * max(len(data) - 1, 0))
    if how == "flip" and data:
        data = data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]
    elif how == "truncate":
        data = data[:at]
    elif how == "replace":
        data = junk
    elif how == "append":
        data = data + junk
    if how == "delete":
        path.unlink()
    else:
        path.write_bytes(data)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def load_everything(folder: Path) -> None:
    model, _, _ = load_pretrained(folder)
    state = ckpt.load_trainer_state(folder)
    optimizer = build_optimizer(model.parameters(), checkpoint_config(folder).train)
    ckpt.restore_optimizer(optimizer, state.info["optimizer"], state.tensors)
    ckpt.restore_rng(state.info["rng"], state.tensors)


@FUZZ
@given(
    st.lists(
        st.tuples(FILES, CORRUPTIONS, st.floats(0, 1), st.binary(max_size=40)),
        min_size=1,
        max_size=3,
    )
)
def test_corrupted_checkpoints_load_or_fail_cleanly(
    checkpoint: Path, damage: list[tuple[str, str, float, bytes]]
) -> None:
    original = snapshot(checkpoint)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "checkpoint"
        shutil.copytree(checkpoint, folder)
        for name, how, where, junk in damage:
            if (folder / name).exists():
                corrupt(folder / name, how, where, junk)
        damaged = snapshot(folder)
        try:
            load_everything(folder)
        except HighwayError as exc:
            assert "\n" not in str(exc).strip()
        assert snapshot(folder) == damaged  # reading never changes a checkpoint
    assert snapshot(checkpoint) == original


# ------------------------------------------------------------------ run folders

RUN_FILES = st.sampled_from(["experiment.json", "config.yaml", "results.json", "metrics.jsonl"])
JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
CONTENT = st.one_of(
    st.binary(max_size=60),
    JSONISH.map(lambda v: json.dumps(v).encode()),
    st.lists(JSONISH.map(json.dumps), max_size=4).map(lambda ls: "\n".join(ls).encode()),
)


@FUZZ
@given(st.dictionaries(RUN_FILES, CONTENT, min_size=1))
def test_corrupted_run_folders_are_read_or_refused_cleanly(files: dict[str, bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        experiment = {"name": "ht-table1/t-l3", "table": "ht-table1", "scale": "tiny"}
        (run / "experiment.json").write_text(json.dumps(experiment))
        for name, content in files.items():
            (run / name).write_bytes(content)
        try:
            record = load_run(run)
        except HighwayError:
            return
        paper_rows(group_runs([record]), "bpc")  # the report's tables read what load_run kept
        mean_curve([record], "valid", "loss")
