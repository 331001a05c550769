"""Highway Transformer gates (HT eqs. 21-31), connections and layer specs, checked by hand."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn

from highway_transformer.config import Config, GateConfig, ModelConfig
from highway_transformer.errors import ConfigError
from highway_transformer.nn import reference
from highway_transformer.nn.combiner import Residual
from highway_transformer.nn.connections import COMBINERS, Connection, build_combiner
from highway_transformer.nn.dropout import Dropout
from highway_transformer.nn.gating import LayerSpec, parse_layer_spec
from highway_transformer.nn.highway_gates import GatedSublayer, HighwayGate, SelfDependencyUnit
from highway_transformer.validation import validate

D = 5
ATOL = 1e-6
HT_GATES = {"sdu": SelfDependencyUnit, "highway": HighwayGate, "gated": GatedSublayer}


def _inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, 3, D, generator=g), torch.randn(2, 3, D, generator=g)


def _with_biases(combiner: nn.Module, seed: int = 1) -> nn.Module:
    """Give the gate nonzero biases (they start at zero) so the bias path is exercised."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        combiner.proj.bias.copy_(torch.randn(2 * D, generator=g))
    return combiner


def _parts(combiner: nn.Module) -> tuple[torch.Tensor, ...]:
    return tuple(w.detach() for w in reference.ht_gate_weights(combiner))


def _layer_norm(ln: nn.LayerNorm) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda v: reference.layer_norm(v, ln.weight.detach(), ln.bias.detach(), ln.eps)


def _sdu(combiner: nn.Module) -> reference.Combine:
    """The connection's SDU (sigmoid) from nn.reference, with the combiner's weights."""
    return lambda x, y: reference.sdu(x, y, *_parts(combiner), "sigmoid")


# ------------------------------------------------------------------ combiners by hand


@pytest.mark.parametrize("activation", ["sigmoid", "tanh"])
def test_sdu_matches_eqs_21_24(activation: str) -> None:
    torch.manual_seed(0)
    sdu = _with_biases(SelfDependencyUnit(D, activation))
    x, y = _inputs()
    expected = reference.sdu(x, y, *_parts(sdu), activation)  # X + Att(X) + SDU(X)
    with torch.no_grad():
        got = sdu(x, y)
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)
    assert not torch.allclose(got, x + y, atol=1e-3)  # the SDU term is not vanishing


def test_sigmoid_and_tanh_sdu_differ() -> None:
    torch.manual_seed(0)
    sig = _with_biases(SelfDependencyUnit(D, "sigmoid"))
    tanh = SelfDependencyUnit(D, "tanh")
    tanh.load_state_dict(sig.state_dict())
    x, y = _inputs()
    with torch.no_grad():
        assert not torch.allclose(sig(x, y), tanh(x, y), atol=1e-3)


def test_highway_gate_matches_eqs_26_29() -> None:
    torch.manual_seed(0)
    gate = _with_biases(HighwayGate(D))
    x, y = _inputs()
    expected = reference.highway_gate(x, y, *_parts(gate))  # o(X) + Att(X)
    with torch.no_grad():
        torch.testing.assert_close(gate(x, y), expected, atol=ATOL, rtol=0)


def test_gated_sublayer_matches_eqs_30_31() -> None:
    torch.manual_seed(0)
    gate = _with_biases(GatedSublayer(D))
    x, y = _inputs()
    expected = reference.gated_sublayer(x, y, *_parts(gate))  # o(X) + X
    with torch.no_grad():
        torch.testing.assert_close(gate(x, y), expected, atol=ATOL, rtol=0)


def test_residual_is_plain_sum() -> None:
    x, y = _inputs()
    assert torch.equal(Residual()(x, y), x + y)
    assert Residual().gate_bias() is None
    assert isinstance(build_combiner("none", D), Residual)


@pytest.mark.parametrize(
    ("kind", "activation"),
    [("sdu", "sigmoid"), ("sdu", "tanh"), ("highway", "sigmoid"), ("gated", "sigmoid")],
)
def test_gate_biases_start_at_zero(kind: str, activation: str) -> None:
    torch.manual_seed(0)
    combiner = build_combiner(kind, D, activation)
    assert isinstance(combiner, HT_GATES[kind])
    assert torch.count_nonzero(combiner.proj.bias) == 0
    b1 = combiner.gate_bias()
    assert b1.shape == (D,)
    assert torch.count_nonzero(b1) == 0
    # b1 is the gate half of the shared projection: a view of the learned parameter
    with torch.no_grad():
        combiner.proj.bias[:D].fill_(0.5)
    assert torch.all(combiner.gate_bias() == 0.5)
    # W1, W2 and their biases: 2d(d+1) parameters per gated sublayer (HT §3)
    assert sum(p.numel() for p in combiner.parameters()) == 2 * D * (D + 1)


@pytest.mark.parametrize("kind", ["highway", "gated"])
def test_tanh_highway_and_gated_are_rejected(kind: str) -> None:
    """HT eq. 26 and the authors' code use σ for T (their glu_type 3/4 ignore act_type)."""
    with pytest.raises(ConfigError, match="sigmoid"):
        build_combiner(kind, D, "tanh")
    with pytest.raises(ConfigError, match="sigmoid"):
        validate(Config().replace(**{"model.gate.kind": kind, "model.gate.activation": "tanh"}))


def test_unknown_activation_is_an_error() -> None:
    with pytest.raises(ConfigError, match="sigmoid"):
        SelfDependencyUnit(D, "relu")


def test_build_combiner_unknown_name_lists_choices() -> None:
    with pytest.raises(ConfigError) as info:
        build_combiner("sdv", D)
    message = str(info.value)
    for name in ("none", "sdu", "highway", "gated"):
        assert name in message
    assert "Did you mean 'sdu'" in message


# ------------------------------------------------------------------ connections by hand


def _sublayer() -> nn.Module:
    torch.manual_seed(3)
    return nn.Linear(D, D)


def _connection(norm: str, dropout: float) -> Connection:
    torch.manual_seed(0)
    conn = Connection(D, _with_biases(SelfDependencyUnit(D, "sigmoid")), norm, dropout)
    with torch.no_grad():  # a LayerNorm with non-trivial affine parameters
        conn.norm.weight.copy_(torch.linspace(0.5, 1.5, D))
        conn.norm.bias.copy_(torch.linspace(-0.2, 0.2, D))
    return conn


def test_post_ln_connection_by_hand() -> None:
    conn, sub = _connection("post", 0.0).eval(), _sublayer()
    x, _ = _inputs()
    with torch.no_grad():
        expected = reference.post_ln_connection(x, sub, _layer_norm(conn.norm), _sdu(conn.combiner))
        torch.testing.assert_close(conn(x, sub), expected, atol=1e-5, rtol=0)


def test_post_ln_connection_drops_out_the_sublayer_output() -> None:
    conn, sub = _connection("post", 0.5).train(), _sublayer()
    x, _ = _inputs()
    with torch.no_grad():
        torch.manual_seed(7)
        got = conn(x, sub)
        torch.manual_seed(7)
        dropped = Dropout(0.5).train()
        norm, combine = _layer_norm(conn.norm), _sdu(conn.combiner)
        expected = reference.post_ln_connection(x, lambda h: dropped(sub(h)), norm, combine)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    with torch.no_grad():  # dropout really acted
        no_drop = reference.post_ln_connection(x, sub, norm, combine)
    assert not torch.allclose(got, no_drop, atol=1e-3)


def test_pre_ln_connection_by_hand() -> None:
    conn, sub = _connection("pre", 0.0).eval(), _sublayer()
    x, _ = _inputs()
    with torch.no_grad():
        expected = reference.pre_ln_connection(x, sub, _layer_norm(conn.norm), _sdu(conn.combiner))
        got = conn(x, sub)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    # no normalisation on the output: the stream passes through un-normalised
    assert not torch.allclose(got.mean(-1), torch.zeros(2, 3), atol=1e-2)


def test_pre_ln_connection_with_dropout_and_context() -> None:
    conn = _connection("pre", 0.5).train()
    x, ctx = _inputs()

    def sub(h: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        return 2.0 * h + context

    with torch.no_grad():
        torch.manual_seed(11)
        got = conn(x, sub, context=ctx)
        torch.manual_seed(11)
        dropped = Dropout(0.5).train()
        expected = reference.pre_ln_connection(
            x, lambda h, c: dropped(sub(h, c)), _layer_norm(conn.norm), _sdu(conn.combiner), ctx
        )
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_unknown_norm_position() -> None:
    with pytest.raises(ConfigError, match="post"):
        Connection(D, Residual(), norm="middle")


@pytest.mark.parametrize("kind", sorted(k for k in COMBINERS if k.startswith("gtrxl")))
def test_gtrxl_gate_with_post_ln_is_rejected(kind: str) -> None:
    with pytest.raises(ConfigError, match="norm=pre"):
        Connection(D, build_combiner(kind, D), norm="post")
    Connection(D, build_combiner(kind, D), norm="pre")  # fine with pre-LN
    config = Config(model=ModelConfig(d_model=16, n_heads=2, gate=GateConfig(kind=kind)))
    with pytest.raises(ConfigError, match="norm=pre"):
        validate(config)


# ------------------------------------------------------------------ layer specs


@pytest.mark.parametrize(
    ("spec", "n_layers", "layers", "ffn"),
    [
        ("all", 3, {0, 1, 2}, True),
        ("none", 3, set(), True),
        ("1-3", 6, {0, 1, 2}, True),
        ("3-6", 6, {2, 3, 4, 5}, True),
        ("1,2", 3, {0, 1}, True),
        ("1-2,5", 6, {0, 1, 4}, True),
        ("L1-2", 3, {0, 1}, True),
        ("L1", 3, {0}, True),
        ("1-6\\FFN", 6, {0, 1, 2, 3, 4, 5}, False),
        ("all\\FFN", 2, {0, 1}, False),
    ],
)
def test_parse_layer_spec(spec: str, n_layers: int, layers: set[int], ffn: bool) -> None:
    parsed = parse_layer_spec(spec, n_layers)
    assert parsed == LayerSpec(frozenset(layers), ffn)


def test_layer_spec_gated_respects_ffn_suffix_and_sublayers() -> None:
    spec = parse_layer_spec("1-2\\FFN", 3)
    both = ("attn", "ffn")
    assert spec.gated(0, "attn", both) and spec.gated(1, "attn", both)
    assert not spec.gated(0, "ffn", both)
    assert not spec.gated(2, "attn", both)
    full = parse_layer_spec("2", 3)
    assert full.gated(1, "ffn", both) and full.gated(1, "attn", both)
    assert not full.gated(1, "attn", ("ffn",))
    assert not full.gated(0, "ffn", both)


@pytest.mark.parametrize("spec", ["1-5", "0", "3-1", "4", "1,4"])
def test_layer_spec_outside_the_model(spec: str) -> None:
    with pytest.raises(ConfigError, match="outside 1..3"):
        parse_layer_spec(spec, 3)


@pytest.mark.parametrize("spec", ["abc", "1-x", "1;2"])
def test_layer_spec_unreadable(spec: str) -> None:
    with pytest.raises(ConfigError, match="cannot read gate layer spec"):
        parse_layer_spec(spec, 3)


def test_config_validation_checks_the_layer_spec() -> None:
    model = ModelConfig(d_model=16, n_heads=2, n_layers=3, gate=GateConfig("sdu", layers="1-5"))
    with pytest.raises(ConfigError, match="outside"):
        validate(Config(model=model))
