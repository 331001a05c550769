"""Weight initialisation (``models/init.py``): each scheme's distribution for Linear, Embedding
and recurrent weights, zero biases, the LayerNorm and adaptive-projection options, the token
tables drawn on their own, and parameters a module owns (gate biases) kept."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from highway_transformer.config import ModelConfig
from highway_transformer.errors import ConfigError
from highway_transformer.models.init import initialize
from highway_transformer.nn.adaptive import AdaptiveInput
from highway_transformer.nn.connections import build_combiner


class Mixed(nn.Module):
    """One module of each kind the initialiser visits, plus a gate with a set bias."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(64, 64)
        self.embedding = nn.Embedding(100, 64)
        self.rnn = nn.GRU(16, 16)
        self.norm = nn.LayerNorm(64)
        self.gate = build_combiner("sdu", 64, bias=-1.5)
        self.adaptive = AdaptiveInput(100, 64, (40,), div=2.0)
        with torch.no_grad():  # nonzero, so zeroing shows
            self.norm.bias.fill_(0.3)


def _config(**fields: object) -> ModelConfig:
    return ModelConfig(**fields)  # type: ignore[arg-type]


def _weights(model: Mixed) -> dict[str, torch.Tensor]:
    rnn = [p for name, p in model.rnn.named_parameters() if name.startswith("weight")]
    return {
        "linear": model.linear.weight,
        "embedding": model.embedding.weight,
        "rnn": torch.cat([p.flatten() for p in rnn]),
        "gate": model.gate.proj.weight,
    }


def _biases(model: Mixed) -> list[torch.Tensor]:
    rnn = [p for name, p in model.rnn.named_parameters() if name.startswith("bias")]
    return [model.linear.bias, *rnn]


def test_uniform_draws_every_weight_from_plus_minus_init_range() -> None:
    torch.manual_seed(0)
    model = Mixed()
    initialize(model, _config(init="uniform", init_range=0.05))
    for name, w in _weights(model).items():
        assert w.abs().max() <= 0.05 and w.abs().max() > 0.049, name
        assert w.std().item() == pytest.approx(0.05 / 3**0.5, rel=0.05), name  # U(-a, a)
    assert all(torch.count_nonzero(b) == 0 for b in _biases(model))
    assert torch.all(model.norm.weight == 1) and torch.all(model.norm.bias == 0)


def test_normal_draws_every_weight_from_n_0_init_std() -> None:
    torch.manual_seed(0)
    model = Mixed()
    initialize(model, _config(init="normal", init_std=0.02))
    for name, w in _weights(model).items():
        assert w.mean().item() == pytest.approx(0.0, abs=0.002), name
        assert w.std().item() == pytest.approx(0.02, rel=0.05), name
    assert all(torch.count_nonzero(b) == 0 for b in _biases(model))
    assert torch.all(model.norm.weight == 1) and torch.all(model.norm.bias == 0)


def test_torch_keeps_pytorchs_own_initialisation() -> None:
    torch.manual_seed(0)
    model = Mixed()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    initialize(model, _config(init="torch"))
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    initialize(model, _config(init="torch", init_norm="normal", init_std=0.1))
    assert not torch.all(model.norm.weight == 1) and torch.all(model.norm.bias == 0)
    assert torch.equal(model.linear.weight, before["linear.weight"])  # only the LayerNorm


def test_layer_norm_weight_from_n_1_init_std_as_the_xl_code() -> None:
    torch.manual_seed(0)
    norms = nn.Sequential(*[nn.LayerNorm(256) for _ in range(8)])
    initialize(norms, _config(init="normal", init_std=0.02, init_norm="normal"))
    weights = torch.cat([n.weight for n in norms])
    assert weights.mean().item() == pytest.approx(1.0, abs=0.002)
    assert weights.std().item() == pytest.approx(0.02, rel=0.05)
    assert all(torch.count_nonzero(n.bias) == 0 for n in norms)


def test_adaptive_projections_from_n_0_init_proj_std() -> None:
    torch.manual_seed(0)
    model = Mixed()
    initialize(model, _config(init="normal", init_std=0.02, init_proj_std=0.5))
    projections = torch.cat([p.weight.flatten() for p in model.adaptive.projections])
    assert projections.std().item() == pytest.approx(0.5, rel=0.05)
    tables = torch.cat([t.weight.flatten() for t in model.adaptive.tables])
    assert tables.std().item() == pytest.approx(0.02, rel=0.05)  # the tables: the scheme
    initialize(model, _config(init="normal", init_std=0.02))  # no proj std: as the weights
    projections = torch.cat([p.weight.flatten() for p in model.adaptive.projections])
    assert projections.std().item() == pytest.approx(0.02, rel=0.05)


@pytest.mark.parametrize("init", ["uniform", "normal", "torch"])
def test_gate_biases_are_restored_by_reset_own_parameters(init: str) -> None:
    torch.manual_seed(0)
    model = Mixed()
    initialize(model, _config(init=init, init_range=0.5, init_std=0.5))
    assert torch.all(model.gate.gate_bias() == -1.5)  # b1: the configured gate bias
    assert torch.count_nonzero(model.gate.proj.bias[64:]) == 0  # b2: zero


class TokenModel(nn.Module):
    """A language model's token tables (tied) and an output bias, beside another layer."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(50, 32)
        self.output = nn.Linear(32, 50)
        self.output.weight = self.embedding.weight
        self.hidden = nn.Linear(32, 32)

    def token_tables(self) -> list[nn.Module]:
        return [self.embedding, self.output]


@pytest.mark.parametrize(("scheme", "check"), [("uniform", "range"), ("normal", "std")])
def test_init_embedding_draws_the_token_tables_alone(scheme: str, check: str) -> None:
    torch.manual_seed(0)
    model = TokenModel()
    hidden = model.hidden.weight.clone()
    initialize(model, _config(init="torch", init_embedding=scheme, init_range=0.1, init_std=0.01))
    table = model.embedding.weight
    assert table is model.output.weight
    if check == "range":
        assert table.abs().max() <= 0.1 and table.abs().max() > 0.099
    else:
        assert table.std().item() == pytest.approx(0.01, rel=0.1)
    assert torch.count_nonzero(model.output.bias) == 0
    assert torch.equal(model.hidden.weight, hidden)  # init=torch elsewhere


def test_init_embedding_without_plain_token_tables_is_a_one_line_error() -> None:
    with pytest.raises(ConfigError) as info:
        initialize(nn.Linear(4, 4), _config(init_embedding="normal"))
    assert str(info.value).startswith("model.init_embedding applies to a language model's plain")
    assert "\n" not in str(info.value)
