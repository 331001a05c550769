"""Text generation for every model family, with the fastest exact cache each one has.

* Transformer: a key/value cache per attention sublayer.
* Transformer-XL: its segment memory, each token a segment of length 1, with each layer's
  keys/values and position keys cached (a new token projects only itself, as a KV cache).
* R-Transformer: the incremental LocalRNN (last ``k - 1`` inputs per layer) + KV cache.
* Shaw attention: no cache; the context is recomputed each step.

``use_cache=False`` recomputes the whole context every step; greedy decoding gives the same
tokens either way (tested). :func:`generate` adds batched prompts (equal lengths share a
batch), beam search (caches reordered with the beams) and stop strings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from ..config.sampling import check_sampling
from ..data.vocab import SubwordVocabulary, Vocabulary
from ..errors import ConfigError, DataError
from .families import memory_policy

if TYPE_CHECKING:  # the model calls this module (LanguageModel.generate), never the reverse
    from .lm import LanguageModel


def spells_spaces(vocab: Vocabulary) -> bool:
    """Character PTB writes the space between words as ``_`` (its symbols are separated by
    spaces): prompts and generated text use ordinary spaces, mapped to and from ``_``."""
    return (
        vocab.level == "char" and vocab.eos is not None and "_" in vocab.index
    ) and " " not in vocab.index


def tokenize_prompt(vocab: Vocabulary, prompt: str) -> list[int]:
    """Prompt symbols at the vocabulary's level; unknown symbols map to ``<unk>`` or fail."""
    if isinstance(vocab, SubwordVocabulary):  # byte-level: every prompt encodes
        return vocab.encode_text(prompt).tolist()
    if vocab.level == "byte":
        symbols = [chr(b) for b in prompt.encode("utf-8")]
    elif vocab.level == "word":
        symbols = prompt.split()
    else:
        symbols = list(prompt.replace(" ", "_") if spells_spaces(vocab) else prompt)
        if vocab.eos is not None:
            symbols = [vocab.eos if s == "\n" else s for s in symbols]
    unknown = sorted({s for s in symbols if s not in vocab.index})
    if unknown and vocab.unk is None:
        raise DataError(
            f"the prompt has symbols outside the model's vocabulary: {unknown[:10]}; "
            "remove them (this vocabulary has no <unk>)"
        )
    return vocab.encode(symbols)


def detokenize(vocab: Vocabulary, ids: list[int]) -> str:
    if isinstance(vocab, SubwordVocabulary):
        return vocab.decode_text(ids)
    symbols = vocab.decode(ids)
    if vocab.level == "byte":
        return "".join(symbols).encode("latin-1").decode("utf-8", errors="replace")
    if vocab.level == "word":
        return " ".join("\n" if s == vocab.eos else s for s in symbols)
    text = "".join("\n" if s == vocab.eos else s for s in symbols)
    return text.replace("_", " ") if spells_spaces(vocab) else text


def with_prompt(vocab: Vocabulary, prompt: str, continuation: str) -> str:
    """``prompt`` followed by its ``continuation`` as the vocabulary writes text: words are
    separated by a space (:func:`detokenize` joins them so); characters, bytes and subwords
    (which carry their own spaces) follow at once. The prompt is kept as it was written."""
    word_gap = vocab.level == "word" and prompt and continuation and not prompt[-1].isspace()
    return prompt + (" " if word_gap else "") + continuation


def sample_next(
    logits: Tensor,
    temperature: float,
    top_k: int,
    top_p: float,
    generator: torch.Generator | None,
) -> Tensor:
    """One token id per row from ``[B, V]`` logits; temperature 0 is greedy."""
    if temperature <= 0:
        return logits.argmax(dim=-1)
    logits = logits.float() / temperature
    if top_k > 0:
        kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True)
        cumulative = sorted_logits.softmax(-1).cumsum(-1)
        drop = cumulative - sorted_logits.softmax(-1) > top_p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)
    probs = logits.softmax(-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


class Stepper:
    """Feeds tokens to the model for a batch of equal-length contexts, with the fastest exact
    cache the model has (or recomputing the whole context); rows can be reordered (beams).

    Transformer-XL memory is made long enough to hold the whole context of ``total_len``
    positions: exact, one new position of work per token.
    """

    def __init__(self, model: LanguageModel, ids: Tensor, use_cache: bool, total_len: int) -> None:
        model.eval()
        self.model = model
        self.state = model.new_state() if use_cache and model.supports_cache else None
        self.context = ids
        self.pending = ids
        # XL: the evaluation clamp, with memory for the whole context and no same_length window
        evaluation = memory_policy(model.config, evaluation=True)
        self.policy = (
            None
            if evaluation is None
            else dataclasses.replace(evaluation, mem_len=total_len, same_length=False)
        )

    def logits(self) -> Tensor:
        """``[B, V]`` scores of the next token of every row."""
        if self.state is not None:
            hidden, _ = self.model(self.pending, state=self.state, policy=self.policy)
        else:
            hidden, _ = self.model(self.context, policy=self.policy)
        return self.model.logits(hidden[:, -1]).float()

    def push(self, tokens: Tensor) -> None:
        self.pending = tokens[:, None]
        self.context = torch.cat([self.context, self.pending], dim=1)

    def reorder(self, rows: Tensor) -> None:
        """Keep (and duplicate) rows ``rows`` of the contexts and caches."""
        self.context, self.pending = self.context[rows], self.pending[rows]
        if self.state is not None:
            self.state.reorder(rows)


class StopStrings:
    """Stops a row once its generated text contains one of ``strings``."""

    def __init__(self, strings: Sequence[str], vocab: Vocabulary | None) -> None:
        if strings and vocab is None:
            raise ConfigError("stop strings need the vocabulary (vocab=...) to read the text")
        self.strings, self.vocab = [s for s in strings if s], vocab

    def end(self, ids: list[int]) -> int | None:
        """Number of ids up to the first completed stop string, or None."""
        if not self.strings or self.vocab is None:
            return None
        text = detokenize(self.vocab, ids)
        if not any(s in text for s in self.strings):
            return None
        for n in range(1, len(ids) + 1):  # the shortest prefix that holds a stop string
            if any(s in detokenize(self.vocab, ids[:n]) for s in self.strings):
                return n
        return None  # pragma: no cover - the full text holds one


def check_prompt(model: LanguageModel, prompt_ids: Sequence[int]) -> None:
    """A non-empty prompt of ids the model has."""
    if not prompt_ids:
        raise ConfigError("the prompt is empty; give at least one symbol")
    size = model.config.vocab_size
    if max(prompt_ids) >= size or min(prompt_ids) < 0:
        raise ConfigError(
            f"the prompt has ids outside the model's {size} symbols; its vocabulary is larger "
            "than the model: use the vocabulary saved with this checkpoint"
        )


@torch.no_grad()
def sample_batch(
    model: LanguageModel,
    ids: Tensor,
    n_tokens: int,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
    stop: StopStrings | None = None,
) -> list[list[int]]:
    """Continue every row of ``ids [B, L]`` (equal-length prompts) by up to ``n_tokens``."""
    check_sampling(n_tokens, temperature, top_k, top_p, None)
    for row in ids.tolist():
        check_prompt(model, row)
    out: list[list[int]] = [[] for _ in range(ids.shape[0])]
    ends: list[int | None] = [None] * len(out)
    stepper = Stepper(model, ids, use_cache, ids.shape[1] + n_tokens)
    for _ in range(n_tokens):
        tokens = sample_next(stepper.logits(), temperature, top_k, top_p, generator)
        for row, token in enumerate(tokens.tolist()):
            out[row].append(token)
            if stop is not None and ends[row] is None:
                ends[row] = stop.end(out[row])
        if all(e is not None for e in ends):
            break
        stepper.push(tokens)
    return [o if e is None else o[:e] for o, e in zip(out, ends, strict=True)]


@torch.no_grad()
def beam_search(
    model: LanguageModel,
    prompt_ids: list[int],
    n_tokens: int,
    num_beams: int,
    use_cache: bool = True,
    stop: StopStrings | None = None,
) -> list[int]:
    """The continuation with the highest mean log-probability per new token among
    ``num_beams`` hypotheses (a hypothesis that completes a stop string is finished)."""
    check_sampling(n_tokens, 0.0, 0, 1.0, None)
    check_prompt(model, prompt_ids)
    if num_beams < 1:
        raise ConfigError("the number of beams must be >= 1")
    device = next(model.parameters()).device
    finished: list[tuple[float, list[int]]] = []
    beams: list[list[int]] = [[]]
    scores = torch.zeros(1, device=device)
    ids = torch.tensor([prompt_ids], device=device)
    stepper = Stepper(model, ids, use_cache, len(prompt_ids) + n_tokens)
    for _ in range(n_tokens):
        logprobs = stepper.logits().log_softmax(-1)
        vocab = logprobs.shape[-1]
        total = (scores[:, None] + logprobs).view(-1)
        top = torch.topk(total, min(num_beams, total.numel()))
        rows, tokens = top.indices // vocab, top.indices % vocab
        beams = [beams[r] + [t] for r, t in zip(rows.tolist(), tokens.tolist(), strict=True)]
        alive = [i for i, b in enumerate(beams) if stop is None or stop.end(b) is None]
        for i in set(range(len(beams))) - set(alive):
            finished.append((float(top.values[i]) / len(beams[i]), beams[i]))
        if not alive or len(finished) >= num_beams:
            break
        keep = torch.tensor(alive, device=device)
        beams, scores = [beams[i] for i in alive], top.values[keep]
        stepper.reorder(rows[keep])
        stepper.push(tokens[keep])
    else:
        finished += [(float(s) / max(len(b), 1), b) for s, b in zip(scores, beams, strict=True)]
    return max(finished, key=lambda f: f[0])[1] if finished else []


def generate_ids(
    model: LanguageModel,
    prompt_ids: list[int],
    n_tokens: int,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int | None = None,
    use_cache: bool = True,
) -> list[int]:
    """Continue ``prompt_ids`` by ``n_tokens`` ids."""
    check_sampling(n_tokens, temperature, top_k, top_p, seed)
    device = next(model.parameters()).device
    generator = None if seed is None else torch.Generator(device=device).manual_seed(seed)
    ids = torch.tensor([prompt_ids], device=device)
    return sample_batch(model, ids, n_tokens, temperature, top_k, top_p, generator, use_cache)[0]


def generate(
    model: LanguageModel,
    prompts: str | Sequence[str] | Sequence[int] | Sequence[Sequence[int]] | Tensor,
    max_new_tokens: int = 100,
    *,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    num_beams: int | None = None,
    stop_strings: Sequence[str] = (),
    vocab: Vocabulary | None = None,
    seed: int | None = None,
    use_cache: bool = True,
    return_prompt: bool = False,
) -> list[list[int]] | list[str] | str:
    """Continue one or many prompts (see :meth:`LanguageModel.generate`); ``num_beams``
    (any number, 1 included) chooses beam search over sampling. Each result is the
    continuation alone, or with ``return_prompt`` the prompt followed by it."""
    single = isinstance(prompts, str) or (
        isinstance(prompts, Sequence) and bool(prompts) and isinstance(prompts[0], int)
    )
    batch = [prompts] if single else list(prompts)
    if not batch:
        raise ConfigError("no prompts given")
    as_text = isinstance(batch[0], str)
    if as_text and vocab is None:
        raise ConfigError("text prompts need the vocabulary: generate(..., vocab=vocab)")
    rows = [tokenize_prompt(vocab, p) if as_text else [int(t) for t in p] for p in batch]
    check_sampling(max_new_tokens, temperature, top_k, top_p, seed)
    stop = StopStrings(stop_strings, vocab)
    device = next(model.parameters()).device
    generator = None if seed is None else torch.Generator(device=device).manual_seed(seed)
    out: list[list[int]] = [[] for _ in rows]
    if num_beams is not None:
        for i, row in enumerate(rows):
            out[i] = beam_search(model, row, max_new_tokens, num_beams, use_cache, stop)
    else:
        by_length: dict[int, list[int]] = {}
        for i, row in enumerate(rows):
            by_length.setdefault(len(row), []).append(i)
        for members in by_length.values():  # equal lengths share a batch: no padding
            ids = torch.tensor([rows[i] for i in members], device=device)
            continued = sample_batch(
                model, ids, max_new_tokens, temperature, top_k, top_p, generator, use_cache, stop
            )
            for i, new in zip(members, continued, strict=True):
                out[i] = new
    result: list = [detokenize(vocab, o) for o in out] if as_text and vocab else out
    if return_prompt:
        result = [
            with_prompt(vocab, p, r) if as_text and vocab else [*row, *r]
            for p, row, r in zip(batch, rows, result, strict=True)
        ]
    return result[0] if single else result


def generate_text(
    model: LanguageModel,
    vocab: Vocabulary,
    prompt: str,
    n_tokens: int,
    return_prompt: bool = False,
    **kwargs,
) -> str:
    """The prompt's continuation as text; with ``return_prompt``, the prompt followed by it
    (:func:`with_prompt`)."""
    new_ids = generate_ids(model, tokenize_prompt(vocab, prompt), n_tokens, **kwargs)
    text = detokenize(vocab, new_ids)
    return with_prompt(vocab, prompt, text) if return_prompt else text
