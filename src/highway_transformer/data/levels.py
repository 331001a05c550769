"""What one token of a language model is, by vocabulary level, and the names of its metrics.

A mean NLL in nats per token is turned into bits per token (the results' ``bpc`` key, named
for the character-level papers) and a perplexity; what a "token" is depends on the level, and
every figure a person reads is named by it: **bits per character** (char), **bits per byte**
(byte), **bits per token** (bpe / unigram subwords, word); **perplexity per word** or **per
token**. A comparison reads bits for character and byte models and perplexity for word and
subword ones, as the papers report them.
"""

from __future__ import annotations

from typing import Any

#: The level of every corpus whose level is fixed; ``pydoc`` and ``file`` read ``data.level``.
CORPUS_LEVELS = {
    "ptb-word": "word",
    "wikitext-103": "word",
    "ptb-char": "char",
    "ptb-char-rt": "char",
    "text8": "char",
    "enwik8": "byte",
    "enwik8-xl": "byte",
}

#: What one token is at each level.
TOKEN_NAMES = {
    "char": "character",
    "byte": "byte",
    "word": "word",
    "bpe": "token",
    "unigram": "token",
}

#: Short names of bits per token, as tables print them.
BITS_SHORT = {"char": "bpc", "byte": "bpb"}


def corpus_level(data: Any) -> str:
    """The vocabulary level of ``data`` (a :class:`~highway_transformer.config.DataConfig` or
    its dict, e.g. from a run folder's ``config.json``)."""
    get = data.get if isinstance(data, dict) else lambda key, default=None: getattr(data, key)
    corpus = get("corpus", "pydoc")
    return CORPUS_LEVELS.get(corpus) or get("level", "char") or "char"


def token_name(level: str) -> str:
    return TOKEN_NAMES.get(level, "token")


def bits_label(level: str) -> str:
    """``bits per character`` / ``per byte`` / ``per word`` / ``per token``."""
    return f"bits per {token_name(level)}"


def bits_short(level: str) -> str:
    """``bpc`` / ``bpb`` / ``bits/word`` / ``bits/token``."""
    return BITS_SHORT.get(level, f"bits/{token_name(level)}")


def perplexity_label(level: str) -> str:
    return f"perplexity per {token_name(level)}"


def headline_key(level: str) -> str:
    """The results key a comparison of this level reads: ``bpc`` (bits) for characters and
    bytes, ``ppl`` for words and subwords."""
    return "bpc" if level in ("char", "byte") else "ppl"


def metric_label(key: str, level: str) -> str:
    """The name a person reads for a language model's results key at ``level``."""
    return {"bpc": bits_short(level), "ppl": "ppl"}.get(key, key)
