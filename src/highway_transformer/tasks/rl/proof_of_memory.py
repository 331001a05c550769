"""CleanRL's ``ProofofMemory-v0`` (``ppo_trxl/pom_env.py``) with its defaults, seeded.

A one-dimensional grid of cells ``-5 .. 5`` (positions ``cell x 0.2``); a goal at each end,
one rewarding and one punishing. The agent starts on a cell drawn from ``-2 .. 2``; for the
first two steps it is frozen, and its observation ``[left goal, position, right goal]`` shows
the goals (+1 rewarding, -1 punishing) at the reset and after each frozen step; after that
they read 0 and each action moves it one
cell (0 left, 1 right). Reaching the rewarding goal ends the episode with ``+1.6`` (1 plus
6 steps of time penalty), the punishing one with ``-1.6``; every other moving step costs 0.1;
16 steps in all (the id's time limit), then the episode is cut. Without memory of the first
two observations the later ones are the same for both goal layouts: half the episodes.

Differences from pom_env.py: the draws come from the environment's own generator (seeded by
``reset(seed=...)``) rather than numpy's global one, there is no rendering, and the time limit
is part of the environment rather than a ``TimeLimit`` wrapper.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

#: pom_env.py's defaults: step size 0.2, goals at +-1 (cell 5), 2 steps showing the goals.
STEP_SIZE, GOAL_CELL, SHOW_STEPS = 0.2, 5, 2
#: Start cells (pom_env.py's ``possible_positions``: -0.4 .. 0.4) and the episode's steps.
START_CELLS, MAX_EPISODE_STEPS = (-2, -1, 0, 1, 2), 16
TIME_PENALTY = 0.1
#: The goal's reward: 1 plus the time penalty of the shortest way from the centre.
GOAL_REWARD = 1.0 + (GOAL_CELL + 1) * TIME_PENALTY


class ProofOfMemoryEnv(gym.Env):
    """Two frozen steps showing the goals, then up to 14 moves towards one of them."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self) -> None:
        self.action_space = spaces.Discrete(2)
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
        self.goals, self.cell, self.steps = np.array([-1.0, 1.0]), 0, 0

    def _observation(self, shown: bool) -> np.ndarray:
        left, right = self.goals if shown else (0.0, 0.0)
        return np.array([left, round(self.cell * STEP_SIZE, 2), right], dtype=np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.cell = int(self.np_random.choice(START_CELLS))
        self.goals = self.np_random.permutation(np.array([-1.0, 1.0]))
        self.steps = 0
        return self._observation(shown=True), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        frozen = self.steps < SHOW_STEPS
        self.steps += 1
        if frozen:  # the goals stay on view (3 observations in all); the agent cannot move
            return self._observation(shown=True), 0.0, False, False, {}
        self.cell += 1 if int(action) == 1 else -1
        obs, truncated = self._observation(shown=False), self.steps >= MAX_EPISODE_STEPS
        if abs(self.cell) < GOAL_CELL:
            return obs, -TIME_PENALTY, False, truncated, {"success": False}
        success = bool(self.goals[0 if self.cell < 0 else 1] > 0)
        reward = GOAL_REWARD if success else -GOAL_REWARD
        return obs, reward, True, False, {"success": success}
