"""One builder for every model class: registries, gate settings, initialisation, validation."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
import torch
from torch import nn

from highway_transformer.api import build_model
from highway_transformer.config import Config, GateConfig, MemoryConfig, ModelConfig, TaskConfig
from highway_transformer.errors import ConfigError
from highway_transformer.models import builders
from highway_transformer.models.builders import (
    ATTENTIONS,
    AttentionKind,
    attention_kind,
    block_layout,
)
from highway_transformer.models.encoder_decoder import EncoderDecoder
from highway_transformer.models.families import FAMILIES
from highway_transformer.models.lm import LanguageModel
from highway_transformer.models.sequence import SequenceModel
from highway_transformer.nn.attention import MultiHeadAttention
from highway_transformer.nn.combiner import Residual
from highway_transformer.nn.connections import COMBINERS
from highway_transformer.nn.highway_gates import SelfDependencyUnit, _GatedTransform
from highway_transformer.nn.relative import RelativeMultiHeadAttention
from highway_transformer.nn.scores import ScoredAttention
from highway_transformer.nn.shaw import ShawAttention
from highway_transformer.validation import check_model, validate

V = 11


@pytest.fixture
def tiny(tiny_model_config: Callable[..., ModelConfig]) -> Callable[..., ModelConfig]:
    """``tiny(**kwargs)``: the tiny model over V symbols."""
    return lambda **kwargs: tiny_model_config(**{"vocab_size": V, **kwargs})


def all_classes(config: ModelConfig, score: str = "scaled_dot") -> dict[str, nn.Module]:
    torch.manual_seed(0)
    return {
        "lm": LanguageModel(config),
        "sequence": SequenceModel(config, 3, 4),
        "encoder-decoder": EncoderDecoder(config, V, V, score=score, max_len=16),
    }


# --------------------------------------------------------------------------- gate settings


@pytest.mark.parametrize("kind", ["sdu", "highway", "gated"])
@pytest.mark.parametrize("init", ["uniform", "normal", "torch"])
def test_gate_bias_takes_effect_on_every_model_class(
    kind: str, init: str, tiny: Callable[..., ModelConfig]
) -> None:
    config = tiny(gate=GateConfig(kind=kind, bias=-1.5), init=init)
    for name, model in all_classes(config).items():
        biases = model.gate_biases()
        assert biases, name
        for bias in biases.values():
            assert torch.equal(bias, torch.full_like(bias, -1.5)), name
        for module in model.modules():  # b2 (the transform's bias) still starts at zero
            if isinstance(module, _GatedTransform):
                assert not module.proj.bias[module.d_model :].any()


def test_gate_spec_means_the_same_in_every_model_class(tiny: Callable[..., ModelConfig]) -> None:
    config = tiny(gate=GateConfig(kind="sdu", layers="2", sublayers=("attn",)))
    for name, model in all_classes(config).items():
        stacks = [model.encoder, model.decoder] if name == "encoder-decoder" else [model.blocks]
        for blocks in stacks:
            for layer, block in enumerate(blocks):
                for kind, connection in zip(block.kinds, block.connections, strict=True):
                    gated = layer == 1 and kind in ("attn", "cross")
                    assert isinstance(connection.combiner, SelfDependencyUnit) == gated, (
                        name,
                        layer,
                        kind,
                    )
                    if not gated:
                        assert isinstance(connection.combiner, Residual)


def test_decoder_layer_is_self_attention_cross_attention_ffn(
    tiny: Callable[..., ModelConfig],
) -> None:
    assert block_layout(tiny(), cross=True) == ["attn", "cross", "ffn"]
    rt = tiny(family="rtransformer")
    assert block_layout(rt, cross=True) == ["rnn", "attn", "cross", "ffn"]


def test_decoder_block_equals_its_oracle(tiny: Callable[..., ModelConfig]) -> None:
    """A post-LN decoder block: LN(x + SA(x)), LN(x + CA(x, enc)), LN(x + FFN(x))."""
    config = tiny(family="transformer", n_layers=1)
    torch.manual_seed(1)
    model = EncoderDecoder(config, V, V, score="general", max_len=16).eval()
    block = model.decoder[0]
    x, enc = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[1, 4:] = True
    attn, cross, ffn = block.sublayers
    norms = [c.norm for c in block.connections]
    h = norms[0](x + ScoredAttention.forward(attn, x, None, causal=True))
    h = norms[1](h + ScoredAttention.forward(cross, h, enc, key_padding_mask=pad))
    expected = norms[2](h + ffn.fc2(ffn.fc1(h).relu()))
    got = block(x, encoder=enc, encoder_padding=pad)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)


# --------------------------------------------------------------------------- initialisation


@pytest.mark.parametrize("untie_r", [False, True])
def test_xl_u_v_are_left_to_their_module(untie_r: bool, tiny: Callable[..., ModelConfig]) -> None:
    """Type-based initialisation never touches u/v: the same seed gives the same u/v under
    every scheme, drawn by the module holding them (N(0, 0.02)), not by the scheme: the
    model's shared pair, or each attention layer's own with untie_r."""
    config = tiny(family="xl", memory=MemoryConfig(mem_len=4), untie_r=untie_r)
    us = []
    for init in ("uniform", "normal", "torch"):
        torch.manual_seed(3)
        model = build_model(dataclasses.replace(config, init=init, init_range=1.0, init_std=5.0))
        attn = [m for m in model.modules() if isinstance(m, RelativeMultiHeadAttention)]
        assert attn and all((a.r_w_bias is not None) == untie_r for a in attn)
        biases = [p for n, p in model.named_parameters() if n.endswith(("r_w_bias", "r_r_bias"))]
        assert len(biases) == (2 * len(attn) if untie_r else 2)
        us.append(torch.cat([b.flatten() for b in biases]))
        assert us[-1].abs().max() < 0.15  # not U(-1, 1) nor N(0, 5)
    assert torch.equal(us[0], us[1]) and torch.equal(us[0], us[2])


def test_shaw_edges_and_score_parameters_survive_build(tiny: Callable[..., ModelConfig]) -> None:
    torch.manual_seed(0)
    model = build_model(tiny(attention="shaw", shaw_clip=8, init="normal", init_std=5.0))
    shaw = [m for m in model.modules() if isinstance(m, ShawAttention)]
    assert shaw
    for module in shaw:
        assert module.rel_k.weight.std() < 1.5  # their own N(0, d_head^-1/2), not N(0, 5)
        assert module.qkv.weight.std() > 2.0  # the projections follow the scheme
    ed = EncoderDecoder(tiny(init="uniform", init_range=0.5), V, V, score="general")
    general = [m for m in ed.modules() if isinstance(m, ScoredAttention)]
    for module in general:
        assert torch.equal(module.w_general, torch.eye(8).expand_as(module.w_general))


def test_transformer_xl_reference_initialisation(tiny: Callable[..., ModelConfig]) -> None:
    """XL code (train.py weights_init): Linear/Embedding N(0, 0.02), biases 0, adaptive
    projections N(0, proj_init_std = 0.01), LayerNorm weight N(1, 0.02)."""
    config = tiny(
        family="xl",
        d_model=64,
        vocab_size=2000,
        adaptive_cutoffs=(500, 1000),
        adaptive_div=2.0,
        tie_weights=False,
        init="normal",
        init_std=0.02,
        init_proj_std=0.01,
        init_norm="normal",
    )
    torch.manual_seed(0)
    model = build_model(config)
    ffn = model.blocks[0].sublayers[1]
    assert abs(ffn.fc1.weight.std().item() - 0.02) < 0.002
    assert not ffn.fc1.bias.any()
    norms = [m for m in model.modules() if isinstance(m, nn.LayerNorm)]
    weights = torch.cat([n.weight for n in norms])
    assert abs(weights.mean().item() - 1.0) < 0.005 and abs(weights.std().item() - 0.02) < 0.004
    assert all(not n.bias.any() for n in norms)
    projections = torch.cat([p.weight.flatten() for p in model.embedding.projections])
    assert abs(projections.std().item() - 0.01) < 0.001
    tail = torch.cat([p.weight.flatten() for p in model.output.projections])
    assert abs(tail.std().item() - 0.01) < 0.001
    default = build_model(dataclasses.replace(config, init_proj_std=None, init_norm="ones"))
    assert all(torch.equal(n.weight, torch.ones_like(n.weight)) for n in default.modules()
               if isinstance(n, nn.LayerNorm))  # fmt: skip
    assert abs(default.embedding.projections[1].weight.std().item() - 0.02) < 0.002


def test_xl_presets_use_the_reference_initialisation() -> None:
    from highway_transformer.presets import PRESETS, get_preset

    xl = [get_preset(n).model for n in PRESETS if get_preset(n).model.family == "xl"]
    assert xl
    for model in xl:
        assert (model.init, model.init_std, model.init_proj_std, model.init_norm) == (
            "normal",
            0.02,
            0.01,
            "normal",
        )


# --------------------------------------------------------------------------- families, validation


def test_family_xl_alone_means_relative_attention_with_memory() -> None:
    config = Config().replace(**{"model.family": "xl", "model.memory.mem_len": 4})
    validate(config)
    assert attention_kind(config.model) == "relative"
    model = build_model(dataclasses.replace(config.model, vocab_size=V, d_model=16, n_heads=2))
    assert model.uses_memory
    assert not any(isinstance(m, MultiHeadAttention) for m in model.modules())
    _, memory = model(torch.randint(0, V, (2, 3)))
    assert memory is not None and memory[0].shape[1] == 3


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"model.family": "lstm"}, "unknown model family 'lstm'"),
        ({"model.family": "xl", "model.attention": "dot"}, "model.family=xl takes"),
        ({"model.family": "rtransformer", "model.attention": "shaw"}, "rtransformer takes"),
        ({"model.attention": "relative"}, "model.family=transformer takes"),
        ({"model.attention": "local"}, "unknown attention"),
        ({"model.memory.mem_len": 64}, "model.memory.mem_len applies to model.family=xl"),
        ({"model.memory.eval_same_length": True}, "eval_same_length applies"),
        ({"model.init_norm": "zeros"}, "LayerNorm initialisation"),
        ({"model.init": "torch", "model.init_proj_std": 0.01}, "init_proj_std needs"),
        ({"model.gate.sublayers": "cross"}, "gated sublayer kind"),
        ({"model.local_rnn.cell": "transformer"}, "local RNN cell"),
        ({"model.gate.activation": "relu"}, "gate activation"),
        ({"model.gate.kind": "gtrxl-gru"}, "model.norm=pre"),
        ({"task.pooling": "max"}, "task.pooling"),
    ],
)
def test_bad_model_settings_are_one_line_config_errors(overrides: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as error:
        validate(Config().replace(**overrides))
    assert "\n" not in str(error.value)


def test_hand_made_model_configs_are_checked_at_the_boundary(
    tiny: Callable[..., ModelConfig],
) -> None:
    """``build_model`` validates; a task's model is validated with the task's config (by the
    trainer, or ``validate``), and its constructor checks only its own arguments."""
    with pytest.raises(ConfigError, match="unknown model family"):
        build_model(tiny(family="lstm"))
    with pytest.raises(ConfigError, match="mem_len applies"):
        validate(Config(model=tiny(memory=MemoryConfig(mem_len=3))))
    with pytest.raises(ConfigError, match="task.name=copy has no segment memory"):
        validate(Config(model=tiny(memory=MemoryConfig(mem_len=3)), task=TaskConfig(name="copy")))
    with pytest.raises(ConfigError, match="encoder-decoder supports"):
        EncoderDecoder(tiny(family="xl"), V, V)


def test_pre_ln_only_gates_are_found_by_their_class_flag(
    monkeypatch, tiny: Callable[..., ModelConfig]
) -> None:
    class PreOnly(Residual):
        pre_ln_only = True

    monkeypatch.setitem(COMBINERS, "mine", PreOnly)
    with pytest.raises(ConfigError, match="mine gate needs"):
        check_model(tiny(gate=GateConfig(kind="mine")))
    check_model(tiny(gate=GateConfig(kind="mine"), norm="pre"))


def test_a_new_attention_kind_is_one_registry_entry_and_its_name(
    monkeypatch, tiny: Callable[..., ModelConfig]
) -> None:
    from highway_transformer.config import names

    built = []

    def build(config: ModelConfig, causal: bool) -> nn.Module:
        built.append(causal)
        return MultiHeadAttention(config.d_model, config.n_heads, causal=causal)

    monkeypatch.setitem(ATTENTIONS, "mine", AttentionKind(build, absolute_positions=False))
    monkeypatch.setattr(names, "ATTENTION_NAMES", (*names.ATTENTION_NAMES, "mine"))
    family = dataclasses.replace(FAMILIES["transformer"], attentions=("dot", "mine"))
    monkeypatch.setitem(FAMILIES, "transformer", family)
    model = build_model(tiny(attention="mine"))
    # every layer's attention from the entry: counted on the meta device, then built
    assert built == [True, True] * 2 and model.positional is None
    SequenceModel(tiny(), 2, 2)  # the others are unaffected
    assert builders.uses_absolute_positions(tiny())


def test_init_embedding_draws_only_the_token_tables() -> None:
    """``init=torch`` + ``init_embedding``: the RT language code's initialisation (PyTorch's
    defaults, the tied token table from U(-0.1, 0.1) and a zero output bias)."""
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=50, d_model=32, n_layers=1, n_heads=2, d_inner=64, init="torch",
        init_embedding="uniform", init_range=0.1, tie_weights=True,
    )  # fmt: skip
    model = build_model(config)
    table = model.embedding.weight
    assert table is model.output.weight and table.abs().max() <= 0.1
    assert table.std() > 0.05  # U(-0.1, 0.1) has std 0.058, PyTorch's N(0, 1) embedding 1
    assert torch.count_nonzero(model.output.bias) == 0
    first = next(
        m for m in model.modules() if isinstance(m, torch.nn.Linear) and m is not model.output
    )
    assert torch.count_nonzero(first.bias) > 0  # PyTorch's default elsewhere
    normal = build_model(dataclasses.replace(config, init_embedding="normal", init_std=0.01))
    assert abs(normal.embedding.weight.std().item() - 0.01) < 0.002


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"init_embedding": "xavier"}, "token table initialisation"),
        ({"init_embedding": "uniform", "adaptive_cutoffs": (20,)}, "init_embedding"),
    ],
)
def test_init_embedding_bad_settings_are_one_line_errors(change: dict, message: str) -> None:
    config = ModelConfig(vocab_size=50, d_model=32, n_layers=1, n_heads=2, d_inner=64)
    with pytest.raises(ConfigError, match=message):
        build_model(dataclasses.replace(config, **change))


def test_init_embedding_is_refused_by_a_model_without_token_tables() -> None:
    config = ModelConfig(d_model=32, n_layers=1, n_heads=2, d_inner=64, init_embedding="normal")
    with pytest.raises(ConfigError, match="init_embedding applies to a language model"):
        SequenceModel(config, 3, 4)
