"""The SDU-gated Transformer language model: causality, gate placement, init, KV cache."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn

from highway_transformer.api import build_model
from highway_transformer.config import GateConfig, MemoryConfig, ModelConfig
from highway_transformer.errors import ConfigError
from highway_transformer.models.lm import LanguageModel
from highway_transformer.nn.combiner import Residual
from highway_transformer.nn.connections import COMBINERS
from highway_transformer.nn.highway_gates import SelfDependencyUnit

V = 13
D = 16


@pytest.fixture
def lm_model_config(tiny_model_config: Callable[..., ModelConfig]) -> Callable[..., ModelConfig]:
    """``lm_model_config(**overrides)``: the tiny model over V symbols, dropout 0.1 on the
    sublayer outputs (none on the attention weights)."""
    base = {"vocab_size": V, "d_model": D, "dropout": 0.1, "dropout_attn": 0.0}
    return lambda **overrides: tiny_model_config(**{**base, **overrides})


@pytest.fixture
def lm_model(lm_model_config: Callable[..., ModelConfig]) -> Callable[..., LanguageModel]:
    """``lm_model(seed=0, **overrides)``: the model of :func:`lm_model_config`, evaluating."""

    def build(seed: int = 0, **overrides: object) -> LanguageModel:
        torch.manual_seed(seed)
        return build_model(lm_model_config(**overrides)).eval()

    return build


def _tokens(batch: int = 2, length: int = 9, seed: int = 5) -> torch.Tensor:
    return torch.randint(0, V, (batch, length), generator=torch.Generator().manual_seed(seed))


def _logits(model: LanguageModel, tokens: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        hidden, _ = model(tokens)
        return model.logits(hidden)


GATE_NORMS = [
    (kind, norm)
    for kind in sorted(COMBINERS)
    for norm in ("post", "pre")
    if not (kind.startswith("gtrxl") and norm == "post")
]


@pytest.mark.parametrize(("kind", "norm"), GATE_NORMS)
def test_causal_for_every_gate_and_norm(
    kind: str, norm: str, lm_model: Callable[..., LanguageModel]
) -> None:
    model = lm_model(norm=norm, gate=GateConfig(kind=kind))
    tokens = _tokens()
    base = _logits(model, tokens)
    for t in range(tokens.shape[1] - 1):
        changed = tokens.clone()
        changed[:, t + 1] = (changed[:, t + 1] + 1) % V
        logits = _logits(model, changed)
        assert torch.equal(logits[:, : t + 1], base[:, : t + 1]), f"position {t} saw t+1"
        assert not torch.equal(logits[:, t + 1], base[:, t + 1])  # the change is visible


def test_gates_none_equals_plain_model_exactly(lm_model: Callable[..., LanguageModel]) -> None:
    tokens = _tokens()
    plain = lm_model(seed=3, gate=GateConfig(kind="none"))
    no_layers = lm_model(seed=3, gate=GateConfig(kind="sdu", layers="none"))
    assert not any(isinstance(m, SelfDependencyUnit) for m in no_layers.modules())
    assert plain.num_parameters() == no_layers.num_parameters()
    assert torch.equal(_logits(plain, tokens), _logits(no_layers, tokens))
    for (name_a, a), (name_b, b) in zip(
        plain.state_dict().items(), no_layers.state_dict().items(), strict=True
    ):
        assert name_a == name_b and torch.equal(a, b)
    gated = lm_model(seed=3, gate=GateConfig(kind="sdu"))
    assert not torch.equal(_logits(gated, tokens), _logits(plain, tokens))


def test_gate_bias_names_all_layers(lm_model: Callable[..., LanguageModel]) -> None:
    model = lm_model(gate=GateConfig(kind="sdu"))
    biases = model.gate_biases()
    assert sorted(biases) == ["layer1.attn", "layer1.ffn", "layer2.attn", "layer2.ffn"]
    for bias in biases.values():
        assert bias.shape == (D,) and torch.count_nonzero(bias) == 0


def test_gate_biases_without_ffn_gates(lm_model: Callable[..., LanguageModel]) -> None:
    model = lm_model(n_layers=3, gate=GateConfig(kind="highway", layers="1-2\\FFN"))
    assert sorted(model.gate_biases()) == ["layer1.attn", "layer2.attn"]
    for block in model.blocks:
        ffn = block.connections[block.kinds.index("ffn")]
        assert isinstance(ffn.combiner, Residual)
    assert lm_model(gate=GateConfig(kind="none")).gate_biases() == {}


def test_gates_only_on_the_named_layers(lm_model: Callable[..., LanguageModel]) -> None:
    model = lm_model(n_layers=3, gate=GateConfig(kind="sdu", layers="2"))
    per_block = [
        sum(isinstance(c.combiner, SelfDependencyUnit) for c in block.connections)
        for block in model.blocks
    ]
    assert per_block == [0, 2, 0]
    assert sum(isinstance(m, SelfDependencyUnit) for m in model.modules()) == 2
    assert sorted(model.gate_biases()) == ["layer2.attn", "layer2.ffn"]
    plain = lm_model(n_layers=3, gate=GateConfig(kind="none"))
    assert model.num_parameters() - plain.num_parameters() == 2 * 2 * D * (D + 1)


def test_gated_sublayer_kinds_filter(lm_model: Callable[..., LanguageModel]) -> None:
    model = lm_model(gate=GateConfig(kind="sdu", sublayers=("ffn",)))
    assert sorted(model.gate_biases()) == ["layer1.ffn", "layer2.ffn"]


def test_weight_tying(lm_model: Callable[..., LanguageModel]) -> None:
    tied = lm_model(tie_weights=True)
    assert tied.output.weight is tied.embedding.weight
    untied = lm_model(tie_weights=False)
    assert untied.output.weight is not untied.embedding.weight
    assert untied.num_parameters() - tied.num_parameters() == V * D
    # gradients from the output layer reach the shared embedding matrix
    tied.train()
    hidden, _ = tied(_tokens())
    tied.logits(hidden).sum().backward()
    assert tied.embedding.weight.grad is not None


def _split_params(model: nn.Module):
    norm_ids = {
        id(p) for m in model.modules() if isinstance(m, nn.LayerNorm) for p in m.parameters()
    }
    weights, biases = [], []
    for name, p in model.named_parameters():
        if id(p) in norm_ids:
            continue
        (biases if name.endswith("bias") else weights).append((name, p.detach()))
    norms = [m for m in model.modules() if isinstance(m, nn.LayerNorm)]
    return weights, biases, norms


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_uniform_init(norm: str, lm_model: Callable[..., LanguageModel]) -> None:
    model = lm_model(norm=norm, init="uniform", init_range=0.05, gate=GateConfig(kind="sdu"))
    weights, biases, norms = _split_params(model)
    assert weights and biases and norms
    for name, w in weights:
        assert w.abs().max() <= 0.05, name
        assert w.abs().max() > 0.04, name  # really drawn from the whole range
    for name, b in biases:
        assert torch.count_nonzero(b) == 0, name
    for ln in norms:
        assert torch.all(ln.weight == 1) and torch.all(ln.bias == 0)


def test_normal_init(lm_model: Callable[..., LanguageModel]) -> None:
    model = lm_model(init="normal", init_std=0.02, d_model=32, d_inner=64)
    weights, biases, norms = _split_params(model)
    ffn = model.blocks[0].sublayers[1].fc1.weight.detach()
    assert ffn.std().item() == pytest.approx(0.02, rel=0.15)
    assert all(torch.count_nonzero(b) == 0 for _, b in biases)
    assert all(torch.all(ln.weight == 1) for ln in norms)


def test_torch_init_keeps_defaults_but_gate_biases_zero(
    lm_model: Callable[..., LanguageModel],
) -> None:
    model = lm_model(init="torch", gate=GateConfig(kind="sdu"))
    qkv_bias = model.blocks[0].sublayers[0].attention.qkv.bias
    assert torch.count_nonzero(qkv_bias) > 0  # PyTorch default, untouched
    assert all(torch.count_nonzero(b) == 0 for b in model.gate_biases().values())


def test_missing_vocab_size(lm_model_config: Callable[..., ModelConfig]) -> None:
    with pytest.raises(ConfigError, match="vocab_size"):
        build_model(lm_model_config(vocab_size=0))


@pytest.mark.parametrize(
    ("norm", "kind"), [("post", "none"), ("post", "sdu"), ("pre", "gated"), ("pre", "gtrxl-gru")]
)
def test_kv_cache_incremental_decoding(
    norm: str, kind: str, lm_model: Callable[..., LanguageModel]
) -> None:
    model = lm_model(norm=norm, gate=GateConfig(kind=kind))
    assert model.supports_cache
    tokens = _tokens(length=10)
    with torch.no_grad():
        full, memory = model(tokens)
        assert memory is None
        state = model.new_state()
        one_by_one = torch.cat([model(tokens[:, i : i + 1], state=state)[0] for i in range(10)], 1)
        assert state.position == 10
        state = model.new_state()
        chunks = [(0, 4), (4, 5), (5, 10)]
        chunked = torch.cat([model(tokens[:, a:b], state=state)[0] for a, b in chunks], 1)
    torch.testing.assert_close(one_by_one, full, atol=1e-5, rtol=0)
    torch.testing.assert_close(chunked, full, atol=1e-5, rtol=0)
    assert state.layers[0][0]["kv"].length == 10


def test_bf16_autocast_forward_is_finite(lm_model: Callable[..., LanguageModel]) -> None:
    model = lm_model(gate=GateConfig(kind="sdu", activation="tanh"))
    tokens = _tokens()
    reference = _logits(model, tokens)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        hidden, _ = model(tokens)
        logits = model.logits(hidden)
        nll = model.token_nll(hidden, tokens)
    assert logits.dtype == torch.bfloat16
    assert torch.isfinite(logits.float()).all() and torch.isfinite(nll).all()
    assert nll.dtype == torch.float32
    torch.testing.assert_close(logits.float(), reference, atol=0.15, rtol=0.05)


def test_token_nll_ignores_padding(lm_model: Callable[..., LanguageModel]) -> None:
    model = lm_model()
    tokens = _tokens()
    targets = tokens.clone()
    targets[:, -3:] = -100
    with torch.no_grad():
        hidden, _ = model(tokens)
        nll = model.token_nll(hidden, targets)
    assert nll.shape == tokens.shape
    assert torch.all(nll[:, -3:] == 0) and torch.all(nll[:, :-3] > 0)


def test_gate_bias_option_sets_initial_b1() -> None:
    config = ModelConfig(
        vocab_size=11,
        d_model=8,
        n_layers=2,
        n_heads=2,
        d_inner=16,
        gate=GateConfig(kind="sdu", bias=-1.5),
    )
    model = LanguageModel(config)
    biases = model.gate_biases()
    assert len(biases) == 4
    assert all(torch.all(b == -1.5) for b in biases.values())


@pytest.mark.parametrize(
    ("family", "attention", "kind", "norm"),
    [
        ("transformer", "dot", "sdu", "post"),
        ("transformer", "shaw", "none", "pre"),
        ("rtransformer", "dot", "gtrxl-gru", "pre"),
        ("xl", "relative", "highway", "pre"),
    ],
)
def test_scoring_the_last_positions_skips_only_work_nothing_reads(
    tiny_stack_config: Callable[..., ModelConfig],
    family: str,
    attention: str,
    kind: str,
    norm: str,
) -> None:
    """With targets for the last T positions the last block's FFN runs on those alone: the
    loss, every gradient, the hidden states and the XL memory equal the whole window's
    forward sliced afterwards (fp64, 1e-12)."""
    memory_len = {"memory": MemoryConfig(mem_len=5)} if family == "xl" else {}
    config = tiny_stack_config(family, kind, norm, vocab_size=V, attention=attention, **memory_len)
    torch.manual_seed(0)
    model = build_model(config).double().train()
    tokens, targets = _tokens(length=9), _tokens(length=4, seed=6)
    targets[0, 0] = -100
    memory = None
    if family == "xl":
        with torch.no_grad():
            _, memory = model(_tokens(length=5, seed=7))
        assert memory is not None
    parameters = list(model.parameters())
    ffn_lengths: list[int] = []  # positions the last block's FFN ran on, call by call
    model.blocks[-1].sublayers[-1].register_forward_hook(
        lambda module, args, out: ffn_lengths.append(args[0].shape[1])
    )

    hidden, whole_memory = model(tokens, memory=memory)
    scored = hidden[:, -4:]
    expected = model.token_nll(scored, targets).sum()
    expected_grads = torch.autograd.grad(expected, parameters, allow_unused=True)
    got = model(tokens, memory=memory, targets=targets, reduction="sum")
    got_grads = torch.autograd.grad(got.loss, parameters, allow_unused=True)

    assert ffn_lengths == [9, 4]
    torch.testing.assert_close(got.loss, expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got.hidden, scored, rtol=1e-12, atol=1e-12)
    for mine, theirs in zip(got_grads, expected_grads, strict=True):
        assert (mine is None) == (theirs is None)
        if mine is not None:
            torch.testing.assert_close(mine, theirs, rtol=1e-12, atol=1e-12)
    if family == "xl":
        for mine, theirs in zip(got.memory, whole_memory, strict=True):
            torch.testing.assert_close(mine, theirs, rtol=0, atol=0)
