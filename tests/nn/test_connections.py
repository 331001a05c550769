"""Connections (HT eqs. 7-9 with a gate): post-LN and pre-LN by hand against
:mod:`highway_transformer.nn.reference`, dropout on the sublayer output, the combiner
registry and its one-line errors."""

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
from highway_transformer.nn.highway_gates import SelfDependencyUnit
from highway_transformer.validation import validate

D = 5


def _inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, 3, D, generator=g), torch.randn(2, 3, D, generator=g)


def _layer_norm(ln: nn.LayerNorm) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda v: reference.layer_norm(v, ln.weight.detach(), ln.bias.detach(), ln.eps)


def _sdu(combiner: nn.Module) -> reference.Combine:
    """The connection's SDU (sigmoid) from nn.reference, with the combiner's weights."""
    parts = tuple(w.detach() for w in reference.ht_gate_weights(combiner))
    return lambda x, y: reference.sdu(x, y, *parts, "sigmoid")


def test_residual_is_plain_sum() -> None:
    x, y = _inputs()
    assert torch.equal(Residual()(x, y), x + y)
    assert Residual().gate_bias() is None
    assert isinstance(build_combiner("none", D), Residual)


def test_build_combiner_unknown_name_lists_choices() -> None:
    with pytest.raises(ConfigError) as info:
        build_combiner("sdv", D)
    message = str(info.value)
    for name in ("none", "sdu", "highway", "gated"):
        assert name in message
    assert "Did you mean 'sdu'" in message


def _sublayer() -> nn.Module:
    torch.manual_seed(3)
    return nn.Linear(D, D)


@pytest.fixture
def sdu_connection(
    with_gate_biases: Callable[..., nn.Module],
) -> Callable[[str, float], Connection]:
    """``sdu_connection(norm, dropout)``: a σ-SDU connection with nonzero gate biases and a
    LayerNorm with non-trivial affine parameters."""

    def connection(norm: str, dropout: float) -> Connection:
        torch.manual_seed(0)
        conn = Connection(D, with_gate_biases(SelfDependencyUnit(D, "sigmoid")), norm, dropout)
        with torch.no_grad():  # a LayerNorm with non-trivial affine parameters
            conn.norm.weight.copy_(torch.linspace(0.5, 1.5, D))
            conn.norm.bias.copy_(torch.linspace(-0.2, 0.2, D))
        return conn

    return connection


def test_post_ln_connection_by_hand(sdu_connection: Callable[[str, float], Connection]) -> None:
    conn, sub = sdu_connection("post", 0.0).eval(), _sublayer()
    x, _ = _inputs()
    with torch.no_grad():
        expected = reference.post_ln_connection(x, sub, _layer_norm(conn.norm), _sdu(conn.combiner))
        torch.testing.assert_close(conn(x, sub), expected, atol=1e-5, rtol=0)


def test_post_ln_connection_drops_out_the_sublayer_output(
    sdu_connection: Callable[[str, float], Connection],
) -> None:
    conn, sub = sdu_connection("post", 0.5).train(), _sublayer()
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


def test_pre_ln_connection_by_hand(sdu_connection: Callable[[str, float], Connection]) -> None:
    conn, sub = sdu_connection("pre", 0.0).eval(), _sublayer()
    x, _ = _inputs()
    with torch.no_grad():
        expected = reference.pre_ln_connection(x, sub, _layer_norm(conn.norm), _sdu(conn.combiner))
        got = conn(x, sub)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    # no normalisation on the output: the stream passes through un-normalised
    assert not torch.allclose(got.mean(-1), torch.zeros(2, 3), atol=1e-2)


def test_pre_ln_connection_with_dropout_and_context(
    sdu_connection: Callable[[str, float], Connection],
) -> None:
    conn = sdu_connection("pre", 0.5).train()
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
