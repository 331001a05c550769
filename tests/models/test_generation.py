"""Generation (``models/generation.py``): cached decoding equals recomputation in every family,
beam search reorders the XL cache, seeded sampling, and prompts outside the vocabulary."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from conftest import LM_FAMILIES, build_lm

from highway_transformer.config import ModelConfig
from highway_transformer.models.generation import beam_search, generate_ids, tokenize_prompt


@pytest.mark.parametrize("family", LM_FAMILIES)
def test_cached_generation_equals_full_recomputation(family: str) -> None:
    model = build_lm(LM_FAMILIES[family])
    cached = generate_ids(model, [1, 2, 3, 4], 10, temperature=0)
    recomputed = generate_ids(model, [1, 2, 3, 4], 10, temperature=0, use_cache=False)
    assert cached == recomputed


def test_xl_beam_search_reorders_its_cache() -> None:
    model = build_lm(LM_FAMILIES["xl"])
    cached = beam_search(model, [3, 1, 4], 6, num_beams=3)
    assert cached == beam_search(model, [3, 1, 4], 6, num_beams=3, use_cache=False)


def test_sampling_is_seeded(lm_family_config: Callable[..., ModelConfig]) -> None:
    model = build_lm(lm_family_config())
    a = generate_ids(model, [1], 15, temperature=1.0, top_k=5, seed=3)
    b = generate_ids(model, [1], 15, temperature=1.0, top_k=5, seed=3)
    c = generate_ids(model, [1], 15, temperature=1.0, top_p=0.5, seed=4)
    assert a == b and len(c) == 15


def test_prompt_outside_vocabulary_is_a_clear_error() -> None:
    from highway_transformer.data.vocab import Vocabulary
    from highway_transformer.errors import DataError

    vocab = Vocabulary(list("abc"), "char")
    assert tokenize_prompt(vocab, "cab") == [2, 0, 1]
    with pytest.raises(DataError, match="outside"):
        tokenize_prompt(vocab, "abz")
    with_unk = Vocabulary(["<unk>", *"abc"], "char", unk="<unk>")
    assert tokenize_prompt(with_unk, "az") == [1, 0]


def test_shaw_has_no_cache_but_generates() -> None:
    model = build_lm(LM_FAMILIES["shaw"])
    assert not model.supports_cache
    assert len(generate_ids(model, [1, 2], 5, temperature=0)) == 5


@pytest.mark.parametrize("level", ["char", "word"])
def test_the_prompt_comes_back_only_when_asked(level: str) -> None:
    """The continuation alone by default; ``return_prompt=True`` puts the prompt (as written)
    before the same continuation: ids before ids, text before text (a space between words)."""
    from conftest import LM_VOCAB

    from highway_transformer.data.vocab import Vocabulary
    from highway_transformer.models.generation import generate, generate_text

    model = build_lm(LM_FAMILIES["transformer"])
    symbols = [chr(ord("a") + i) * (1 if level == "char" else 2) for i in range(LM_VOCAB)]
    vocab = Vocabulary(symbols, level)
    prompt = "abc" if level == "char" else "aa bb"
    options = {"temperature": 0.0, "vocab": vocab}
    alone = generate(model, prompt, 6, **options)
    assert isinstance(alone, str) and alone
    gap = " " if level == "word" else ""
    assert generate(model, prompt, 6, return_prompt=True, **options) == prompt + gap + alone
    assert generate_text(model, vocab, prompt, 6, temperature=0.0) == alone
    both = generate_text(model, vocab, prompt, 6, temperature=0.0, return_prompt=True)
    assert both == prompt + gap + alone
    prompts = [prompt, prompt.split()[0] if level == "word" else prompt[:2]]
    batch = generate(model, prompts, 4, return_prompt=True, **options)
    assert batch == [p + gap + generate(model, p, 4, **options) for p in prompts]
    ids = generate(model, [1, 2, 3], 5, temperature=0.0)
    assert generate(model, [1, 2, 3], 5, temperature=0.0, return_prompt=True) == [1, 2, 3, *ids]
    assert model.generate([1, 2, 3], 5, temperature=0.0, return_prompt=True) == [1, 2, 3, *ids]
