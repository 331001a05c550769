"""The CPU dropout: torch's distribution and scaling, identity in evaluation, seeded repeats;
attention-weight dropout on the CPU against a float64 oracle."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from highway_transformer.nn import attention
from highway_transformer.nn import dropout as dropout_module
from highway_transformer.nn.dropout import Dropout, KeepDraws, keep_draw, keep_threshold
from highway_transformer.nn.reference import scaled_dot_attention


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


def _float_draws_kept(seed: int, sizes: list[int], p: float) -> list[torch.Tensor]:
    """The oracle: numpy's float32 draws of one generator, call after call, compared with
    ``p`` by torch (the masks before the draws were compared as words)."""
    generator = np.random.Generator(np.random.SFC64(seed))
    return [torch.from_numpy(generator.random(n, dtype=np.float32)).ge_(p) for n in sizes]


@pytest.mark.parametrize("p", [1e-9, 0.05, 0.1, 0.15, 0.25, 1 / 3, 0.35, 0.5, 0.9, 0.999999])
def test_the_words_make_numpys_float_draws_mask_bit_for_bit(p: float) -> None:
    """Odd sizes in a row (numpy keeps the unused half of a 64-bit output for the next
    call, and so do the words) and every dropout rate of the presets."""
    sizes = [7, 1, 0, 12, 333, 1000, 5]
    torch.manual_seed(11)
    seed = int(torch.randint(0, 1 << 62, (1,)))
    torch.manual_seed(11)
    draws = KeepDraws()
    for mine, oracle in zip(
        (draws.keep((n,), p) for n in sizes), _float_draws_kept(seed, sizes, p), strict=True
    ):
        assert mine.dtype == torch.float32
        assert torch.equal(mine, oracle)


def test_the_threshold_is_torchs_comparison_at_its_edges() -> None:
    """Exactly at a 24-bit draw, just below and above it, and p rounding to 1 in float32."""
    for count in (1, 5_872_026, (1 << 24) - 1):
        draw = count / (1 << 24)
        for p in (draw, np.nextafter(draw, 0.0), np.nextafter(draw, 1.0)):
            threshold = keep_threshold(float(p))
            words = np.array([(count << 8) - 1, count << 8, (count << 8) + 255], dtype=np.uint32)
            kept = torch.from_numpy(((words >> 8) / (1 << 24)).astype(np.float32)).ge(float(p))
            assert torch.equal(torch.from_numpy(words >= threshold), kept)
    assert keep_threshold(1 - 1e-12) is None
    torch.manual_seed(12)
    assert not keep_draw((100,), 1 - 1e-12).any()


# --------------------------------------------------------------------------- attention weights


def reference_attention(q, k, v, allowed, keep, p: float, scale: float):
    """softmax(scale·q kᵀ, masked) · keep / (1 − p) · v in float64 (the oracle,
    :func:`highway_transformer.nn.reference.scaled_dot_attention`)."""
    q, k, v, keep = (t.double() for t in (q, k, v, keep))
    return scaled_dot_attention(q, k, v, ~allowed, scale, keep / (1 - p))


@pytest.mark.parametrize("masking", ["causal", "mask", "none"])
def test_attention_dropout_on_the_cpu_is_the_reference_maths(monkeypatch, masking) -> None:
    """The written-out path (every score tensor below the blocks' size takes it)."""
    torch.manual_seed(4)
    b, h, lq, lk, d, p = 2, 3, 5, 5, 4, 0.3
    q, k, v = (torch.randn(b, h, n, d, requires_grad=True) for n in (lq, lk, lk))
    keep = (torch.rand(b, h, lq, lk) >= p).float()
    monkeypatch.setattr(dropout_module, "keep_draw", lambda shape, p_, device=None: keep.clone())
    causal = attention.causal_mask(lq, lk, q.device)
    mask = {"causal": None, "mask": torch.rand(lq, lk) < 0.7, "none": None}[masking]
    if mask is not None:
        mask[:, 0] = True  # every query keeps a key
    allowed = {"causal": causal, "mask": mask, "none": torch.ones(lq, lk, dtype=torch.bool)}
    out = attention.attend(q, k, v, mask, masking == "causal", p, scale=0.7)
    want = reference_attention(q, k, v, allowed[masking], keep, p, 0.7)
    torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-6)
    grads = torch.autograd.grad(out.pow(2).sum(), (q, k, v))
    want_grads = torch.autograd.grad(want.pow(2).sum(), (q, k, v))
    for got, expected in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)  # float32 leaves


def test_attention_without_dropout_or_off_the_cpu_is_torchs_kernel() -> None:
    q, k, v = torch.randn(3, 2, 2, 6, 4).unbind(0)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.equal(attention.attend(q, k, v, None, True, 0.0), want)


def test_attention_dropout_averages_to_the_undropped_weights() -> None:
    torch.manual_seed(5)
    q, k, v = torch.randn(3, 1, 2, 6, 4).unbind(0)
    undropped = attention.attend(q, k, v, None, True, 0.0)
    mean = torch.stack([attention.attend(q, k, v, None, True, 0.25) for _ in range(4000)]).mean(0)
    torch.testing.assert_close(mean, undropped, rtol=0, atol=0.05)  # > 5 standard errors


def test_attention_dropout_keeps_low_precision() -> None:
    q, k, v = torch.randn(3, 1, 2, 6, 4, dtype=torch.bfloat16).unbind(0)
    assert attention.attend(q, k, v, None, True, 0.1).dtype == torch.bfloat16


def test_under_compile_the_masks_are_torchs_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy's draw cannot be traced: under torch.compile the masks come from torch's
    generator (same distribution, another random stream than an eager CPU run)."""
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    x = torch.ones(2000)
    torch.manual_seed(6)
    masks = (keep_draw((2000,), 0.3), Dropout(0.3).train()(x), dropout_module.dropout(x, 0.3))
    torch.manual_seed(6)
    assert torch.equal(masks[0], torch.rand(2000).ge_(0.3))
    assert torch.equal(masks[1], torch.nn.functional.dropout(x, 0.3))
    assert torch.equal(masks[2], torch.nn.functional.dropout(x, 0.3))
