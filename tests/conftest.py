"""Suite-wide fixtures: one thread, a tiny text corpus and music file, tiny configs, run
folders written by hand, and the model-family table that several test files parametrize over.

The tests sit in folders that mirror ``src/highway_transformer``; this is the suite's only
``conftest.py``. Tests take what they share as fixtures; the tables a ``parametrize`` needs
while the module is collected (:data:`LM_FAMILIES`, :data:`LM_GATES`) are imported by name.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from highway_transformer.config import (
    Config,
    DataConfig,
    GateConfig,
    LocalRNNConfig,
    MemoryConfig,
    ModelConfig,
    TrainConfig,
)
from highway_transformer.data.download import CACHE_ENV
from highway_transformer.models.lm import LanguageModel
from highway_transformer.presets import get_preset
from highway_transformer.training.rates import RATES_ENV

#: A small repetitive text: a tiny model learns it in a few steps.
PATTERN = "abcabd abcabe xyzzy. " * 60
#: Model settings that make any preset tiny (one layer, width 16, dropout on).
TINY_MODEL = {
    "model.d_model": 16,
    "model.d_inner": 32,
    "model.n_layers": 1,
    "model.n_heads": 2,
    "model.dropout": 0.1,
}


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny tensors: one intra-op thread avoids thread-pool overhead on a shared CPU."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


HOLD = """
import sys, time
from highway_transformer.training.runlock import claim_run_folder
with claim_run_folder(sys.argv[1]) as held:
    print("held" if held else "busy", flush=True)
    time.sleep(300)
"""


@pytest.fixture
def hold_folder() -> Iterator[Callable[[Path], subprocess.Popen[str]]]:
    """``hold_folder(path)``: another process holding ``path``'s run lock (as a runner or a
    training does) until killed, at the latest when the test ends; returns that process."""
    owners: list[subprocess.Popen[str]] = []

    def hold(out: Path) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True
        )
        owners.append(process)
        assert process.stdout is not None and process.stdout.readline().strip() == "held"
        return process

    yield hold
    for process in owners:
        process.kill()
        process.wait()


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Token caches and downloads go to a folder of this test session, not the user's cache;
    the measured rates (training/rates.py) to one of this test: a probe of one test would
    price another's plan."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.setenv(RATES_ENV, str(tmp_path_factory.mktemp("rates") / "rates.json"))


@pytest.fixture
def text_file(tmp_path: Path) -> Path:
    path = tmp_path / "pattern.txt"
    path.write_text(PATTERN, encoding="utf-8")
    return path


#: The words of :func:`word_corpus`.
WORDS = ("the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away", "home")


@pytest.fixture
def word_corpus(tmp_path: Path) -> Path:
    """A text file of 300 lines of 12 words drawn (seed 0) from :data:`WORDS`."""
    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(300)]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------ tiny configurations

#: The unit tests' tiny model: two layers of width 16, two heads, no dropout.
TINY_MODEL_FIELDS = {"d_model": 16, "n_layers": 2, "n_heads": 2, "d_inner": 32, "dropout": 0.0}


def _tiny_model_config(**overrides) -> ModelConfig:
    return ModelConfig(**{**TINY_MODEL_FIELDS, **overrides})


@pytest.fixture(scope="session")
def tiny_model_config() -> Callable[..., ModelConfig]:
    """``tiny_model_config(**overrides)``: :data:`TINY_MODEL_FIELDS` with ``overrides``."""
    return _tiny_model_config


def _tiny_stack_config(
    family: str = "transformer", gate: str = "none", norm: str = "post", **overrides
) -> ModelConfig:
    return _tiny_model_config(
        family=family,
        norm=norm,
        init="torch",
        gate=GateConfig(kind=gate),
        local_rnn=LocalRNNConfig(cell="gru", window=3),
        **overrides,
    )


@pytest.fixture(scope="session")
def tiny_stack_config() -> Callable[..., ModelConfig]:
    """``tiny_stack_config(family="transformer", gate="none", norm="post", **overrides)``:
    the tiny model of a family with a gate kind and a norm position, PyTorch's default
    initialisation, and a GRU LocalRNN of window 3 (R-Transformer)."""
    return _tiny_stack_config


def _tiny_file_config(path: Path, **overrides) -> Config:
    config = Config(
        model=ModelConfig(d_model=16, n_layers=1, n_heads=2, d_inner=32),
        data=DataConfig(corpus="file", path=str(path), batch_size=4, seq_len=16, eval_batch_size=4),
        train=TrainConfig(optimizer="adam", lr=1e-2),
    )
    return config.replace(**overrides) if overrides else config


@pytest.fixture(scope="session")
def tiny_file_config() -> Callable[..., Config]:
    """``tiny_file_config(path, **overrides)``: a one-layer width-16 model (other model
    settings the defaults) of the text file ``path`` in batches of 4 × 16 symbols, trained
    by Adam at 1e-2; ``overrides`` are dotted keys (``"train.max_steps": 2``)."""
    return _tiny_file_config


def _tiny_lm_config(path: Path, **overrides) -> Config:
    return _tiny_file_config(
        path,
        **{
            "name": "tiny",
            "model.dropout": 0.1,
            "model.gate.kind": "sdu",
            "data.level": "char",
            "data.context": 4,
            "train.schedule": "constant",
            "train.clip": 1.0,
            "train.max_steps": 8,
            "train.eval_interval": 4,
            "train.log_interval": 2,
            "train.seed": 7,
            **overrides,
        },
    )


@pytest.fixture(scope="session")
def tiny_lm_config() -> Callable[..., Config]:
    """``tiny_lm_config(path, **overrides)``: a one-layer σ-SDU character model of the text
    file ``path`` (:func:`tiny_file_config`; dropout 0.1, context 4, 8 steps, seed 7)."""
    return _tiny_lm_config


@pytest.fixture
def lm_config(text_file: Path) -> Callable[..., Config]:
    """``lm_config(**overrides)``: :func:`tiny_lm_config` of the :func:`text_file`."""
    return lambda **overrides: _tiny_lm_config(text_file, **overrides)


def _tiny_task_config(preset: str, **overrides) -> Config:
    small = {
        **TINY_MODEL,
        "train.max_steps": 6,
        "train.eval_interval": 2,
        "train.log_interval": 1,
        "train.eval_max_tokens": 256,
        "train.optimizer": "adam",
        "train.lr": 1e-2,
        "train.schedule": "constant",
        "train.anneal_rule": "best",  # the only rule without the anneal schedule
        "train.lr_step": 0,  # the step schedule's only
        "train.device": "cpu",
        "data.batch_size": 4,
        "data.eval_batch_size": 16,
    }
    return get_preset(preset).replace(**{**small, **overrides})


@pytest.fixture(scope="session")
def tiny_task_config() -> Callable[..., Config]:
    """``tiny_task_config(preset, **overrides)``: ``preset`` made tiny (:data:`TINY_MODEL`),
    6 Adam steps, small evaluation sets."""
    return _tiny_task_config


def _rt_preset_config(preset: str, **overrides) -> Config:
    from highway_transformer.presets import rt_tables

    config = rt_tables.PRESETS[preset][1]()
    small = {"model.d_model": 16, "model.d_inner": 32, "train.log_interval": 10}
    return config.replace(**{**small, **overrides})


@pytest.fixture(scope="session")
def rt_preset_config() -> Callable[..., Config]:
    """``rt_preset_config(preset, **overrides)``: an R-Transformer table preset at width 16
    (its own depth, steps and optimiser), logging every 10 steps."""
    return _rt_preset_config


# ------------------------------------------------------------------ music files


def _write_music_file(path: Path, lengths: tuple[int, ...] = (6, 9, 4)) -> Path:
    from scipy.io import savemat

    rng = np.random.RandomState(0)

    def cells(n: int) -> np.ndarray:
        out = np.empty((1, len(lengths)), dtype=object)
        for i, length in enumerate(lengths):
            out[0, i] = (rng.rand(length + n, 88) < 0.05).astype(np.uint8)
        return out

    savemat(str(path), {"traindata": cells(0), "validdata": cells(1), "testdata": cells(2)})
    return path


@pytest.fixture(scope="session")
def write_music_file() -> Callable[..., Path]:
    """``write_music_file(path, lengths=(6, 9, 4))``: a tiny piano-roll ``.mat`` file
    (train/valid/test cells; the valid pieces one step longer, the test pieces two) in the
    Boulanger layout."""
    return _write_music_file


@pytest.fixture
def music_file(tmp_path: Path) -> Path:
    pytest.importorskip("scipy.io")
    return _write_music_file(tmp_path / "tiny.mat")


# ------------------------------------------------------------------ Highway Transformer gates


def _with_gate_biases(combiner: torch.nn.Module, seed: int = 1) -> torch.nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        combiner.proj.bias.copy_(torch.randn(combiner.proj.bias.shape[0], generator=g))
    return combiner


@pytest.fixture(scope="session")
def with_gate_biases() -> Callable[..., torch.nn.Module]:
    """``with_gate_biases(combiner, seed=1)``: an HT gate (SDU, highway, gated) given N(0, 1)
    biases ``b1, b2`` (they start at zero), so the bias path is exercised; returns it."""
    return _with_gate_biases


# ------------------------------------------------------------------ run folders by hand

LN2 = math.log(2)
#: The steps at which a hand-written run folder records its metrics.
RUN_STEPS = (10, 20, 30, 40)


def _make_run(
    root: Path,
    name: str,
    valid: list[float],
    valid_bpc: float,
    test_bpc: float,
    seconds: float,
    seed: int = 1,
    scale: str = "small",
    table: str | None = None,
    overrides: list[str] | None = None,
    code: dict | None = None,
    comparison: dict | None = None,
    final_bpc: float | None = None,
) -> Path:
    """A run folder as the runner writes it: experiment.json, config.yaml, metrics, results
    (``code``: the code facts it records, default: this code's; ``comparison``: the one
    frozen in experiment.json, default none, as in runs older than registration;
    ``final_bpc``: the last checkpoint's whole-split valid bpc, default none recorded)."""
    from highway_transformer.experiments import get_experiment
    from highway_transformer.runtime.provenance import code_facts

    e = get_experiment(name)
    table = table or e.table
    run_dir = root / table / scale / e.row / f"seed{seed}"
    run_dir.mkdir(parents=True)
    info = {"name": name, "table": table, "row": e.row, "scale": scale, "seed": seed,
            "metric": e.metric, "baseline": e.baseline, "published": e.published}  # fmt: skip
    if overrides is not None:
        info["overrides"] = overrides
    if comparison is not None:
        info["comparison"] = comparison
    (run_dir / "experiment.json").write_text(json.dumps(info), encoding="utf-8")
    config = {"model": {"gate": {"kind": "none"}}, "train": {"max_steps": RUN_STEPS[-1]}}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    lines = []
    for step, loss in zip(RUN_STEPS, valid, strict=True):
        for split, value in (("train", loss + 0.1), ("valid", loss)):
            record = {"step": step, "split": split, "loss": value, "bpc": value / LN2,
                      "ppl": math.exp(value), "time": step * seconds / RUN_STEPS[-1]}  # fmt: skip
            lines.append(json.dumps(record))
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    results = {
        "steps": RUN_STEPS[-1],
        "train_seconds": seconds,
        "parameters": 1000,
        "valid": {"loss": valid_bpc * LN2, "bpc": valid_bpc, "ppl": 2**valid_bpc},
        "test": {"loss": test_bpc * LN2, "bpc": test_bpc, "ppl": 2**test_bpc},
        "metadata": dict(code_facts()) if code is None else code,
    }
    if final_bpc is not None:
        figures = {"loss": final_bpc * LN2, "bpc": final_bpc, "ppl": 2**final_bpc}
        results["final"] = {"step": RUN_STEPS[-1], "valid": figures, "test": figures}
    (run_dir / "results.json").write_text(json.dumps(results), encoding="utf-8")
    return run_dir


@pytest.fixture(scope="session")
def make_run() -> Callable[..., Path]:
    """``make_run(root, name, valid, valid_bpc, test_bpc, seconds, seed=1, ...)``: a finished
    run folder of experiment ``name`` under ``root``, written by hand (validation losses
    ``valid`` at :data:`RUN_STEPS`)."""
    return _make_run


@pytest.fixture(scope="session")
def experiments_cli() -> Callable[[list[str]], argparse.Namespace]:
    """``experiments_cli(argv)``: ``argv`` parsed as ``highway`` parses its experiment
    commands (``experiments``, ``run``, ...); ``args.func(args)`` runs the command."""
    from highway_transformer.cli_experiments import add_commands

    def parse(argv: list[str]) -> argparse.Namespace:
        parser = argparse.ArgumentParser(prog="highway")
        add_commands(parser.add_subparsers(dest="command", required=True))
        return parser.parse_args(argv)

    return parse


# ------------------------------------------------------------------ interrupted runs


@pytest.fixture(scope="session")
def interrupt_after_step() -> Callable[[pytest.MonkeyPatch, int], None]:
    """``interrupt_after_step(monkeypatch, step)``: the trainer raises ``KeyboardInterrupt``
    right after saving the checkpoint of ``step``."""
    from highway_transformer.training.trainer import Trainer

    def interrupt(monkeypatch: pytest.MonkeyPatch, step: int) -> None:
        original = Trainer.save

        def save_then_stop(self: Trainer) -> Path:
            path = original(self)
            if self.state.step == step:
                raise KeyboardInterrupt
            return path

        monkeypatch.setattr(Trainer, "save", save_then_stop)

    return interrupt


# ------------------------------------------------------------------ model families

#: The vocabulary of the family table's language models.
LM_VOCAB = 23


def _family_config(**overrides) -> ModelConfig:
    return _tiny_model_config(
        **{"vocab_size": LM_VOCAB, "init": "normal", "init_std": 0.2, **overrides}
    )


def _xl_config(mem_len: int, **overrides) -> ModelConfig:
    return _family_config(
        family="xl", attention="relative", memory=MemoryConfig(mem_len=mem_len), **overrides
    )


#: One tiny language model of each family (two layers of width 16, N(0, 0.2) weights).
LM_FAMILIES = {
    "transformer": _family_config(),
    "transformer-pre": _family_config(norm="pre"),
    "rtransformer": _family_config(
        family="rtransformer",
        positional="none",
        local_rnn=LocalRNNConfig(cell="gru", window=3, per_block=2),
    ),
    "xl": _xl_config(6),
    "shaw": _family_config(attention="shaw", shaw_clip=3, positional="none"),
    "gtrxl": _xl_config(6, norm="pre", gate=GateConfig(kind="gtrxl-gru", bias=2.0)),
    # the modern baseline (presets/modern.py) with the attention-output gate
    "modern": _family_config(
        norm="pre",
        final_norm="true",
        layer_norm="rmsnorm",
        positional="rope",
        ffn="swiglu",
        bias=False,
        attn_output_gate="elementwise",
    ),
}
#: Every Highway Transformer gate (and none).
LM_GATES = [
    GateConfig(kind="none"),
    GateConfig(kind="sdu", activation="sigmoid"),
    GateConfig(kind="sdu", activation="tanh"),
    GateConfig(kind="highway"),
    GateConfig(kind="gated"),
]


def build_lm(config: ModelConfig, seed: int = 0) -> LanguageModel:
    """The language model of ``config`` with weights drawn from ``seed``, in evaluation mode."""
    torch.manual_seed(seed)
    return LanguageModel(config).eval()


@pytest.fixture(scope="session")
def lm_family_config() -> Callable[..., ModelConfig]:
    """``lm_family_config(**overrides)``: a model of the family table's settings (a plain
    Transformer unless ``family`` says otherwise)."""
    return _family_config


@pytest.fixture(scope="session")
def lm_xl_config() -> Callable[..., ModelConfig]:
    """``lm_xl_config(mem_len, **overrides)``: the family table's Transformer-XL."""
    return _xl_config
