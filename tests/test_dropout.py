"""The CPU dropout: torch's distribution and scaling, identity in evaluation, seeded repeats."""

from __future__ import annotations

import pytest
import torch

from highway_transformer.nn.dropout import Dropout, keep_draw


def test_keeps_one_minus_p_and_scales_the_kept() -> None:
    torch.manual_seed(0)
    x = torch.ones(200_000)
    y = Dropout(0.25).train()(x)
    kept = y != 0
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / 0.75))
    assert kept.float().mean().item() == pytest.approx(0.75, abs=0.005)


def test_identity_in_evaluation_and_at_zero() -> None:
    x = torch.randn(4, 7)
    assert torch.equal(Dropout(0.5).eval()(x), x)
    assert torch.equal(Dropout(0.0).train()(x), x)
    assert torch.equal(Dropout(1.0).train()(x), torch.zeros_like(x))


def test_gradient_is_the_mask_and_seeded_runs_repeat() -> None:
    x = torch.randn(3, 50, requires_grad=True)
    torch.manual_seed(1)
    y = Dropout(0.3).train()(x)
    y.sum().backward()
    assert torch.equal(x.grad, (y != 0).float() / 0.7)
    torch.manual_seed(1)
    assert torch.equal(Dropout(0.3).train()(x), y)


def test_keeps_the_input_dtype() -> None:
    x = torch.randn(8, 8, dtype=torch.bfloat16)
    assert Dropout(0.1).train()(x).dtype == torch.bfloat16


def test_the_mask_is_independent_of_position_and_draw() -> None:
    """Two masks in a row differ, and neighbouring elements are uncorrelated (the generator
    is re-seeded from torch's for every mask)."""
    torch.manual_seed(2)
    first = keep_draw((400_000,), 0.5)
    second = keep_draw((400_000,), 0.5)
    assert not torch.equal(first, second)
    for a, b in ((first[:-1], first[1:]), (first, second)):
        correlation = torch.corrcoef(torch.stack([a, b]))[0, 1].item()
        assert abs(correlation) < 0.01  # 5 standard errors at n = 400,000


def test_the_mask_follows_torchs_generator_state() -> None:
    """A checkpoint stores torch's RNG state: restoring it repeats the next masks."""
    torch.manual_seed(3)
    keep_draw((10,), 0.2)
    state = torch.get_rng_state()
    after = keep_draw((1000,), 0.2)
    torch.set_rng_state(state)
    assert torch.equal(keep_draw((1000,), 0.2), after)
