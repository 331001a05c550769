"""One builder for every model class: the registries of attention kinds and sublayers.

The language model, the sequence model and the encoder-decoder all build their blocks here,
so a gate setting (``model.gate.*``) means the same thing in each of them:

* :data:`ATTENTIONS`: what ``model.attention`` builds (a new kind is one entry here);
* :data:`SUBLAYERS`: the sublayer kinds of a :class:`~highway_transformer.nn.block.Block`
  (self-attention, encoder-decoder attention, FFN, LocalRNN) and which
  ``model.gate.sublayers`` entry gates each of them.

What a family is (its block layout, memory, ``auto`` settings) is its record in
:mod:`~highway_transformer.models.families`. Builders take a validated config
(:mod:`highway_transformer.validation` checks it once, at the boundary); they check nothing
again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

from ..config import ModelConfig
from ..errors import ConfigError
from ..nn.attention import MultiHeadAttention
from ..nn.block import FFN_SUBLAYERS, AttentionSublayer, Block, LocalRNNSublayer
from ..nn.connections import Connection, build_combiner
from ..nn.layer_spec import parse_layer_spec
from ..nn.local_rnn import LocalRNN
from ..nn.norms import build_norm
from ..nn.relative import RelativeMultiHeadAttention
from ..nn.scores import CrossAttention, ScoredSelfAttention
from ..nn.shaw import ShawAttention
from .families import attention_kind, block_layout, family_of, has_final_norm

# --------------------------------------------------------------------------- attention kinds


@dataclass(frozen=True)
class AttentionKind:
    """What ``model.attention`` builds: ``build(config, causal) -> module``."""

    build: Callable[[ModelConfig, bool], nn.Module]
    absolute_positions: bool  # False where the attention itself encodes positions


def _dot(config: ModelConfig, causal: bool) -> nn.Module:
    return MultiHeadAttention(
        config.d_model,
        config.n_heads,
        config.d_head,
        config.dropout_attn,
        causal=causal,
        rope_theta=config.rope_theta if config.positional == "rope" else None,
        bias=config.bias,
        output_gate=config.attn_output_gate,
    )


def _relative(config: ModelConfig, causal: bool) -> nn.Module:
    # u / v: the layer's own with untie_r, otherwise one pair held by the model (XL code).
    return RelativeMultiHeadAttention(
        config.d_model,
        config.n_heads,
        config.head_dim,
        config.dropout_attn,
        own_biases=config.untie_r,
        kernel=config.attention_kernel,
        output_gate=config.attn_output_gate,
        gate_bias=config.bias,
    )


def _shaw(config: ModelConfig, causal: bool) -> nn.Module:
    if config.d_head is not None and config.d_head * config.n_heads != config.d_model:
        raise ConfigError("Shaw attention needs d_head * n_heads == d_model")
    return ShawAttention(
        config.d_model,
        config.n_heads,
        config.shaw_clip,
        config.dropout_attn,
        causal=causal,
        bias=config.bias,
        output_gate=config.attn_output_gate,
    )


ATTENTIONS: dict[str, AttentionKind] = {
    "dot": AttentionKind(_dot, absolute_positions=True),
    "relative": AttentionKind(_relative, absolute_positions=False),
    "shaw": AttentionKind(_shaw, absolute_positions=False),
}


def uses_absolute_positions(config: ModelConfig) -> bool:
    """Whether sinusoidal encodings are added to the input (HT eq. 4)."""
    return (
        config.positional == "sinusoidal"
        and family_of(config).absolute_positions
        and ATTENTIONS[attention_kind(config)].absolute_positions
    )


# --------------------------------------------------------------------------- sublayers


@dataclass(frozen=True)
class Site:
    """Where a sublayer is built: the model config, its 0-based layer and the model class's
    facts (causal masking; the encoder-decoder's score function and longest input)."""

    config: ModelConfig
    layer: int
    causal: bool = True
    score: str | None = None  # encoder-decoder: ScoredAttention with this score function
    max_len: int = 0


@dataclass(frozen=True)
class SublayerKind:
    build: Callable[[Site], nn.Module]
    gate_as: str  # the model.gate.sublayers entry that gates this kind


def _scored_args(site: Site) -> dict:
    c = site.config
    return {
        "d_model": c.d_model,
        "n_heads": c.n_heads,
        "score": site.score,
        "d_head": c.d_head,
        "dropout_attn": c.dropout_attn,
        "max_len": site.max_len,
    }


def _self_attention(site: Site) -> nn.Module:
    if site.score is not None:
        return ScoredSelfAttention(causal=site.causal, **_scored_args(site))
    kind = attention_kind(site.config)
    return AttentionSublayer(ATTENTIONS[kind].build(site.config, site.causal))


def _cross_attention(site: Site) -> nn.Module:
    if site.score is None:
        raise ConfigError("encoder-decoder attention needs a score function (task.score)")
    return CrossAttention(**_scored_args(site))


def _ffn(site: Site) -> nn.Module:
    c = site.config
    return FFN_SUBLAYERS[c.ffn](c.d_model, c.d_inner, c.dropout, c.bias)


def _rnn(site: Site) -> nn.Module:
    c = site.config
    rnn = LocalRNN(c.d_model, c.local_rnn.window, c.local_rnn.cell)
    return LocalRNNSublayer(rnn, c.d_model, c.local_rnn.linear_relu)


SUBLAYERS: dict[str, SublayerKind] = {
    "attn": SublayerKind(_self_attention, "attn"),
    # Encoder-decoder attention is gated as attention: the layer spec numbers decoder layers.
    "cross": SublayerKind(_cross_attention, "attn"),
    "ffn": SublayerKind(_ffn, "ffn"),
    "rnn": SublayerKind(_rnn, "rnn"),
}

#: The values model.gate.sublayers accepts.
GATEABLE = tuple(dict.fromkeys(kind.gate_as for kind in SUBLAYERS.values()))


def build_connection(config: ModelConfig, layer: int, kind: str) -> Connection:
    """The connection of sublayer ``kind`` of 0-based ``layer``: gated where the spec says."""
    spec = parse_layer_spec(config.gate.layers, config.n_layers)
    gated = spec.gated(layer, SUBLAYERS[kind].gate_as, tuple(config.gate.sublayers))
    combiner = build_combiner(
        config.gate.kind if gated else "none",
        config.d_model,
        config.gate.activation,
        config.gate.bias,
    )
    return Connection(
        config.d_model, combiner, config.norm, config.dropout, config.layer_norm, config.bias
    )


def build_block(
    config: ModelConfig,
    layer: int,
    *,
    causal: bool = True,
    cross: bool = False,
    score: str | None = None,
    max_len: int = 0,
) -> Block:
    """Block ``layer`` (0-based) of any model class: sublayers plus their connections."""
    site = Site(config, layer, causal, score, max_len)
    kinds = block_layout(config, cross)
    sublayers = [SUBLAYERS[kind].build(site) for kind in kinds]
    connections = [build_connection(config, layer, kind) for kind in kinds]
    return Block(kinds, sublayers, connections)


def build_blocks(
    config: ModelConfig,
    *,
    causal: bool = True,
    cross: bool = False,
    score: str | None = None,
    max_len: int = 0,
) -> nn.ModuleList:
    """``config.n_layers`` blocks of a validated config (the arguments as for
    :func:`build_block`)."""
    return nn.ModuleList(
        build_block(config, i, causal=causal, cross=cross, score=score, max_len=max_len)
        for i in range(config.n_layers)
    )


def final_norm(config: ModelConfig) -> nn.Module:
    """The LayerNorm after the last block where ``model.final_norm`` resolves to one (auto: a
    pre-LN stack outside the XL and RT families, whose reference code has none)."""
    if not has_final_norm(config):
        return nn.Identity()
    return build_norm(config.layer_norm, config.d_model, config.bias)
