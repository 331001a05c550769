"""The library on an accelerator, with the CPU as its oracle.

The device is CUDA unless ``HIGHWAY_TEST_DEVICE`` names another (``mps``, or ``cpu`` to check
these tests themselves on a machine without one); the tests skip, saying so, where torch
does not see it. On a GPU machine: ``python -m pytest tests/test_device.py``.
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from conftest import LM_FAMILIES, LM_GATES, LM_VOCAB, build_lm

from highway_transformer.config import Config, ModelConfig
from highway_transformer.models.lm import LanguageModel
from highway_transformer.runtime.compiling import CompiledModule
from highway_transformer.storage.folder import STATE_FILE
from highway_transformer.training.trainer import train

DEVICE = torch.device(os.environ.get("HIGHWAY_TEST_DEVICE", "cuda"))
#: The tiny trainings train eager: on CUDA `train.compile=auto` would compile each one with
#: Inductor (a minute of cold compilation apiece on a GPU). The compiled step is checked by
#: its own test, `test_the_compiled_training_step_equals_eager`, which the GPU check runs as
#: a step of its own.
EAGER = {"train.compile": False}


def _available(device: torch.device) -> bool:
    if device.type == "cuda":
        return torch.cuda.is_available()
    if device.type == "mps":
        return bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()
    return device.type == "cpu"


pytestmark = pytest.mark.skipif(
    not _available(DEVICE),
    reason=f"torch sees no {DEVICE.type} device: these tests compare it with the CPU "
    "(set HIGHWAY_TEST_DEVICE to test another)",
)
FLOAT64 = DEVICE.type != "mps"  # MPS has no float64


@pytest.fixture(autouse=True)
def _full_precision_matmuls():
    """TF32 would round the products to 10 bits; the oracle comparison needs full fp32."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def _with_gate(family: str, gate: str) -> ModelConfig:
    config = LM_FAMILIES[family]
    if family == "gtrxl":  # its own gate; the highway gates need a post/pre LN of their own
        return config
    chosen = next(g for g in LM_GATES if f"{g.kind}-{g.activation}" == gate)
    return ModelConfig(**{**config.__dict__, "gate": chosen})


def _loss_and_grads(
    model: LanguageModel, tokens: torch.Tensor
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad()
    loss = model(tokens[:, :-1], targets=tokens[:, 1:]).loss
    loss.backward()
    grads = {n: p.grad.detach().cpu() for n, p in model.named_parameters() if p.grad is not None}
    return loss.detach().cpu(), grads


def _tokens(shape: tuple[int, int]) -> torch.Tensor:
    return torch.randint(0, LM_VOCAB, shape, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("family", LM_FAMILIES)
@pytest.mark.parametrize("gate", ["none-sigmoid", "sdu-sigmoid", "sdu-tanh"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["fp64", "fp32"])
def test_loss_and_gradients_equal_the_cpus(family: str, gate: str, dtype: torch.dtype) -> None:
    if dtype == torch.float64 and not FLOAT64:
        pytest.skip(f"{DEVICE.type} has no float64")
    model = build_lm(_with_gate(family, gate)).to(dtype)
    on_device = copy.deepcopy(model).to(DEVICE)
    tokens = _tokens((3, 12))
    loss, grads = _loss_and_grads(model, tokens)
    device_loss, device_grads = _loss_and_grads(on_device, tokens.to(DEVICE))
    tight = dtype == torch.float64
    torch.testing.assert_close(
        device_loss, loss, rtol=1e-10 if tight else 1e-5, atol=1e-10 if tight else 1e-5
    )
    assert device_grads.keys() == grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(
            device_grads[name], grad, rtol=1e-8 if tight else 1e-4,
            atol=1e-10 if tight else 1e-5, msg=lambda m, n=name: f"{n}: {m}",
        )  # fmt: skip


@pytest.mark.parametrize("family", ["xl", "gtrxl"])
def test_segments_with_memory_equal_the_cpus(family: str) -> None:
    dtype = torch.float64 if FLOAT64 else torch.float32
    model = build_lm(_with_gate(family, "sdu-sigmoid")).to(dtype)
    on_device = copy.deepcopy(model).to(DEVICE)
    tokens = _tokens((2, 12))
    memory = device_memory = None
    for start in (0, 4, 8):
        segment = tokens[:, start : start + 4]
        hidden, memory = model(segment, memory=memory)
        device_hidden, device_memory = on_device(segment.to(DEVICE), memory=device_memory)
        torch.testing.assert_close(device_hidden.cpu(), hidden, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("family", ["transformer", "shaw", "rtransformer", "xl"])
def test_the_compiled_training_step_equals_eager(family: str) -> None:
    """What train.compile=auto trains on CUDA: Inductor's step, one graph (fullgraph), two
    segments (XL's memory carried): eager's losses and gradients on the device (dropout 0)."""
    if DEVICE.type != "cuda":
        pytest.skip("compiled by default on CUDA only (the CPU's check: test_compile.py)")
    config = ModelConfig(**{**_with_gate(family, "sdu-sigmoid").__dict__, "dropout": 0.0})
    eager = build_lm(config).train().to(DEVICE)
    compiled = copy.deepcopy(eager)
    steps = ((eager, eager), (compiled, CompiledModule(compiled, fullgraph=True)))
    tokens = _tokens((2, 15)).to(DEVICE)
    losses = []
    for _, forward in steps:
        memory = None
        for start in (0, 7):
            x, y = tokens[:, start : start + 7], tokens[:, start + 1 : start + 8]
            loss, _, memory = forward(x, memory=memory, targets=y, reduction="sum")
            loss.backward()
            losses.append(loss.detach().cpu())
    torch.testing.assert_close(losses[2:], losses[:2], rtol=1e-4, atol=1e-4)
    for (name, p), q in zip(eager.named_parameters(), compiled.parameters(), strict=True):
        torch.testing.assert_close(q.grad.cpu(), p.grad.cpu(), rtol=1e-3, atol=1e-4, msg=name)


@pytest.mark.parametrize("family", ["transformer", "rtransformer", "xl", "shaw"])
def test_greedy_and_beam_decoding_equal_the_cpus(family: str) -> None:
    dtype = torch.float64 if FLOAT64 else torch.float32
    model = build_lm(_with_gate(family, "sdu-sigmoid")).to(dtype)
    on_device = copy.deepcopy(model).to(DEVICE)
    prompts = [[1, 2, 3], [4, 5, 6]]
    assert on_device.generate(prompts, 8, temperature=0.0) == model.generate(
        prompts, 8, temperature=0.0
    )
    assert on_device.generate([1, 2, 3], 6, num_beams=3) == model.generate(
        [1, 2, 3], 6, num_beams=3
    )


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_training_in_each_precision(
    precision: str, text_file: Path, tmp_path: Path, tiny_lm_config: Callable[..., Config]
) -> None:
    if DEVICE.type == "cpu" and precision != "fp32":
        pytest.skip("reduced precision on a CPU is tested in test_trainer/test_hardware")
    config = tiny_lm_config(
        text_file, **{"train.device": str(DEVICE), "train.precision": precision, **EAGER}
    )
    results = train(config, tmp_path / "run")
    assert results["metadata"]["device"].startswith(DEVICE.type)
    assert results["metadata"]["precision"] == precision
    assert math.isfinite(results["valid"]["loss"]) and math.isfinite(results["test"]["loss"])
    state = json.loads((tmp_path / "run" / "checkpoint" / STATE_FILE).read_text())
    assert (state["scaler"].get("scale", 0) > 0) == (precision == "fp16")  # fp16 only


def test_interrupted_and_resumed_equals_uninterrupted(
    text_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    interrupt_after_step: Callable[[pytest.MonkeyPatch, int], None],
    tiny_lm_config: Callable[..., Config],
) -> None:
    """Within the device's own reproducibility: atomics in some backward kernels (the
    embedding's on CUDA) add in any order, so close rather than bit for bit (the CPU's
    bit-for-bit resume is tested in test_trainer)."""
    config = tiny_lm_config(text_file, **{"train.device": str(DEVICE), **EAGER})
    one, two = tmp_path / "one", tmp_path / "two"
    a = train(config, one)
    with monkeypatch.context() as patch:
        interrupt_after_step(patch, 4)
        with pytest.raises(KeyboardInterrupt):
            train(config, two)
    b = train(config, two, resume=True)
    for split in ("valid", "test"):
        assert b[split]["loss"] == pytest.approx(a[split]["loss"], rel=1e-4)


@pytest.mark.parametrize(
    "preset", ["copy/transformer", "adding/transformer", "seq2seq/toy", "digits/rtransformer"]
)
def test_every_task_trains(
    preset: str, tmp_path: Path, tiny_task_config: Callable[..., Config]
) -> None:
    if preset.startswith("digits"):
        pytest.importorskip("sklearn")
    config = tiny_task_config(preset, **{"train.device": str(DEVICE), **EAGER})
    results = train(config, tmp_path / "r")
    assert results["metadata"]["device"].startswith(DEVICE.type)
    headline = results["valid"][results["headline"]]
    assert math.isfinite(headline)
