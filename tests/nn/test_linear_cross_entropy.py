"""The output layer and its summed cross-entropy a block of rows at a time
(``nn/linear_cross_entropy.py``) against ``F.cross_entropy(F.linear(...))``: the loss and
every gradient in fp64 (1e-12) and fp32 (1e-5), over several blocks with a partial last one,
ignored targets, no bias, frozen weights, without gradients, ``gradcheck``; which inputs take
the blocks; and the language model's loss through them against its per-token route."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

from highway_transformer.api import build_model
from highway_transformer.config import ModelConfig
from highway_transformer.nn import linear_cross_entropy as module
from highway_transformer.nn.linear_cross_entropy import linear_cross_entropy, takes_row_blocks


def _operands(dtype: torch.dtype, rows: int = 23, d: int = 6, vocab: int = 40, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(rows, d, generator=g, dtype=dtype).requires_grad_()
    weight = torch.randn(vocab, d, generator=g, dtype=dtype).requires_grad_()
    bias = torch.randn(vocab, generator=g, dtype=dtype).requires_grad_()
    targets = torch.randint(0, vocab, (rows,), generator=g)
    targets[::5] = -100  # ignored, as F.cross_entropy's default ignore_index
    return hidden, weight, bias, targets


@pytest.fixture(autouse=True)
def several_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 7 rows of 40 logits: 23 rows make three whole blocks and a partial one."""
    monkeypatch.setattr(module, "ROWS_ELEMENTS", 7 * 40)


@pytest.mark.parametrize(("dtype", "tolerance"), [(torch.float64, 1e-12), (torch.float32, 1e-5)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_the_blocks_give_torchs_loss_and_gradients(
    dtype: torch.dtype, tolerance: float, with_bias: bool
) -> None:
    hidden, weight, bias, targets = _operands(dtype)
    bias = bias if with_bias else None
    inputs = (hidden, weight) + ((bias,) if with_bias else ())
    expected = F.cross_entropy(F.linear(hidden, weight, bias), targets, reduction="sum")
    got = linear_cross_entropy(hidden, weight, bias, targets)
    assert got.dtype == dtype
    torch.testing.assert_close(got, expected, atol=0, rtol=tolerance)
    scale = 0.37  # the loss's gradient reaches the saved ones as a scalar factor
    for mine, theirs in zip(
        torch.autograd.grad(got * scale, inputs),
        torch.autograd.grad(expected * scale, inputs),
        strict=True,
    ):
        torch.testing.assert_close(mine, theirs, atol=tolerance, rtol=tolerance)
        assert mine.is_contiguous()  # the weight's is made transposed inside


def test_frozen_weights_and_no_gradients() -> None:
    hidden, weight, bias, targets = _operands(torch.float64)
    weight.requires_grad_(False)
    bias.requires_grad_(False)
    expected = F.cross_entropy(F.linear(hidden, weight, bias), targets, reduction="sum")
    got = linear_cross_entropy(hidden, weight, bias, targets)
    (d_hidden,) = torch.autograd.grad(got, hidden)
    torch.testing.assert_close(
        d_hidden, torch.autograd.grad(expected, hidden)[0], rtol=1e-12, atol=1e-12
    )
    with torch.no_grad():
        quiet = linear_cross_entropy(hidden, weight, bias, targets)
    assert not quiet.requires_grad
    torch.testing.assert_close(quiet, expected.detach(), rtol=1e-12, atol=0)


@pytest.mark.parametrize("trained", ["hidden", "weight", "bias"])
def test_each_input_alone_gets_torchs_gradient(trained: str) -> None:
    """The bias is a column of the weight's gradient inside: each one asked alone."""
    operands = dict(zip(("hidden", "weight", "bias"), _operands(torch.float64)[:3], strict=True))
    for name, tensor in operands.items():
        tensor.requires_grad_(name == trained)
    hidden, weight, bias = operands.values()
    targets = _operands(torch.float64)[3]
    expected = F.cross_entropy(F.linear(hidden, weight, bias), targets, reduction="sum")
    (mine,) = torch.autograd.grad(
        linear_cross_entropy(hidden, weight, bias, targets), operands[trained]
    )
    (theirs,) = torch.autograd.grad(expected, operands[trained])
    torch.testing.assert_close(mine, theirs, rtol=1e-12, atol=1e-12)


def test_every_target_ignored_counts_nothing() -> None:
    hidden, weight, bias, targets = _operands(torch.float64)
    loss = linear_cross_entropy(hidden, weight, bias, torch.full_like(targets, -100))
    grads = torch.autograd.grad(loss, (hidden, weight, bias))
    assert loss.item() == 0.0 and all(not g.any() for g in grads)


def test_gradcheck_in_fp64() -> None:
    hidden, weight, bias, targets = _operands(torch.float64, rows=9, d=3, vocab=40)
    assert torch.autograd.gradcheck(
        lambda h, w, b: linear_cross_entropy(h, w, b, targets), (hidden, weight, bias)
    )


def test_which_outputs_take_the_blocks() -> None:
    wide = module.MIN_VOCAB
    assert takes_row_blocks(torch.zeros(2, 4), wide)
    assert takes_row_blocks(torch.zeros(2, 4, dtype=torch.float64), wide)
    assert not takes_row_blocks(torch.zeros(2, 4), wide - 1)  # small vocabularies: torch's
    assert not takes_row_blocks(torch.zeros(2, 4, dtype=torch.bfloat16), wide)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not takes_row_blocks(torch.zeros(2, 4), wide)


def test_the_language_models_loss_through_the_blocks_equals_its_per_token_route(
    tiny_model_config: Callable[..., ModelConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tied output layer (its weight is the embedding's): ``forward``'s summed and mean
    losses and every parameter's gradient, through the blocks, against its per-token NLL
    (``reduction="none"``, ``token_nll``) reduced the same way."""
    from highway_transformer.models import lm

    monkeypatch.setattr(module, "MIN_VOCAB", 40)
    calls = []
    monkeypatch.setattr(
        lm, "linear_cross_entropy", lambda *a: calls.append(1) or module.linear_cross_entropy(*a)
    )
    torch.manual_seed(0)
    model = build_model(tiny_model_config(vocab_size=40, d_model=16, dropout=0.0)).double()
    assert model.output.weight is model.embedding.weight
    parameters = list(model.parameters())
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 40, (3, 11), generator=g)
    targets = torch.randint(0, 40, (3, 8), generator=g)
    targets[0, :2] = -100
    counted = (targets != -100).sum()
    for reduction, divisor in (("sum", 1), ("mean", counted)):
        blocks = model(tokens, targets=targets, reduction=reduction).loss
        per_token = model(tokens, targets=targets, reduction="none").loss.sum() / divisor
        torch.testing.assert_close(blocks, per_token, rtol=1e-12, atol=0)
        for mine, theirs in zip(
            torch.autograd.grad(blocks, parameters),
            torch.autograd.grad(per_token, parameters),
            strict=True,
        ):
            torch.testing.assert_close(mine, theirs, rtol=1e-10, atol=1e-12)
    assert len(calls) == 2  # both reductions went through the blocks
