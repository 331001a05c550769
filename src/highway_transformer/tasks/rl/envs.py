"""The environments of ``task.name=rl`` and what the policies read of them.

``corridor`` (:mod:`.corridor`, 3 features, 2 actions), ``proof-of-memory`` (CleanRL's
``ProofofMemory-v0``, :mod:`.proof_of_memory`, 3 features, 2 actions) and MiniGrid's
``Memory`` rooms with the 3x3 egocentric symbolic view flattened (``agent_view_size=3``:
3 x 3 cells of object, colour and state = :data:`MINIGRID_FEATURES` features, each divided by
its largest value; 7 actions), and popgym's ``RepeatPreviousEasy`` (:mod:`.popgym_envs`, its
``Discrete(4)`` suit one-hot: 4 features, 4 actions). gymnasium, minigrid and popgym are
imported when an environment is made, never at import time (the ``rl`` extra).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...config.names import RL_ENV_NAMES
from ...config.schema import RLConfig
from ...errors import ConfigError, unknown_choice
from ...extras import import_extra

#: MiniGrid's egocentric view: 3 x 3 cells, 3 symbols a cell (object, colour, state).
MINIGRID_VIEW = 3
MINIGRID_FEATURES = MINIGRID_VIEW * MINIGRID_VIEW * 3
#: Largest symbol of each channel (minigrid's OBJECT_TO_IDX, COLOR_TO_IDX, STATE_TO_IDX).
MINIGRID_SCALE = np.array([10.0, 5.0, 2.0], dtype=np.float32)


def _corridor(rl: RLConfig) -> Any:
    import_extra("gymnasium", "task.name=rl")
    from .corridor import CorridorEnv

    return CorridorEnv(rl.corridor_length)


def _proof_of_memory(rl: RLConfig) -> Any:
    import_extra("gymnasium", "task.name=rl")
    from .proof_of_memory import ProofOfMemoryEnv

    return ProofOfMemoryEnv()


def _minigrid(rl: RLConfig) -> Any:
    gym = import_extra("gymnasium", "task.name=rl")
    import_extra("minigrid", f"task.rl.env={rl.env}")  # registers the MiniGrid ids
    env = gym.make(rl.env, agent_view_size=MINIGRID_VIEW)
    return gym.wrappers.TransformObservation(env, _minigrid_features, _minigrid_space(gym))


def _popgym(rl: RLConfig) -> Any:
    from .popgym_envs import repeat_previous_easy

    return repeat_previous_easy(rl.env)


#: ``task.rl.env`` -> maker of a fresh environment (gymnasium API).
ENVS: dict[str, Callable[[RLConfig], Any]] = {
    "corridor": _corridor,
    "proof-of-memory": _proof_of_memory,
    "MiniGrid-MemoryS7-v0": _minigrid,
    "MiniGrid-MemoryS9-v0": _minigrid,
    "popgym-RepeatPreviousEasy-v0": _popgym,
}


def make_env(rl: RLConfig) -> Any:
    """A fresh environment of ``rl.env``."""
    if rl.env not in ENVS:
        raise unknown_choice("environment (task.rl.env)", rl.env, RL_ENV_NAMES)
    return ENVS[rl.env](rl)


def _minigrid_features(obs: dict[str, Any]) -> np.ndarray:
    return (obs["image"].astype(np.float32) / MINIGRID_SCALE).reshape(-1)


def _minigrid_space(gym: Any) -> Any:
    return gym.spaces.Box(0.0, 1.0, shape=(MINIGRID_FEATURES,), dtype=np.float32)


def observation_size(space: Any) -> int:
    """Features of an observation: a flat ``Box``'s length, or a ``Discrete`` space's ``n``
    (one-hot, :func:`observation_encoder`); any other space is refused."""
    if type(space).__name__ == "Discrete":
        return int(space.n)
    shape = getattr(space, "shape", None)
    if type(space).__name__ != "Box" or shape is None or len(shape) != 1:
        raise ConfigError(
            f"the rl policies read flat Box or Discrete observations, not {space}; "
            f"use one of the environments {', '.join(RL_ENV_NAMES)}"
        )
    return int(shape[0])


def observation_encoder(space: Any) -> Callable[[Any], np.ndarray]:
    """What the policies read of an observation of ``space``: a ``Discrete`` one as one-hot
    features (so its values are not read as magnitudes), a ``Box`` one as it is."""
    size = observation_size(space)
    if type(space).__name__ != "Discrete":
        return lambda obs: np.asarray(obs, dtype=np.float32)
    eye, start = np.eye(size, dtype=np.float32), int(space.start)
    return lambda obs: eye[int(obs) - start]


def action_count(space: Any) -> int:
    """Actions of a ``Discrete`` space; continuous (``Box``) and other spaces are refused."""
    if type(space).__name__ != "Discrete":
        raise ConfigError(
            f"the rl policies choose among Discrete actions, not {space} (continuous actions "
            f"are not supported); use one of the environments {', '.join(RL_ENV_NAMES)}"
        )
    return int(space.n)


def env_spec(rl: RLConfig) -> tuple[int, int]:
    """(observation features, actions) of ``rl.env``, read from one fresh environment."""
    env = make_env(rl)
    try:
        return observation_size(env.observation_space), action_count(env.action_space)
    finally:
        env.close()


class EnvBatch:
    """``n`` environments stepped together, each reset as its episode ends.

    Environment ``i`` is seeded ``seed + i`` at its first reset and continues its own random
    stream after, so a batch is deterministic given its seed. Episodes cut by a time limit
    count as ended (their value is not bootstrapped).
    """

    def __init__(self, rl: RLConfig, n: int, seed: int) -> None:
        self.envs = [make_env(rl) for _ in range(n)]
        self.encode = observation_encoder(self.envs[0].observation_space)
        self.obs = np.stack(
            [self.encode(env.reset(seed=seed + i)[0]) for i, env in enumerate(self.envs)]
        )
        self.returns = np.zeros(n)
        self.lengths = np.zeros(n, dtype=np.int64)
        # what replays each environment's episode so far: how it was reset (its seed, or its
        # random stream's state just before) and the actions taken since
        self.starts: list[dict[str, Any]] = [{"seed": seed + i} for i in range(n)]
        self.actions: list[list[int]] = [[] for _ in range(n)]

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
        """(next observations, rewards, dones, finished episodes as (env, return, length,
        success)); an ended environment's next observation is its new episode's first."""
        rewards, dones, finished = np.zeros(len(self.envs)), np.zeros(len(self.envs)), []
        for i, env in enumerate(self.envs):
            obs, reward, terminated, truncated, info = env.step(int(actions[i]))
            rewards[i] = reward
            self.returns[i] += reward
            self.lengths[i] += 1
            self.actions[i].append(int(actions[i]))
            if terminated or truncated:
                success = bool(info.get("success", reward > 0))
                finished.append((i, float(self.returns[i]), int(self.lengths[i]), success))
                self.returns[i], self.lengths[i], dones[i] = 0.0, 0, 1.0
                self.starts[i] = {"rng": env.unwrapped.np_random.bit_generator.state}
                self.actions[i] = []
                obs, _ = env.reset()
            self.obs[i] = self.encode(obs)
        return self.obs.copy(), rewards, dones, finished

    def state_dict(self) -> dict[str, Any]:
        """The episodes in progress, JSON-able: :meth:`restore` replays them."""
        return {
            "starts": [dict(s) for s in self.starts],
            "actions": [list(a) for a in self.actions],
        }

    @classmethod
    def restore(cls, rl: RLConfig, state: dict[str, Any]) -> EnvBatch:
        """Fresh environments brought to :meth:`state_dict`'s: each reset as it was, then
        stepped through its episode's actions (any environment, no state of its own read)."""
        starts, actions = state["starts"], state["actions"]
        batch = cls.__new__(cls)
        batch.envs = [make_env(rl) for _ in starts]
        batch.encode = observation_encoder(batch.envs[0].observation_space)
        batch.starts, batch.actions = [dict(s) for s in starts], [list(a) for a in actions]
        batch.returns, batch.lengths = np.zeros(len(starts)), np.zeros(len(starts), dtype=np.int64)
        batch.obs = np.stack([batch._replay(i) for i in range(len(starts))])
        return batch

    def _replay(self, i: int) -> np.ndarray:
        env, start = self.envs[i], self.starts[i]
        if "rng" in start:
            env.unwrapped.np_random.bit_generator.state = start["rng"]
        obs, _ = env.reset(seed=start.get("seed"))
        for action in self.actions[i]:
            obs, reward, terminated, truncated, _ = env.step(int(action))
            self.returns[i] += reward
            self.lengths[i] += 1
            if terminated or truncated:
                raise ValueError(f"environment {i}'s saved episode ends before its last action")
        return self.encode(obs)

    def close(self) -> None:
        for env in self.envs:
            env.close()
