"""The language model: every model family is a configuration of the same parts.

========================  ====================================  =========================
family                    block layout                          position information
========================  ====================================  =========================
``transformer``           ``[attn, ffn]`` (HT eqs. 4-9)          sinusoidal (or Shaw)
``rtransformer``          ``[rnn] * n + [attn, ffn]`` (RT §3)    none: the LocalRNN
``xl``                    ``[attn, ffn]``, relative + memory      relative (HT eqs. 10-17)
========================  ====================================  =========================

Each sublayer's connection (post-/pre-LN × gate) is chosen per layer from
:class:`~highway_transformer.config.GateConfig`. The model is built from a validated config
(:func:`highway_transformer.api.build_model` validates one, then builds it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..config import ModelConfig
from ..errors import CheckpointError, ConfigError, HighwayError
from ..nn.adaptive import AdaptiveInput
from ..nn.adaptive_softmax import AdaptiveSoftmax
from ..nn.block import AttentionSublayer, collect_gate_biases
from ..nn.connections import combiner_class
from ..nn.decoding import AppendBuffer, DistanceTable, KVCache
from ..nn.dropout import Dropout
from ..nn.feedforward import swiglu_hidden
from ..nn.layer_spec import parse_layer_spec
from ..nn.linear_cross_entropy import linear_cross_entropy, takes_row_blocks
from ..nn.memory import MemoryPolicy, check_memory, update_memory
from ..nn.positional import SinusoidalPositionalEncoding
from ..nn.relative import RelativePositions
from ..storage.folder import read_config
from .builders import build_blocks, final_norm, uses_absolute_positions
from .families import (
    attention_kind,
    block_layout,
    memory_policy,
    output_dropout,
    position_dropout,
    scales_embedding,
    uses_memory,
)
from .generation import generate
from .init import initialize
from .pretrained import PretrainedMixin


@dataclass
class DecodeState:
    """Incremental-decoding state: position, per-sublayer caches and (XL) memory.

    The XL memory of each layer lives in an :class:`AppendBuffer` (a new token is written in
    place, not concatenated to the whole memory) and the sinusoid ``R`` in a
    :class:`DistanceTable` (a new token computes its new distance only).
    """

    position: int = 0
    layers: list[list[dict]] = field(default_factory=list)
    memory: list[Tensor] | None = None
    memory_buffers: list[AppendBuffer] = field(default_factory=list)
    distances: DistanceTable = field(default_factory=DistanceTable)

    def append_memory(self, layer_inputs: list[Tensor], mem_len: int) -> list[Tensor] | None:
        """Per layer, the last ``mem_len`` states of ``[memory ∘ new inputs]`` (as
        :func:`update_memory`, without copying the memory held)."""
        if mem_len <= 0:
            self.memory = None
            return None
        if len(self.memory_buffers) != len(layer_inputs):
            self.memory_buffers = [AppendBuffer(dim=1) for _ in layer_inputs]
        held = 0 if self.memory is None else self.memory[0].shape[1]
        with torch.no_grad():  # the stop-gradient SG(·) of HT eq. 10
            if held and self.memory_buffers[0].length < held:  # a memory set from outside
                for buffer, memory in zip(self.memory_buffers, self.memory, strict=True):
                    buffer.clear()
                    buffer.append(memory.detach())
            views = [
                buffer.append(inputs.detach(), keep=held)
                for buffer, inputs in zip(self.memory_buffers, layer_inputs, strict=True)
            ]
        self.memory = [v[:, -mem_len:] for v in views]
        return self.memory

    def reorder(self, rows: Tensor) -> None:
        """Keep (and duplicate) batch rows ``rows`` of every cache (beam search)."""
        if self.memory is not None:
            held = self.memory[0].shape[1]
            for buffer in self.memory_buffers:
                buffer.reorder(rows)
            self.memory = [
                b.view().narrow(1, b.length - held, held)  # type: ignore[union-attr]
                for b in self.memory_buffers
            ]
        for layer in self.layers:
            for cache in layer:
                for key, value in cache.items():
                    if isinstance(value, KVCache):
                        value.reorder(rows)
                    elif isinstance(value, Tensor):  # the LocalRNN window
                        cache[key] = value[rows]


class LMOutput(NamedTuple):
    """What ``forward`` returns when given targets."""

    loss: Tensor  # NLL (nats) of the targets that are not -100: mean, sum or per token
    hidden: Tensor  # the final hidden states of the scored (last T) positions, [B, T, D]
    memory: list[Tensor] | None


#: ``forward(..., reduction=...)``: how the targets' NLL is reduced (as ``F.cross_entropy``).
REDUCTIONS = ("mean", "sum", "none")


class LanguageModel(PretrainedMixin, nn.Module):
    """Decoder-only LM: embedding (× √d when scaled), position information, N blocks,
    (final norm), dropout, output layer.

    ``save_pretrained`` / ``from_pretrained`` / ``push_to_hub`` come from
    :class:`~highway_transformer.models.pretrained.PretrainedMixin`.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if config.vocab_size <= 0:
            raise ConfigError(
                "model.vocab_size must be set (it is taken from the corpus vocabulary)"
            )
        self.config = config
        d = config.d_model
        adaptive = bool(config.adaptive_cutoffs)
        if adaptive:
            self.embedding: nn.Module = AdaptiveInput(
                config.vocab_size, d, config.adaptive_cutoffs, config.adaptive_div
            )
        else:
            self.embedding = nn.Embedding(config.vocab_size, d)
        uses_absolute = uses_absolute_positions(config)
        self.positional = SinusoidalPositionalEncoding(d) if uses_absolute else None
        self.embedding_scale = math.sqrt(d) if scales_embedding(config) else 1.0
        self.embedding_dropout = Dropout(config.embedding_dropout)
        # XL: R, the mask and (unless untie_r) one u / v pair, shared by every layer.
        self.relative = (
            RelativePositions(
                d, config.n_heads, config.head_dim, position_dropout(config), not config.untie_r
            )
            if uses_memory(config)
            else None
        )
        self.blocks = build_blocks(config)
        self.final_norm = final_norm(config)
        self.output_dropout = Dropout(output_dropout(config))
        self.output: nn.Module
        if adaptive:
            self.output = AdaptiveSoftmax(
                d, config.vocab_size, config.adaptive_cutoffs, config.adaptive_div
            )
        else:
            self.output = nn.Linear(d, config.vocab_size, bias=config.bias)
        initialize(self, config)
        if config.tie_weights:
            if adaptive:
                self.output.tie_to(self.embedding)
            else:
                self.output.weight = self.embedding.weight

    @property
    def is_adaptive(self) -> bool:
        return bool(self.config.adaptive_cutoffs)

    @property
    def uses_memory(self) -> bool:
        return uses_memory(self.config)

    # ------------------------------------------------------------------ forward

    @property
    def supports_cache(self) -> bool:
        return all(
            s.supports_cache
            for b in self.blocks
            for s in b.sublayers
            if isinstance(s, AttentionSublayer)
        )

    def new_state(self) -> DecodeState:
        return DecodeState(layers=[[{} for _ in block.kinds] for block in self.blocks])

    def forward(
        self,
        tokens: Tensor,
        memory: list[Tensor] | None = None,
        state: DecodeState | None = None,
        policy: MemoryPolicy | None = None,
        targets: Tensor | None = None,
        reduction: str = "mean",
    ) -> tuple[Tensor, list[Tensor] | None] | LMOutput:
        """``tokens [B, L]`` -> (hidden states ``[B, L, D]``, new memory or None).

        ``memory`` (Transformer-XL) is the list of per-layer memories returned by the previous
        call; ``state`` carries caches for incremental decoding (one call per new chunk);
        ``policy`` the memory settings of this call (default: the training settings of
        ``model.memory``; evaluation passes ``memory_policy(config, evaluation=True)``).

        With ``targets [B, T]`` (the next token of each of the *last* ``T <= L`` positions,
        so leading positions can be history only; -100 is ignored) it returns
        :class:`LMOutput` ``(loss, hidden, memory)``: the NLL in nats reduced as
        ``reduction`` says (``mean`` over the counted targets, ``sum``, or ``none``: ``[B, T]``
        per token, 0 where ignored), and the hidden states of those ``T`` positions only:
        the last block's position-wise sublayers (its FFN) skip the history positions,
        whose outputs nothing reads (their keys and values were made before). A training
        step calls the model this way only, so a DDP or FSDP wrapper needs nothing but
        ``forward``.
        """
        if targets is not None and reduction not in REDUCTIONS:
            raise ConfigError(
                f"reduction must be one of {', '.join(REDUCTIONS)}, got {reduction!r}"
            )
        scored_only = targets is not None and state is None  # decoding keeps every position
        keep_last = targets.shape[1] if scored_only else None
        hidden, new_memory = self._hidden(tokens, memory, state, policy, keep_last)
        if targets is None:
            return hidden, new_memory
        scored = hidden[:, hidden.shape[1] - targets.shape[1] :]
        if reduction == "none":
            return LMOutput(self.token_nll(scored, targets), hidden, new_memory)
        loss = self.summed_nll(scored, targets)
        if reduction == "mean":
            loss = loss / (targets != -100).sum().clamp_min(1)
        return LMOutput(loss, hidden, new_memory)

    def _hidden(
        self,
        tokens: Tensor,
        memory: list[Tensor] | None,
        state: DecodeState | None,
        policy: MemoryPolicy | None,
        keep_last: int | None = None,
    ) -> tuple[Tensor, list[Tensor] | None]:
        """The final hidden states and the new memory; with ``keep_last``, only the last
        positions' states (the last block's position-wise tail runs on those alone)."""
        if state is not None and self.uses_memory:
            memory = state.memory
        if not self.uses_memory and (memory is not None or policy is not None):
            raise ConfigError(
                "segment memory and its settings need model.family=xl (relative attention "
                "with memory)"
            )
        if memory is not None:
            check_memory(memory, len(self.blocks), tokens.shape[0], self.config.d_model)
        start = state.position if state is not None else 0
        x = self.embedding(tokens.long())  # ids of a memory-mapped corpus are uint16/uint32
        if self.embedding_scale != 1.0:
            x = x * self.embedding_scale
        if self.positional is not None:
            x = self.positional(x, start=start)
        x = self.embedding_dropout(x)
        options = {}
        if self.relative is not None:
            policy = policy or memory_policy(self.config)
            options["relative"] = self.relative(
                tokens.shape[1],
                0 if memory is None else memory[0].shape[1],
                x,
                clamp_len=policy.clamp_len,
                same_length=policy.same_length,
                window=policy.mem_len,
                table=None if state is None else state.distances,
            )
        layer_inputs = []
        last = len(self.blocks) - 1
        for i, block in enumerate(self.blocks):
            layer_inputs.append(x)
            layer_state = None if state is None else state.layers[i]
            layer_memory = None if memory is None else memory[i]
            keep = keep_last if i == last else None
            x = block(x, memory=layer_memory, state=layer_state, keep_last=keep, **options)
        hidden = self.output_dropout(self.final_norm(x))
        new_memory = None
        if policy is not None and state is not None:
            new_memory = state.append_memory(layer_inputs, policy.mem_len)
        elif policy is not None:
            new_memory = update_memory(memory, layer_inputs, policy.mem_len)
        if state is not None:
            state.position += tokens.shape[1]
        return hidden, new_memory

    def logits(self, hidden: Tensor) -> Tensor:
        """Unnormalised scores (log-probabilities for the adaptive softmax) ``[..., V]``."""
        if self.is_adaptive:
            flat = hidden.reshape(-1, hidden.shape[-1]).float()
            return self.output.log_prob(flat).view(*hidden.shape[:-1], -1)
        return self.output(hidden)

    def summed_nll(self, hidden: Tensor, targets: Tensor) -> Tensor:
        """The NLL in nats of every target that is not -100, summed: on the CPU a block of
        rows at a time through the output layer (:mod:`..nn.linear_cross_entropy`), else
        :meth:`token_nll`'s sum."""
        output = self.output
        if isinstance(output, nn.Linear) and takes_row_blocks(hidden, output.out_features):
            flat = hidden.reshape(-1, hidden.shape[-1])
            return linear_cross_entropy(flat, output.weight, output.bias, targets.reshape(-1))
        return self.token_nll(hidden, targets).sum()

    def token_nll(self, hidden: Tensor, targets: Tensor) -> Tensor:
        """Per-token negative log-likelihood in nats; targets of -100 are ignored (give 0)."""
        targets = targets.long()  # a memory-mapped corpus holds uint16/uint32 ids
        if self.is_adaptive:
            flat = targets.reshape(-1)
            keep = flat != -100
            nll = hidden.new_zeros(flat.shape, dtype=torch.float32)
            if keep.any():
                chosen = hidden.reshape(-1, hidden.shape[-1])[keep].float()
                nll[keep] = self.output(chosen, flat[keep])
            return nll.view(targets.shape)
        logits = self.logits(hidden)
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).to(
                torch.promote_types(logits.dtype, torch.float32)
            ),
            targets.reshape(-1),
            reduction="none",
            ignore_index=-100,
        ).view(targets.shape)

    # ------------------------------------------------------------------ inspection

    def token_tables(self) -> tuple[nn.Module, nn.Module]:
        """The token embedding and the output layer (``model.init_embedding`` draws them)."""
        return self.embedding, self.output

    def gate_biases(self) -> dict[str, Tensor]:
        """Learned gate biases b1 by stable name ``layer{N}.{attn|ffn|rnn}`` (1-based layers)."""
        return collect_gate_biases(self.blocks)

    def num_parameters(self, trainable_only: bool = True) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    # ------------------------------------------------------------------ generation, loading

    def generate(self, prompts: Any, max_new_tokens: int = 100, **options: Any) -> Any:
        """Continue a prompt or a batch of prompts.

        ``prompts``: ids (``[1, 5, 2]``), a batch of id lists or a ``[B, L]`` tensor, or text
        (``"The "`` or a list of strings) with ``vocab=``. Options: ``temperature`` (0:
        greedy), ``top_k``, ``top_p``, ``num_beams`` (beam search; 1 is greedy),
        ``stop_strings`` (with ``vocab``), ``seed``, ``use_cache``, ``return_prompt``.
        Returns the new ids of each prompt, or text for text prompts (with
        ``return_prompt=True``: each prompt followed by them).
        """
        if isinstance(prompts, Tensor):
            prompts = prompts.tolist()
        return generate(self, prompts, max_new_tokens, **options)

    @classmethod
    def _from_checkpoint(cls, folder: Path) -> LanguageModel:
        config = read_config(folder).model
        try:
            return cls(config)
        except HighwayError as exc:
            raise CheckpointError(
                f"{folder} holds a model config that does not fit: {exc}"
            ) from None


def count_flops_per_token(config: ModelConfig, seq_len: int) -> float:
    """Training FLOPs per token (forward + backward = 3 × forward) of the matmuls.

    Counts every Linear layer (2 FLOPs per multiply-add), the attention products
    (``QKᵀ`` and ``AV``: ``2 · 2 · L_keys · d`` per query, halved for the causal mask) and
    the LocalRNN recurrences; embeddings, norms and element-wise work are ignored.
    """
    d, inner = config.d_model, config.n_heads * config.head_dim
    relative = attention_kind(config) == "relative"  # the BD term of HT eq. 13
    memory = config.memory.mem_len if uses_memory(config) else 0
    per_layer = 0.0
    for kind in block_layout(config):
        if kind == "attn":
            per_layer += 2 * d * 3 * inner + 2 * inner * d
            if config.attn_output_gate != "none":  # W_θ: D -> H·dh (elementwise) or H
                width = inner if config.attn_output_gate == "elementwise" else config.n_heads
                per_layer += 2 * d * width
            keys = seq_len + memory
            per_layer += 2 * 2 * inner * keys / (2 if not relative else 1)
            if relative:
                per_layer += 2 * d * inner + 2 * inner * keys  # W_kR R and the BD term
        elif kind == "ffn" and config.ffn == "swiglu":
            per_layer += 3 * 2 * d * swiglu_hidden(config.d_inner)
        elif kind == "ffn":
            per_layer += 2 * 2 * d * config.d_inner
        elif kind == "rnn":
            gates = {"rnn": 1, "gru": 3, "lstm": 4}[config.local_rnn.cell]
            per_layer += 2 * gates * d * d * (1 + config.local_rnn.window)
    gate_flops = 0.0
    matmuls = combiner_class(config.gate.kind).matmuls
    spec = parse_layer_spec(config.gate.layers, config.n_layers)
    for layer in range(config.n_layers):
        for kind in block_layout(config):
            if spec.gated(layer, kind, tuple(config.gate.sublayers)):
                gate_flops += 2 * d * d * matmuls
    forward = config.n_layers * per_layer + gate_flops + 2 * d * config.vocab_size
    return 3.0 * forward
