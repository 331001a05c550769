"""What ``model.family`` names: one record per family, the only place that says what a
family is.

==================  ====================================  =======================================
family              block layout                          reference-code facts (``auto`` values)
==================  ====================================  =======================================
``transformer``     ``[attn, ffn]`` (HT eqs. 4-9)          dot or Shaw attention; a pre-LN stack
                                                          gets a final LayerNorm (GPT-style)
``rtransformer``    ``[rnn] * n + [attn, ffn]`` (RT §3)    the LocalRNN carries positions; no
                                                          final norm (RT code)
``xl``              ``[attn, ffn]``, relative + memory      segment memory; embeddings × √d,
                                                          dropout on R and on the output, no
                                                          final norm (Transformer-XL code)
==================  ====================================  =======================================

The ``auto`` settings of :class:`~highway_transformer.config.ModelConfig`
(``final_norm``, ``embedding_scale``, ``dropout_pos``, ``dropout_out``) are resolved here,
from the family's record, by the functions below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..config import ModelConfig
from ..errors import unknown_choice
from ..nn.memory import MemoryPolicy


@dataclass(frozen=True)
class Family:
    """A model family: its block layout and the facts its reference code fixes."""

    layout: Callable[[ModelConfig], list[str]]  # sublayer kinds of one block
    attentions: tuple[str, ...]  # accepted model.attention values; the first is the default
    memory: bool = False  # Transformer-XL segment memory (model.memory.* applies)
    absolute_positions: bool = True  # the input may get sinusoidal encodings (HT eq. 4)
    final_norm_with_pre_ln: bool = False  # final_norm=auto: a LayerNorm after a pre-LN stack
    scales_embedding: bool = False  # embedding_scale=auto: embeddings × √d_model
    xl_dropouts: bool = False  # dropout_pos / dropout_out unset: model.dropout (else 0)


def _attn_ffn(config: ModelConfig) -> list[str]:
    return ["attn", "ffn"]


def _rnn_attn_ffn(config: ModelConfig) -> list[str]:
    return ["rnn"] * config.local_rnn.per_block + ["attn", "ffn"]


FAMILIES: dict[str, Family] = {
    # HT eqs. 4-9; Shaw et al. 2018. GPT-style pre-LN stacks end with a LayerNorm.
    "transformer": Family(_attn_ffn, ("dot", "shaw"), final_norm_with_pre_ln=True),
    # RT §3: the LocalRNN carries the position information, so no encodings are added.
    "rtransformer": Family(_rnn_attn_ffn, ("dot",), absolute_positions=False),
    # Transformer-XL: relative attention with segment memory (HT eqs. 10-17).
    "xl": Family(
        _attn_ffn,
        ("relative",),
        memory=True,
        absolute_positions=False,
        scales_embedding=True,
        xl_dropouts=True,
    ),
}
"""Every family by its ``model.family`` name: the one record that says what the family is."""


def family_of(config: ModelConfig) -> Family:
    """The record of ``model.family`` (an unknown name is a one-line error)."""
    if config.family not in FAMILIES:
        raise unknown_choice("model family", config.family, FAMILIES)
    return FAMILIES[config.family]


def attention_kind(config: ModelConfig) -> str:
    """``model.attention``, or the family's own kind where it is left unset."""
    return config.attention or family_of(config).attentions[0]


def uses_memory(config: ModelConfig) -> bool:
    """Whether the family keeps Transformer-XL segment memory."""
    return family_of(config).memory


def block_layout(config: ModelConfig, cross: bool = False) -> list[str]:
    """The sublayer kinds of one block; ``cross`` adds encoder-decoder attention after
    self-attention (a decoder layer)."""
    kinds = family_of(config).layout(config)
    if cross:
        at = kinds.index("attn") + 1
        kinds = kinds[:at] + ["cross"] + kinds[at:]
    return kinds


def _flag(value: object, auto: bool) -> bool:
    """``auto`` | ``true`` | ``false`` (any case; YAML booleans arrive as True/False)."""
    text = str(value).lower()
    return auto if text == "auto" else text == "true"


def has_final_norm(config: ModelConfig) -> bool:
    """A LayerNorm after the last block (``model.final_norm``; auto: a pre-LN stack of a
    family whose reference code has one: GPT-style Transformers and the GTrXL paper do, the
    XL and RT code do not)."""
    auto = config.norm == "pre" and family_of(config).final_norm_with_pre_ln
    return _flag(config.final_norm, auto)


def scales_embedding(config: ModelConfig) -> bool:
    """Multiply embeddings by √d_model (``model.embedding_scale``; auto: the XL code's
    ``emb_scale``)."""
    return _flag(config.embedding_scale, family_of(config).scales_embedding)


def position_dropout(config: ModelConfig) -> float:
    """Dropout on the relative encoding ``R`` (XL code: ``self.drop(pos_emb)``)."""
    if config.dropout_pos is not None:
        return config.dropout_pos
    return config.dropout if family_of(config).xl_dropouts else 0.0


def output_dropout(config: ModelConfig) -> float:
    """Dropout on the last hidden state before the output layer (XL code)."""
    if config.dropout_out is not None:
        return config.dropout_out
    return config.dropout if family_of(config).xl_dropouts else 0.0


def memory_policy(config: ModelConfig, evaluation: bool = False) -> MemoryPolicy | None:
    """The memory settings of a forward pass (training or evaluation, HT A.3); None for a
    family without segment memory. The one place a policy is made from a config."""
    if not uses_memory(config):
        return None
    memory = config.memory
    if not evaluation:
        return MemoryPolicy(memory.mem_len, memory.clamp_len, memory.same_length)
    return MemoryPolicy(
        memory.mem_len if memory.eval_mem_len is None else memory.eval_mem_len,
        memory.clamp_len if memory.eval_clamp_len is None else memory.eval_clamp_len,
        memory.same_length if memory.eval_same_length is None else memory.eval_same_length,
    )
