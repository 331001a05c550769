"""The proof-of-memory corridor: a cue at the start, its recall at the end.

As CleanRL's ``ProofofMemory`` (``ppo_trxl/pom_env.py``), reduced to what tests a memory: the
first observation shows one of two cues, the next ``length - 1`` show nothing, and the last
(the junction) asks for the action the cue named. The right one ends the episode with
reward +1, the wrong one with -1; actions before the junction do nothing. A policy without
memory sees the same junction either way and succeeds half the time. Imported only where
gymnasium is installed (``highway-transformer[rl]``).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

#: Observation features: cue left, cue right, at the junction.
CORRIDOR_FEATURES = 3


class CorridorEnv(gym.Env):
    """``length`` steps from the cue to the junction; episodes last ``length + 1`` steps."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, length: int = 4) -> None:
        self.length = length
        self.action_space = spaces.Discrete(2)
        self.observation_space = spaces.Box(0.0, 1.0, shape=(CORRIDOR_FEATURES,), dtype=np.float32)
        self.cue, self.position = 0, 0

    def _observation(self) -> np.ndarray:
        obs = np.zeros(CORRIDOR_FEATURES, dtype=np.float32)
        if self.position == 0:
            obs[self.cue] = 1.0
        if self.position == self.length:
            obs[2] = 1.0
        return obs

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.cue, self.position = int(self.np_random.integers(2)), 0
        return self._observation(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.position < self.length:
            self.position += 1
            return self._observation(), 0.0, False, False, {}
        success = int(action) == self.cue
        return self._observation(), 1.0 if success else -1.0, True, False, {"success": success}
