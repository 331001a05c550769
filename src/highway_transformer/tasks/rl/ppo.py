"""PPO's arithmetic, vectorised: GAE over a rollout and the clipped objective.

Oracles: :func:`highway_transformer.nn.reference.gae` and
:func:`highway_transformer.nn.reference.ppo_loss` (tests/tasks/test_rl_ppo.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ...config.schema import RLConfig


def gae(
    rewards: Tensor, values: Tensor, dones: Tensor, last_value: Tensor, gamma: float, lam: float
) -> tuple[Tensor, Tensor]:
    """(advantages, returns) of a time-major rollout ``[T, N]``; ``dones[t]``: the episode
    ended with step ``t``, ``last_value [N]`` bootstraps the step after the rollout."""
    advantages = torch.empty_like(rewards)
    following = torch.zeros_like(last_value)
    next_value = last_value
    for t in range(rewards.shape[0] - 1, -1, -1):  # one pass back over time, envs at once
        alive = 1.0 - dones[t]
        delta = rewards[t] + gamma * alive * next_value - values[t]
        following = delta + gamma * lam * alive * following
        advantages[t] = following
        next_value = values[t]
    return advantages, advantages + values


@dataclass
class PPOTerms:
    """The loss and the figures logged beside it (detached 0-d tensors: read as numbers only
    when a training record is written, not at every minibatch)."""

    loss: Tensor
    policy: Tensor
    value: Tensor
    entropy: Tensor
    approx_kl: Tensor  # (ρ - 1) - log ρ, averaged (Schulman's unbiased estimator)
    clipfrac: Tensor  # fraction of samples whose ratio was clipped


def ppo_loss(  # noqa: PLR0913 - the objective's terms
    new_logprob: Tensor,
    old_logprob: Tensor,
    advantages: Tensor,
    new_value: Tensor,
    old_value: Tensor,
    returns: Tensor,
    entropy: Tensor,
    rl: RLConfig,
    ent_coef: float,
) -> PPOTerms:
    """PPO's clipped surrogate, (clipped) value loss and entropy bonus over a flat minibatch."""
    if rl.norm_adv and advantages.numel() > 1:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    log_ratio = new_logprob - old_logprob
    ratio = log_ratio.exp()
    clipped = ratio.clamp(1 - rl.clip_coef, 1 + rl.clip_coef)
    policy = torch.maximum(-advantages * ratio, -advantages * clipped).mean()
    value_sq = (new_value - returns).square()
    if rl.clip_vloss:
        moved = old_value + (new_value - old_value).clamp(-rl.clip_coef, rl.clip_coef)
        value_sq = torch.maximum(value_sq, (moved - returns).square())
    value = 0.5 * value_sq.mean()
    bonus = entropy.mean()
    with torch.no_grad():
        kl = ((ratio - 1) - log_ratio).mean()
        frac = ((ratio - 1).abs() > rl.clip_coef).float().mean()
    loss = policy + rl.vf_coef * value - ent_coef * bonus
    return PPOTerms(loss, policy.detach(), value.detach(), bonus.detach(), kl, frac)
