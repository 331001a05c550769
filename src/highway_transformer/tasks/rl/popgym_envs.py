"""popgym's ``RepeatPreviousEasy`` (Morad et al. 2023), read as the rl task reads any environment.

One deck of 52 cards is dealt one card a step; the observation is the suit of the card just
dealt (``Discrete(4)``) and the action names a suit. From the 4th step on, the action is
scored against the suit of the card dealt 3 cards before the one on view (the 4th card of
the hand from its end, popgym's ``k = 4``): +1/48 when it matches, -1/48 otherwise. 51 steps,
48 scored, so the return is ``2 x correct / 48 - 1`` in ``[-1, 1]``.

Success is the episode's return above 0: more of its 48 guesses right than wrong. A random
policy is right a quarter of the time (return -0.5) and a memoryless one, which sees only the
card on view, at most 13 times in 51 (the suit 3 cards back differs from the one on view more
often than it matches, by 13 to 12 cards); more than half right is then > 4 standard
deviations above either, so success says the policy remembers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import MissingExtra
from ...extras import import_extra

#: popgym's RepeatPreviousEasy: 52 cards dealt, the target 3 cards before the one on view.
CARDS, SUITS, LAG = 52, 4, 3
#: Scored steps of an episode (the first LAG steps have no target yet) and the steps in all.
SCORED_STEPS, EPISODE_STEPS = CARDS - 1 - LAG, CARDS - 1


def repeat_previous_easy(env: str) -> Any:
    """A fresh ``RepeatPreviousEasy`` that reports ``success`` when its episode ends."""
    gym = import_extra("gymnasium", "task.name=rl")
    try:
        import_extra("popgym", f"task.rl.env={env}")
    except MissingExtra as missing:  # popgym alone is enough for this environment
        raise MissingExtra(f"{missing} (or pip install popgym)") from None
    from popgym.envs.repeat_previous import RepeatPreviousEasy

    class ReportsSuccess(gym.Wrapper):
        """Adds ``info["success"]`` (the episode's return above 0) at its end."""

        def reset(self, **kwargs: Any) -> Any:
            self.episode_return = 0.0
            return self.env.reset(**kwargs)

        def step(self, action: Any) -> Any:
            obs, reward, terminated, truncated, info = self.env.step(action)
            self.episode_return += float(reward)
            if terminated or truncated:
                info = {**info, "success": self.episode_return > 0}
            return obs, reward, terminated, truncated, info

    return ReportsSuccess(RepeatPreviousEasy())


#: A uniformly random policy's expected return: right 1 time in 4 on every scored step.
RANDOM_RETURN = 2 * (1 / SUITS) - 1


def best_memoryless_return(suits: np.ndarray) -> float:
    """The mean return of the best memoryless policy on these episodes (``suits``: the suit
    on view at each of their 51 steps): one suit named for each suit on view, the one most
    often 3 cards back on these very episodes (chosen with hindsight, so no memoryless
    policy's greedy episodes score more)."""
    seen, target = suits[:, LAG:EPISODE_STEPS].ravel(), suits[:, :SCORED_STEPS].ravel()
    counts = np.zeros((SUITS, SUITS), dtype=np.int64)
    np.add.at(counts, (seen, target), 1)
    correct = counts.max(axis=1).sum()
    return float(2 * correct / target.size - 1)
