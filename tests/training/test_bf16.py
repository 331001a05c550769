"""``train.precision=bf16`` keeps in fp32 what needs its range: every softmax's statistics,
the loss, the gradients and the optimizer state (autocast casts the products' operands only;
the weights stay fp32). On the CPU, whose autocast leaves softmax and log-softmax in bf16
(CUDA's promotes them), so every normalisation here asks for fp32 itself."""

from __future__ import annotations

import pytest
import torch
from conftest import LM_FAMILIES, LM_VOCAB
from torch.utils._python_dispatch import TorchDispatchMode

from highway_transformer.config import ModelConfig, TrainConfig
from highway_transformer.models.lm import LanguageModel
from highway_transformer.training.optim import build_optimizer

#: Every family, and the adaptive softmax; attention dropout on, so the CPU writes out the
#: attention's softmax (torch's fused kernel, used without it, keeps its statistics in fp32).
FAMILIES = {
    **{name: LM_FAMILIES[name] for name in ("transformer", "shaw", "rtransformer", "xl")},
    "adaptive": ModelConfig(
        **{**LM_FAMILIES["transformer"].__dict__, "adaptive_cutoffs": (8, 16), "tie_weights": False}
    ),
}


class Normalisations(TorchDispatchMode):
    """The dtypes of every softmax and log-softmax aten computes (after autocast's casts)."""

    OPS = ("_softmax", "_log_softmax")

    def __init__(self) -> None:
        super().__init__()
        self.dtypes: list[torch.dtype] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        out = func(*args, **(kwargs or {}))
        if func.overloadpacket.__name__ in self.OPS:
            self.dtypes.append(out.dtype)
        return out


def _bf16_step(family: str) -> tuple[LanguageModel, torch.Tensor, list[torch.dtype]]:
    config = ModelConfig(**{**FAMILIES[family].__dict__, "dropout_attn": 0.1})
    torch.manual_seed(0)
    model = LanguageModel(config).train()
    tokens = torch.randint(0, LM_VOCAB, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.autocast("cpu", dtype=torch.bfloat16), Normalisations() as seen:
        loss = model(tokens[:, :-1], targets=tokens[:, 1:], reduction="sum").loss
    loss.backward()
    return model, loss, seen.dtypes


@pytest.mark.parametrize("family", FAMILIES)
def test_softmax_statistics_and_the_loss_stay_fp32(family: str) -> None:
    model, loss, dtypes = _bf16_step(family)
    assert dtypes and set(dtypes) == {torch.float32}, dtypes
    assert loss.dtype == torch.float32
    assert all(p.grad.dtype == torch.float32 for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
def test_the_optimizer_state_stays_fp32(optimizer: str) -> None:
    model, _, _ = _bf16_step("transformer")
    train = TrainConfig(optimizer=optimizer, lr=0.01, momentum=0.9)
    opt = build_optimizer(model.parameters(), train)
    opt.step()
    states = [t for s in opt.state.values() for t in s.values() if torch.is_tensor(t)]
    assert states and all(t.dtype == torch.float32 for t in states if t.dim() > 0)
    assert all(p.dtype == torch.float32 for p in model.parameters())
