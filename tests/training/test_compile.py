"""Every family's training step compiles into one graph, and computes what eager does.

The step is the trainer's: the model's ``forward`` with targets and ``reduction="sum"``, then
the loss's backward, over two segments (Transformer-XL carries its memory from the first to
the second). ``fullgraph=True`` makes any graph break an error. The backend of the comparison
with eager is ``aot_eager``: Dynamo traces the whole step (graph breaks are Dynamo's) and
AOTAutograd traces the backward too, custom autograd functions included (what Inductor would
compile: a write through a strided view, say, fails there), without Inductor's C++
compilation. Which families, with which settings and what it took
(the dropout draw, the relative shift, the LocalRNN): ``runtime/compiling.py``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from conftest import LM_FAMILIES, LM_VOCAB
from torch._dynamo.testing import CompileCounterWithBackend

from highway_transformer.config import Config, GateConfig, ModelConfig, TrainConfig
from highway_transformer.errors import ConfigError
from highway_transformer.models.lm import LanguageModel
from highway_transformer.runtime.compiling import CompiledModule, check_compile, compiles
from highway_transformer.training.trainer import Trainer, train

SEGMENTS, BATCH, LENGTH = 2, 2, 7
#: The families (one layer: the R-Transformer's two LocalRNNs, attention and FFN), each with
#: the SDU gate on every sublayer it can gate.
FAMILIES = {
    "transformer-dot": LM_FAMILIES["transformer"],
    "transformer-shaw": LM_FAMILIES["shaw"],
    "rtransformer": LM_FAMILIES["rtransformer"],
    "xl-memory": LM_FAMILIES["xl"],
}


def _config(family: str, dropout: float) -> ModelConfig:
    base = FAMILIES[family]
    sublayers = ("attn", "ffn", "rnn") if base.family == "rtransformer" else ("attn", "ffn")
    gate = GateConfig(kind="sdu", activation="sigmoid", bias=0.5, sublayers=sublayers)
    changes = {"n_layers": 1, "gate": gate, "dropout": dropout, "dropout_attn": dropout}
    return ModelConfig(**{**base.__dict__, **changes})


def _segments() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, LM_VOCAB, (BATCH, SEGMENTS * LENGTH + 1), generator=g)
    return [
        (tokens[:, s * LENGTH : (s + 1) * LENGTH], tokens[:, s * LENGTH + 1 : (s + 1) * LENGTH + 1])
        for s in range(SEGMENTS)
    ]


def _train_segments(model: LanguageModel, forward: torch.nn.Module) -> list[torch.Tensor]:
    """The losses of the segments, each backward as the trainer runs it (gradients add up)."""
    memory, losses = None, []
    for x, y in _segments():
        loss, _, memory = forward(x, memory=memory, targets=y, reduction="sum")
        loss.backward()
        losses.append(loss.detach())
    assert (memory is not None) == model.uses_memory
    return losses


def _model(config: ModelConfig) -> LanguageModel:
    torch.manual_seed(0)
    return LanguageModel(config).train()


@pytest.fixture(autouse=True)
def _fresh_compiler():
    """Each test compiles from scratch (and leaves no cached graphs to the next)."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("family", FAMILIES)
def test_training_step_compiles_whole_and_equals_eager(family: str) -> None:
    """No graph break (fullgraph), one compilation per kind of segment (XL: without and with
    memory), and the losses and gradients of eager within fp32 rounding (dropout 0)."""
    eager = _model(_config(family, dropout=0.0))
    compiled = copy.deepcopy(eager)
    counter = CompileCounterWithBackend("aot_eager")
    forward = CompiledModule(compiled, fullgraph=True, backend=counter)

    expected = _train_segments(eager, eager)
    got = _train_segments(compiled, forward)

    assert counter.frame_count == (SEGMENTS if eager.uses_memory else 1)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    grads = {n: p.grad for n, p in compiled.named_parameters()}
    for name, p in eager.named_parameters():
        assert p.grad is not None and grads[name] is not None, name
        torch.testing.assert_close(grads[name], p.grad, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("family", FAMILIES)
def test_training_step_with_dropout_compiles_whole(family: str) -> None:
    """Dropout on (training mode): still one graph; the masks are torch's own draws there
    (numpy's SFC64 draw of the eager CPU step cannot be traced), so only the loss's
    finiteness and the gradients' presence are checked, not eager's values. Dynamo alone
    (``backend="eager"``): graph breaks are its own."""
    model = _model(_config(family, dropout=0.2))
    counter = CompileCounterWithBackend("eager")
    losses = _train_segments(model, CompiledModule(model, fullgraph=True, backend=counter))
    assert counter.frame_count == (SEGMENTS if model.uses_memory else 1)
    assert all(math.isfinite(float(loss)) for loss in losses)
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_auto_compiles_on_cuda_only() -> None:
    cpu, cuda, mps = torch.device("cpu"), torch.device("cuda"), torch.device("mps")
    assert compiles("auto", cuda) and not compiles("auto", cpu) and not compiles("auto", mps)
    assert compiles("true", cpu) and compiles("true", cuda)
    assert not compiles("false", cuda) and not compiles("false", cpu)
    # a config of an earlier version holds a boolean: it means what it said
    assert compiles(True, cpu) and not compiles(False, cuda)


def test_a_compile_mode_that_does_not_apply_is_refused() -> None:
    mode = TrainConfig(compile_mode="max-autotune-no-cudagraphs")
    assert check_compile(mode, torch.device("cuda"))
    with pytest.raises(ConfigError, match="compiles on CUDA only"):
        check_compile(mode, torch.device("cpu"))
    assert not check_compile(TrainConfig(), torch.device("cpu"))


# --------------------------------------------------------------------------- the trainer


def test_the_trainer_compiles_as_train_compile_says(
    tmp_path: Path, tiny_task_config: Callable[..., Config]
) -> None:
    auto = Trainer(tiny_task_config("adding/transformer"), tmp_path / "auto")
    assert not auto.compiled and auto.forward is auto.wrapped  # auto, on the CPU: eager
    assert auto._machine()["compiled"] is False  # recorded with each stretch of training
    on = Trainer(tiny_task_config("adding/transformer", **{"train.compile": "true"}), tmp_path)
    assert on.compiled and isinstance(on.forward, CompiledModule)
    mode = {"train.compile_mode": "max-autotune-no-cudagraphs"}
    with pytest.raises(ConfigError, match="does not compile on cpu"):
        Trainer(tiny_task_config("adding/transformer", **mode), tmp_path / "mode")


def test_a_compiled_xl_run_trains_as_an_eager_one(
    tmp_path: Path,
    text_file: Path,
    tiny_lm_config: Callable[..., Config],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The trainer's compiled step (memory carried from step to step), Inductor replaced by
    Dynamo alone for time: without dropout, the losses of the eager run."""
    xl = {"model.family": "xl", "model.memory.mem_len": 4, "model.dropout": 0.0}
    eager = train(tiny_lm_config(text_file, **xl), tmp_path / "eager")
    real_compile = torch.compile
    monkeypatch.setattr(
        torch,
        "compile",
        lambda module, **kw: real_compile(module, **{**kw, "backend": "eager"}),
    )
    compiled = train(tiny_lm_config(text_file, **xl, **{"train.compile": True}), tmp_path / "c")
    assert compiled["metadata"]["compiled"] and not eager["metadata"]["compiled"]
    for split in ("valid", "test"):
        assert compiled[split]["loss"] == pytest.approx(eager[split]["loss"], rel=1e-5)
