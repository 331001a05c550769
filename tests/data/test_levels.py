"""Metric names by vocabulary level (``data/levels.py``)."""

from __future__ import annotations

from highway_transformer.config import LEVELS, DataConfig
from highway_transformer.data.corpora import CORPORA
from highway_transformer.data.levels import (
    CORPUS_LEVELS,
    bits_label,
    bits_short,
    corpus_level,
    headline_key,
    metric_label,
    perplexity_label,
)


def test_every_corpus_and_level_has_a_level_and_names() -> None:
    assert set(CORPUS_LEVELS) <= set(CORPORA)
    for corpus in CORPORA:
        assert corpus_level(DataConfig(corpus=corpus)) in LEVELS
    assert corpus_level({"corpus": "file", "level": "bpe"}) == "bpe"
    assert corpus_level({"corpus": "ptb-word", "level": "char"}) == "word"  # fixed by the corpus


def test_names_by_level() -> None:
    assert [bits_short(x) for x in ("char", "byte", "word", "bpe")] == [
        "bpc", "bpb", "bits/word", "bits/token"
    ]  # fmt: skip
    assert bits_label("unigram") == "bits per token" and bits_label("char") == "bits per character"
    assert perplexity_label("word") == "perplexity per word"
    assert [headline_key(x) for x in ("char", "byte", "word", "bpe")] == [
        "bpc",
        "bpc",
        "ppl",
        "ppl",
    ]
    assert metric_label("bpc", "word") == "bits/word" and metric_label("tokens", "word") == "tokens"
