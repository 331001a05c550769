"""One builder for every model class: the registries of families, attention kinds and sublayers.

The language model, the sequence model and the encoder-decoder all build their blocks here,
so a gate setting (``model.gate.*``) means the same thing in each of them:

* :data:`FAMILIES`: what ``model.family`` means (block layout, accepted attention kinds,
  segment memory, whether the input may get absolute position encodings);
* :data:`ATTENTIONS`: what ``model.attention`` builds (a new kind is one entry here);
* :data:`SUBLAYERS`: the sublayer kinds of a :class:`~highway_transformer.nn.block.Block`
  (self-attention, encoder-decoder attention, FFN, LocalRNN) and which
  ``model.gate.sublayers`` entry gates each of them.

:func:`check_model_config` validates a :class:`~highway_transformer.config.ModelConfig`
against these registries; every builder calls it, so a hand-made config fails with the same
one-line :class:`~highway_transformer.errors.ConfigError` as a loaded one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass, fields

from torch import nn

from ..config import FLAGS, MemoryConfig, ModelConfig
from ..errors import ConfigError, unknown_choice
from ..nn.attention import MultiHeadAttention
from ..nn.block import AttentionSublayer, Block, FeedForwardSublayer, LocalRNNSublayer
from ..nn.combiner import ACTIVATIONS
from ..nn.connections import (
    COMBINERS,
    NORM_POSITIONS,
    Connection,
    build_combiner,
    combiner_class,
)
from ..nn.gating import parse_layer_spec
from ..nn.local_rnn import CELLS, LocalRNN
from ..nn.norms import NORMS, build_norm
from ..nn.relative import RelativeMultiHeadAttention
from ..nn.scores import CrossAttention, ScoredSelfAttention
from ..nn.shaw import ShawAttention
from .init import EMBEDDING_SCHEMES, NORM_INITS, SCHEMES

# --------------------------------------------------------------------------- families


@dataclass(frozen=True)
class Family:
    """What ``model.family`` names: the block layout and the settings that apply to it."""

    layout: Callable[[ModelConfig], list[str]]  # sublayer kinds of one block
    attentions: tuple[str, ...]  # accepted model.attention values; the first is the default
    memory: bool = False  # Transformer-XL segment memory (model.memory.* applies)
    absolute_positions: bool = True  # the input may get sinusoidal encodings (HT eq. 4)


def _attn_ffn(config: ModelConfig) -> list[str]:
    return ["attn", "ffn"]


def _rnn_attn_ffn(config: ModelConfig) -> list[str]:
    return ["rnn"] * config.local_rnn.per_block + ["attn", "ffn"]


FAMILIES: dict[str, Family] = {
    "transformer": Family(_attn_ffn, ("dot", "shaw")),  # HT eqs. 4-9; Shaw et al. 2018
    # RT §3: the LocalRNN carries the position information, so no encodings are added.
    "rtransformer": Family(_rnn_attn_ffn, ("dot",), absolute_positions=False),
    # Transformer-XL: relative attention with segment memory (HT eqs. 10-17).
    "xl": Family(_attn_ffn, ("relative",), memory=True, absolute_positions=False),
}

# --------------------------------------------------------------------------- attention kinds


@dataclass(frozen=True)
class AttentionKind:
    """What ``model.attention`` builds: ``build(config, causal) -> module``."""

    build: Callable[[ModelConfig, bool], nn.Module]
    absolute_positions: bool  # False where the attention itself encodes positions


def _dot(config: ModelConfig, causal: bool) -> nn.Module:
    return MultiHeadAttention(
        config.d_model, config.n_heads, config.d_head, config.dropout_attn, causal=causal
    )


def _relative(config: ModelConfig, causal: bool) -> nn.Module:
    # u / v: the layer's own with untie_r, otherwise one pair held by the model (XL code).
    return RelativeMultiHeadAttention(
        config.d_model,
        config.n_heads,
        config.head_dim,
        config.dropout_attn,
        own_biases=config.untie_r,
    )


def _shaw(config: ModelConfig, causal: bool) -> nn.Module:
    if config.d_head is not None and config.d_head * config.n_heads != config.d_model:
        raise ConfigError("Shaw attention needs d_head * n_heads == d_model")
    return ShawAttention(
        config.d_model, config.n_heads, config.shaw_clip, config.dropout_attn, causal=causal
    )


ATTENTIONS: dict[str, AttentionKind] = {
    "dot": AttentionKind(_dot, absolute_positions=True),
    "relative": AttentionKind(_relative, absolute_positions=False),
    "shaw": AttentionKind(_shaw, absolute_positions=False),
}


def family_of(config: ModelConfig) -> Family:
    if config.family not in FAMILIES:
        raise unknown_choice("model family", config.family, FAMILIES)
    return FAMILIES[config.family]


def attention_kind(config: ModelConfig) -> str:
    """``model.attention``, or the family's own kind where it is left unset."""
    return config.attention or family_of(config).attentions[0]


def uses_memory(config: ModelConfig) -> bool:
    """Whether the family keeps Transformer-XL segment memory."""
    return family_of(config).memory


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
    return FeedForwardSublayer(c.d_model, c.d_inner, c.dropout)


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


def block_layout(config: ModelConfig, cross: bool = False) -> list[str]:
    """The sublayer kinds of one block; ``cross`` adds encoder-decoder attention after
    self-attention (a decoder layer)."""
    kinds = family_of(config).layout(config)
    if cross:
        at = kinds.index("attn") + 1
        kinds = kinds[:at] + ["cross"] + kinds[at:]
    return kinds


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
    return Connection(config.d_model, combiner, config.norm, config.dropout, config.layer_norm)


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
    """``config.n_layers`` blocks of a checked config (the arguments as for :func:`build_block`)."""
    check_model_config(config)
    return nn.ModuleList(
        build_block(config, i, causal=causal, cross=cross, score=score, max_len=max_len)
        for i in range(config.n_layers)
    )


def final_norm(config: ModelConfig) -> nn.Module:
    """The LayerNorm after the last block where ``model.final_norm`` resolves to one (auto: a
    pre-LN stack outside the XL and RT families, whose reference code has none)."""
    if not config.has_final_norm:
        return nn.Identity()
    return build_norm(config.layer_norm, config.d_model)


# --------------------------------------------------------------------------- validation


def _choice(what: str, value: str, choices: Collection[str]) -> None:
    if value not in choices:
        raise unknown_choice(what, value, choices)


def _check_fidelity_options(config: ModelConfig, family: Family) -> None:
    """The reference-code options (docs/fidelity.md): known names, XL-only settings."""
    _choice("layer norm (model.layer_norm)", config.layer_norm, NORMS)
    for name in ("final_norm", "embedding_scale"):
        _choice(f"model.{name} value", str(getattr(config, name)).lower(), FLAGS)
    if not family.memory:
        for name, value in (("dropout_pos", config.dropout_pos), ("untie_r", config.untie_r)):
            if value not in (None, False):
                raise ConfigError(
                    f"model.{name} applies to model.family=xl only (relative attention), "
                    f"not to {config.family}; remove it or use model.family=xl"
                )


def check_model_config(config: ModelConfig) -> None:
    """Check the names and the settings that only apply to some families; raise
    :class:`ConfigError` saying what to change."""
    family = family_of(config)
    if config.attention is not None:
        _choice("attention", config.attention, ATTENTIONS)
        if config.attention not in family.attentions:
            raise ConfigError(
                f"model.family={config.family} takes model.attention="
                f"{' or '.join(family.attentions)}, got {config.attention}; "
                "change the family or leave model.attention unset"
            )
    if not family.memory:
        default = MemoryConfig()
        for f in fields(default):
            if getattr(config.memory, f.name) != getattr(default, f.name):
                raise ConfigError(
                    f"model.memory.{f.name} applies to model.family=xl only (segment memory), "
                    f"not to {config.family}; remove it or use model.family=xl"
                )
    _check_fidelity_options(config, family)
    _choice("initialisation", config.init, SCHEMES)
    _choice("LayerNorm initialisation", config.init_norm, NORM_INITS)
    _choice("token table initialisation", config.init_embedding, EMBEDDING_SCHEMES)
    if config.init == "torch" and config.init_proj_std is not None:
        raise ConfigError("model.init_proj_std needs model.init=uniform or normal; unset it")
    _choice("norm position", config.norm, NORM_POSITIONS)
    gate = config.gate
    _choice("gate", gate.kind, COMBINERS)
    _choice("gate activation", gate.activation, ACTIVATIONS)
    allowed = getattr(combiner_class(gate.kind), "activations", ACTIVATIONS)
    if gate.activation not in allowed:  # HT eq. 26 and the authors' code: T is a sigmoid
        raise ConfigError(
            f"the {gate.kind} gate's T is a sigmoid (HT eq. 26 and the authors' code); "
            f"remove model.gate.activation={gate.activation} or use the sdu gate"
        )
    if combiner_class(gate.kind).pre_ln_only and config.norm != "pre":
        raise ConfigError(
            f"the {gate.kind} gate needs the identity-map reordering: set model.norm=pre "
            "(GTrXL gates work with pre-LN only; SDU/highway/gated work with both)"
        )
    if gate.bias is not None and not math.isfinite(gate.bias):
        raise ConfigError(f"model.gate.bias must be a finite number, got {gate.bias}")
    for sub in gate.sublayers:
        _choice("gated sublayer kind", sub, GATEABLE)
    parse_layer_spec(gate.layers, config.n_layers)
    _choice("local RNN cell", config.local_rnn.cell, CELLS)
