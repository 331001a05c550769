"""Encoder-decoder Transformer with gated connections (slides; Vaswani et al. 2017; HT §3).

Encoder layer: self-attention, FFN. Decoder layer: masked (causal) self-attention,
encoder-decoder attention (keys and values from the top encoder output), FFN; then a final
Linear and softmax over the target vocabulary. With ``model.family=rtransformer`` every
layer starts with ``model.local_rnn.per_block`` LocalRNN sublayers (RT §3.1; causal windows,
so right padding never reaches a real position) and no position encoding is added.

Every sublayer rejoins the stream through its own
:class:`~highway_transformer.nn.connections.Connection` (post-/pre-LN × any combiner: plain
residual, SDU, highway, gated MHDPA, GTrXL gates), gated where ``model.gate.layers`` says
(HT §4; the spec numbers the layers of each stack, and encoder-decoder attention counts as
``attn``). Attention scores are any of :data:`~highway_transformer.config.names.SCORES`.

Batches are right-padded with ``pad_id``; the encoder's key padding mask keeps pads out of
every attention over the source, and the decoder's causal mask keeps later (and padded)
target positions out of earlier ones, so padding never changes outputs at real positions.
:meth:`EncoderDecoder.greedy_decode` and :meth:`EncoderDecoder.beam_search` recompute the
decoder over the prefix at each step (no cache: the toy sequences are short).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..config import ModelConfig
from ..errors import ConfigError, DataError
from ..nn.block import collect_gate_biases
from ..nn.dropout import Dropout
from ..nn.positional import SinusoidalPositionalEncoding
from .builders import build_blocks, final_norm, uses_absolute_positions
from .families import uses_memory
from .init import initialize
from .pretrained import PretrainedMixin


class EncoderDecoder(PretrainedMixin, nn.Module):
    """Encoder-decoder Transformer (slides; Vaswani et al. 2017) with HT gates.

    ``forward(src [B, S], tgt_in [B, T]) -> logits [B, T, V_tgt]`` (teacher forcing, where
    ``tgt_in`` starts with ``<bos>``). ``share_embeddings`` uses one table for source and
    target (the vocabularies must then have the same size); ``model.tie_weights`` ties the
    output layer to the target embedding. Inputs are ``E + PE`` (HT eq. 4; no ``√d``
    scaling, as in the language model).
    """

    def __init__(
        self,
        config: ModelConfig,
        src_vocab: int,
        tgt_vocab: int,
        score: str = "scaled_dot",
        max_len: int = 0,
        share_embeddings: bool = False,
        pad_id: int = 0,
        bos_id: int = 1,
        eos_id: int = 2,
    ) -> None:
        super().__init__()
        if uses_memory(config) or config.attention not in (None, "dot"):
            raise ConfigError(
                "the encoder-decoder supports model.family=transformer or rtransformer with "
                f"scored attention (got {config.family}, {config.attention}); set model.family"
            )
        if src_vocab < 3 or tgt_vocab < 3:
            raise ConfigError(
                f"vocabularies need at least pad, bos and eos, got {src_vocab} and {tgt_vocab}"
            )
        if share_embeddings and src_vocab != tgt_vocab:
            raise ConfigError(
                f"shared embeddings need one vocabulary, got sizes {src_vocab} and {tgt_vocab}; "
                "turn sharing off or build a joint vocabulary"
            )
        self.config = config
        self.score, self.share_embeddings = score, share_embeddings
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.max_len = max_len
        d = config.d_model
        self.src_embedding = nn.Embedding(src_vocab, d)
        self.tgt_embedding = self.src_embedding if share_embeddings else nn.Embedding(tgt_vocab, d)
        uses_pe = uses_absolute_positions(config)
        self.positional = SinusoidalPositionalEncoding(d) if uses_pe else None
        self.embedding_dropout = Dropout(config.embedding_dropout)
        self.encoder = build_blocks(config, causal=False, score=score, max_len=max_len)
        self.decoder = build_blocks(config, cross=True, score=score, max_len=max_len)
        self.encoder_norm = final_norm(config)
        self.decoder_norm = final_norm(config)
        self.output = nn.Linear(d, tgt_vocab)
        initialize(self, config)
        if config.tie_weights:
            self.output.weight = self.tgt_embedding.weight

    def init_arguments(self) -> dict:
        return {
            "src_vocab": self.src_vocab,
            "tgt_vocab": self.tgt_vocab,
            "score": self.score,
            "max_len": self.max_len,
            "share_embeddings": self.share_embeddings,
            "pad_id": self.pad_id,
            "bos_id": self.bos_id,
            "eos_id": self.eos_id,
        }

    # ------------------------------------------------------------------ parts

    def _check(self, ids: Tensor, what: str) -> None:
        if ids.dim() != 2:
            raise DataError(f"{what} must be [B, L] token ids, got shape {list(ids.shape)}")
        if self.max_len and ids.shape[1] > self.max_len:
            raise DataError(
                f"{what} has {ids.shape[1]} positions, more than task.max_len={self.max_len}; "
                "raise task.max_len or shorten the input"
            )

    def _embed(self, ids: Tensor, table: nn.Embedding) -> Tensor:
        x = table(ids)
        if self.positional is not None:
            x = self.positional(x)
        return self.embedding_dropout(x)

    def encode(self, src: Tensor, src_padding: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``src [B, S]`` -> (encoder output ``[B, S, D]``, padding mask ``[B, S]``)."""
        self._check(src, "the source")
        if src_padding is None:
            src_padding = src == self.pad_id
        x = self._embed(src, self.src_embedding)
        for block in self.encoder:
            x = block(x, padding=src_padding)
        return self.encoder_norm(x), src_padding

    def decode(self, tgt_in: Tensor, memory: Tensor, src_padding: Tensor | None) -> Tensor:
        """Logits ``[B, T, V]`` for the target prefix ``tgt_in [B, T]`` given the encoding."""
        self._check(tgt_in, "the target")
        y = self._embed(tgt_in, self.tgt_embedding)
        for block in self.decoder:
            y = block(y, encoder=memory, encoder_padding=src_padding)
        return self.output(self.decoder_norm(y))

    def forward(
        self,
        src: Tensor,
        tgt_in: Tensor,
        src_padding: Tensor | None = None,
        targets: Tensor | None = None,
    ) -> Tensor:
        """Logits ``[B, T, V]`` of ``tgt_in`` given ``src`` (teacher forcing); with
        ``targets [B, T]``, their summed cross-entropy in nats (``pad_id`` targets count 0)."""
        memory, src_padding = self.encode(src, src_padding)
        logits = self.decode(tgt_in, memory, src_padding)
        return logits if targets is None else self.token_nll(logits, targets).sum()

    def token_nll(self, logits: Tensor, tgt_out: Tensor) -> Tensor:
        """Per-position cross-entropy ``[B, T]`` in nats; ``pad_id`` targets give 0."""
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(),
            tgt_out.reshape(-1),
            reduction="none",
            ignore_index=self.pad_id,
        ).view(tgt_out.shape)

    # ------------------------------------------------------------------ decoding

    def _decode_length(self, src: Tensor, max_len: int | None) -> int:
        steps = max_len if max_len is not None else src.shape[1] + 4
        if self.max_len:
            steps = min(steps, self.max_len - 1)  # the target prefix includes <bos>
        if steps < 1:
            raise ConfigError(f"decoding needs max_len >= 1, got {steps}")
        return steps

    def _step_logprobs(self, logits: Tensor) -> Tensor:
        """Log-probabilities of the next token; ``<pad>`` and ``<bos>`` are never produced."""
        logp = F.log_softmax(logits.float(), dim=-1)
        logp[:, self.pad_id] = -math.inf
        logp[:, self.bos_id] = -math.inf
        return logp

    @torch.no_grad()
    def greedy_decode(
        self, src: Tensor, max_len: int | None = None, src_padding: Tensor | None = None
    ) -> Tensor:
        """The most probable next token at each step: ``[B, ≤ max_len]`` ids ending with
        ``<eos>`` and padded with ``pad_id`` after it (``<bos>`` not included)."""
        steps = self._decode_length(src, max_len)
        memory, src_padding = self.encode(src, src_padding)
        batch = src.shape[0]
        tokens = torch.full((batch, 1), self.bos_id, dtype=torch.long, device=src.device)
        finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
        for _ in range(steps):
            logp = self._step_logprobs(self.decode(tokens, memory, src_padding)[:, -1])
            nxt = logp.argmax(dim=-1).masked_fill(finished, self.pad_id)
            tokens = torch.cat([tokens, nxt[:, None]], dim=1)
            finished |= nxt == self.eos_id
            if bool(finished.all()):
                break
        return tokens[:, 1:]

    @torch.no_grad()
    def beam_search(
        self,
        src: Tensor,
        beam_size: int,
        max_len: int | None = None,
        src_padding: Tensor | None = None,
        length_penalty: float = 0.0,
    ) -> Tensor:
        """Beam search (``beam_size`` hypotheses per source): the best hypothesis by
        ``log p / len^length_penalty``, as ``[B, ≤ max_len]`` ids like :meth:`greedy_decode`.

        Finished hypotheses keep their score and are extended by padding only; with
        ``beam_size=1`` the result equals greedy decoding.
        """
        if beam_size < 1:
            raise ConfigError(f"task.beam_size must be >= 1, got {beam_size}")
        vocab = self.tgt_vocab
        if beam_size > vocab - 2:
            raise ConfigError(
                f"task.beam_size={beam_size} exceeds the {vocab - 2} producible target tokens"
            )
        steps = self._decode_length(src, max_len)
        memory, src_padding = self.encode(src, src_padding)
        batch, k, device = src.shape[0], beam_size, src.device
        memory = memory.repeat_interleave(k, dim=0)
        src_padding = src_padding.repeat_interleave(k, dim=0)
        tokens = torch.full((batch * k, 1), self.bos_id, dtype=torch.long, device=device)
        scores = torch.zeros(batch, k, device=device)
        scores[:, 1:] = -math.inf  # all beams start identical: keep one
        finished = torch.zeros(batch * k, dtype=torch.bool, device=device)
        lengths = torch.zeros(batch * k, device=device)
        rows = torch.arange(batch, device=device)[:, None] * k
        for _ in range(steps):
            logp = self._step_logprobs(self.decode(tokens, memory, src_padding)[:, -1])
            logp[finished] = -math.inf
            logp[finished, self.pad_id] = 0.0
            candidates = (scores.reshape(-1, 1) + logp).view(batch, k * vocab)
            scores, index = candidates.topk(k, dim=1)
            source = (rows + torch.div(index, vocab, rounding_mode="floor")).view(-1)
            nxt = (index % vocab).view(-1)
            tokens = torch.cat([tokens[source], nxt[:, None]], dim=1)
            lengths = lengths[source] + (~finished[source]).float()
            finished = finished[source] | (nxt == self.eos_id)
            if bool(finished.all()):
                break
        ranked = scores / lengths.view(batch, k).clamp_min(1.0) ** length_penalty
        best = ranked.argmax(dim=1)
        return tokens.view(batch, k, -1)[torch.arange(batch, device=device), best, 1:]

    def decode_batch(self, src: Tensor, beam_size: int = 1, max_len: int | None = None) -> Tensor:
        """Greedy decoding for ``beam_size=1``, beam search otherwise."""
        if beam_size == 1:
            return self.greedy_decode(src, max_len)
        return self.beam_search(src, beam_size, max_len)

    # ------------------------------------------------------------------ inspection

    def gate_biases(self) -> dict[str, Tensor]:
        """Learned gate biases ``{encoder|decoder}.layer{N}.{kind}`` (1-based layers)."""
        return {
            **collect_gate_biases(self.encoder, "encoder."),
            **collect_gate_biases(self.decoder, "decoder."),
        }

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)
