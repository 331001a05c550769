"""Language-model evaluation (``tasks/lm_scoring.py``): every target counted once whatever the
windows, and the result of one full pass."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from highway_transformer.api import build_model
from highway_transformer.config import (
    Config,
)
from highway_transformer.data.corpora import load_corpus
from highway_transformer.tasks.base import standard_error
from highway_transformer.tasks.lm_scoring import evaluate


@pytest.mark.parametrize(
    ("eval_batch", "seq_len", "context"), [(4, 16, 4), (3, 7, 0), (1, 5, 4), (16, 64, 8)]
)
def test_evaluate_counts_every_target_once(
    text_file: Path,
    eval_batch: int,
    seq_len: int,
    context: int,
    tiny_lm_config: Callable[..., Config],
) -> None:
    config = tiny_lm_config(
        text_file,
        **{"data.eval_batch_size": eval_batch, "data.seq_len": seq_len, "data.context": context},
    )
    corpus = load_corpus(config.data)
    config.model.vocab_size = len(corpus.vocab)
    torch.manual_seed(0)
    model = build_model(config.model)
    result = evaluate(model, corpus.valid, config.data)
    assert result.tokens == corpus.valid.numel() - 1
    assert math.isfinite(result.loss) and result.loss > 0
    assert result.bits == pytest.approx(result.loss / math.log(2))
    assert model.training  # evaluate restores the mode
    capped = evaluate(model, corpus.valid, config.data, max_tokens=20)
    assert capped.tokens == 20


def test_evaluate_equals_a_single_full_pass(
    text_file: Path, tiny_lm_config: Callable[..., Config]
) -> None:
    config = tiny_lm_config(text_file, **{"data.eval_batch_size": 1, "data.eval_seq_len": 200})
    corpus = load_corpus(config.data)
    config.model.vocab_size = len(corpus.vocab)
    torch.manual_seed(0)
    model = build_model(config.model).eval()
    ids = corpus.valid
    assert ids.numel() <= 200
    with torch.no_grad():
        hidden, _ = model(ids[None, :-1])
        nll = model.token_nll(hidden, ids[None, 1:]).double()
    expected = nll.mean().item()
    result = evaluate(model, ids, config.data)
    assert result.loss == pytest.approx(expected, rel=1e-5)
    # the standard error of the mean from the per-token losses of the same pass
    assert result.loss_se == pytest.approx((nll.std() / math.sqrt(nll.numel())).item(), rel=1e-4)


def test_standard_error_of_a_mean_by_hand() -> None:
    values = [1.0, 2.0, 4.0]
    total, total_sq = sum(values), sum(v * v for v in values)
    mean = total / 3
    by_hand = math.sqrt(sum((v - mean) ** 2 for v in values) / 2 / 3)
    assert standard_error(total, total_sq, 3) == pytest.approx(by_hand)
    assert math.isnan(standard_error(1.0, 1.0, 1))  # one item: no spread to estimate
