"""PPO's arithmetic (``tasks/rl/ppo.py``) against its literal oracles (``nn/reference.py``):
GAE over a rollout with episode ends, and the clipped objective with value clipping and the
entropy bonus."""

from __future__ import annotations

import pytest
import torch

from highway_transformer.config import RLConfig
from highway_transformer.nn import reference
from highway_transformer.tasks.rl.ppo import gae, ppo_loss


def test_gae_of_a_hand_computed_three_step_rollout() -> None:
    # gamma 0.9, lambda 0.8; the episode ends with step 1, so step 2 starts a new one:
    # A2 = 2 + 0.9 * 2.0 - 1.5 = 2.3; A1 = 0 - 1.0 = -1.0 (nothing after the end);
    # A0 = (1 + 0.9 * 1.0 - 0.5) + 0.9 * 0.8 * A1 = 1.4 - 0.72 = 0.68
    rewards = torch.tensor([[1.0], [0.0], [2.0]], dtype=torch.float64)
    values = torch.tensor([[0.5], [1.0], [1.5]], dtype=torch.float64)
    dones = torch.tensor([[0.0], [1.0], [0.0]], dtype=torch.float64)
    last = torch.tensor([2.0], dtype=torch.float64)
    expected = torch.tensor([[0.68], [-1.0], [2.3]], dtype=torch.float64)
    for fn in (gae, reference.gae):
        advantages, returns = fn(rewards, values, dones, last, 0.9, 0.8)
        torch.testing.assert_close(advantages, expected, rtol=0, atol=1e-12)
        torch.testing.assert_close(returns, expected + values, rtol=0, atol=1e-12)


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float32, 1e-5), (torch.float64, 1e-12)])
def test_gae_equals_its_oracle_over_random_rollouts(dtype: torch.dtype, tol: float) -> None:
    g = torch.Generator().manual_seed(0)
    steps, envs = 17, 5
    rewards = torch.randn(steps, envs, generator=g, dtype=dtype)
    values = torch.randn(steps, envs, generator=g, dtype=dtype)
    dones = (torch.rand(steps, envs, generator=g) < 0.2).to(dtype)
    last = torch.randn(envs, generator=g, dtype=dtype)
    fast = gae(rewards, values, dones, last, 0.99, 0.95)
    slow = reference.gae(rewards, values, dones, last, 0.99, 0.95)
    for a, b in zip(fast, slow, strict=True):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)
    assert dones.sum() > 0  # the episode ends were exercised


def _minibatch(dtype: torch.dtype, n: int = 24) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    old_logprob = -torch.rand(n, generator=g, dtype=dtype) * 2
    new_logprob = old_logprob + 0.4 * torch.randn(n, generator=g, dtype=dtype)  # some clipped
    advantages = torch.randn(n, generator=g, dtype=dtype)
    old_value = torch.randn(n, generator=g, dtype=dtype)
    new_value = old_value + 0.5 * torch.randn(n, generator=g, dtype=dtype)
    returns = torch.randn(n, generator=g, dtype=dtype)
    entropy = torch.rand(n, generator=g, dtype=dtype)
    return [new_logprob, old_logprob, advantages, new_value, old_value, returns, entropy]


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float32, 1e-5), (torch.float64, 1e-12)])
@pytest.mark.parametrize(("clip_vloss", "norm_adv"), [(True, True), (False, False), (True, False)])
def test_ppo_loss_and_its_gradient_equal_the_oracle(
    dtype: torch.dtype, tol: float, clip_vloss: bool, norm_adv: bool
) -> None:
    rl = RLConfig(clip_coef=0.2, vf_coef=0.5, clip_vloss=clip_vloss, norm_adv=norm_adv)
    fast_in = [t.clone().requires_grad_(i in (0, 3, 6)) for i, t in enumerate(_minibatch(dtype))]
    slow_in = [t.detach().clone().requires_grad_(t.requires_grad) for t in fast_in]
    terms = ppo_loss(*fast_in, rl, ent_coef=0.01)
    slow = reference.ppo_loss(*slow_in, 0.2, 0.5, 0.01, clip_vloss=clip_vloss, norm_adv=norm_adv)
    torch.testing.assert_close(terms.loss, slow, rtol=tol, atol=tol)
    terms.loss.backward()
    slow.backward()
    for a, b in zip(fast_in, slow_in, strict=True):
        if a.requires_grad:
            torch.testing.assert_close(a.grad, b.grad, rtol=tol, atol=tol)
    assert 0 < terms.clipfrac < 1  # both sides of the clip were exercised
    assert terms.approx_kl > 0


def test_value_clipping_changes_the_loss_only_where_the_value_moved_far() -> None:
    args = _minibatch(torch.float64)
    near = [*args]
    near[3] = args[4] + 0.1 * torch.sign(args[3] - args[4])  # within clip_coef of old values
    clipped, plain = RLConfig(clip_vloss=True), RLConfig(clip_vloss=False)
    a, b = ppo_loss(*near, clipped, 0.0), ppo_loss(*near, plain, 0.0)
    torch.testing.assert_close(a.loss, b.loss, rtol=0, atol=1e-12)
    assert ppo_loss(*args, clipped, 0.0).value > ppo_loss(*args, plain, 0.0).value
