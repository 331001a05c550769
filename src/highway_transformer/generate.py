"""Text generation for every model family, with the fastest exact cache each one has.

* Transformer: a key/value cache per attention sublayer.
* Transformer-XL: its segment memory (one position of new work per token).
* R-Transformer: the incremental LocalRNN (last ``k - 1`` inputs per layer) + KV cache.
* Shaw attention: no cache; the context is recomputed each step.

``use_cache=False`` recomputes the whole context every step; greedy decoding gives the same
tokens either way (tested).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .data.vocab import Vocabulary
from .errors import ConfigError, DataError
from .models.lm import LanguageModel
from .nn.memory import MemoryPolicy


def tokenize_prompt(vocab: Vocabulary, prompt: str) -> list[int]:
    """Prompt symbols at the vocabulary's level; unknown symbols map to ``<unk>`` or fail."""
    if vocab.level == "byte":
        symbols = [chr(b) for b in prompt.encode("utf-8")]
    elif vocab.level == "word":
        symbols = prompt.split()
    else:
        symbols = list(prompt)
    unknown = sorted({s for s in symbols if s not in vocab.index})
    if unknown and vocab.unk is None:
        raise DataError(
            f"the prompt has symbols outside the model's vocabulary: {unknown[:10]}; "
            "remove them (this vocabulary has no <unk>)"
        )
    return vocab.encode(symbols)


def detokenize(vocab: Vocabulary, ids: list[int]) -> str:
    symbols = vocab.decode(ids)
    if vocab.level == "byte":
        return "".join(symbols).encode("latin-1").decode("utf-8", errors="replace")
    if vocab.level == "word":
        return " ".join("\n" if s == vocab.eos else s for s in symbols)
    return "".join("\n" if s == vocab.eos else s for s in symbols)


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


def check_sampling(
    n_tokens: int, temperature: float, top_k: int, top_p: float, seed: int | None
) -> None:
    """Raise :class:`ConfigError` for a sampling setting outside its meaningful range."""
    if n_tokens < 0:
        raise ConfigError(f"--tokens must be >= 0, got {n_tokens}")
    if not math.isfinite(temperature) or temperature < 0:
        raise ConfigError(
            f"--temperature must be a finite number >= 0 (0 is greedy), got {temperature}"
        )
    if top_k < 0:
        raise ConfigError(f"--top-k must be >= 0 (0 keeps every symbol), got {top_k}")
    if not 0 < top_p <= 1:  # also refuses NaN
        raise ConfigError(f"--top-p must be in (0, 1] (1 keeps every symbol), got {top_p}")
    if seed is not None and not 0 <= seed < 2**63:
        raise ConfigError(f"--seed must be >= 0, got {seed}")


@torch.no_grad()
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
    if not prompt_ids:
        raise ConfigError("the prompt is empty; give at least one symbol")
    check_sampling(n_tokens, temperature, top_k, top_p, seed)
    size = model.config.vocab_size
    if max(prompt_ids) >= size or min(prompt_ids) < 0:
        raise ConfigError(
            f"the prompt has ids outside the model's {size} symbols; its vocabulary is larger "
            "than the model: use the vocabulary saved with this checkpoint"
        )
    model.eval()
    device = next(model.parameters()).device
    generator = None
    if seed is not None:
        generator = torch.Generator(device=device).manual_seed(seed)
    ids = list(prompt_ids)
    cached = use_cache and model.supports_cache
    policy = None
    if model.uses_memory:
        # Memory long enough to hold the whole context: exact, one new position per token.
        evaluation = MemoryPolicy.evaluation(model.config.memory)
        policy = MemoryPolicy(len(prompt_ids) + n_tokens, evaluation.clamp_len, False)
    state = model.new_state() if cached else None
    pending = torch.tensor([ids], device=device)
    for _ in range(n_tokens):
        if cached:
            hidden, _ = model(pending, state=state, policy=policy)
        else:
            hidden, _ = model(torch.tensor([ids], device=device), policy=policy)
        logits = model.logits(hidden[:, -1])
        token = int(sample_next(logits, temperature, top_k, top_p, generator))
        ids.append(token)
        pending = torch.tensor([[token]], device=device)
    return ids[len(prompt_ids) :]


def generate_text(
    model: LanguageModel, vocab: Vocabulary, prompt: str, n_tokens: int, **kwargs
) -> str:
    """The prompt's continuation as text."""
    new_ids = generate_ids(model, tokenize_prompt(vocab, prompt), n_tokens, **kwargs)
    return detokenize(vocab, new_ids)
