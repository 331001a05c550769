"""The rl environments (``tasks/rl/envs.py``, ``corridor.py``): the corridor is a memory test
deterministic given its seed, MiniGrid Memory is read as its flattened 3x3 symbolic view, and
what the policies cannot read is one line naming what is supported."""

from __future__ import annotations

import numpy as np
import pytest

from highway_transformer.config import RLConfig
from highway_transformer.errors import ConfigError
from highway_transformer.tasks.rl.envs import (
    MINIGRID_FEATURES,
    EnvBatch,
    action_count,
    env_spec,
    make_env,
    observation_size,
)

gym = pytest.importorskip("gymnasium")


def _episode(env, actions: list[int]) -> tuple[list[np.ndarray], list[float], dict]:
    observations, rewards = [env.reset(seed=3)[0]], []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        observations.append(obs)
        rewards.append(reward)
        if terminated or truncated:
            return observations, rewards, info
    raise AssertionError("the episode did not end")


def test_the_corridor_shows_its_cue_once_and_rewards_its_recall() -> None:
    env = make_env(RLConfig(corridor_length=3))
    obs, _ = env.reset(seed=3)
    cue = int(np.argmax(obs[:2]))
    observations, rewards, info = _episode(env, [0, 1, 0, cue])
    assert len(rewards) == 4  # corridor_length + 1 steps
    assert observations[0][cue] == 1 and observations[0].sum() == 1
    assert all(o.sum() == 0 for o in observations[1:3])  # the cue is gone
    assert observations[3].tolist() == [0.0, 0.0, 1.0]  # the junction
    assert rewards == [0.0, 0.0, 0.0, 1.0] and info["success"]
    _, wrong, info = _episode(env, [0, 0, 0, 1 - cue])
    assert wrong[-1] == -1.0 and not info["success"]


def test_the_corridor_is_deterministic_given_a_seed_and_draws_both_cues() -> None:
    def cues(seed: int) -> list[int]:
        env = make_env(RLConfig())
        first = env.reset(seed=seed)[0]
        return [int(np.argmax(first[:2]))] + [int(np.argmax(env.reset()[0][:2])) for _ in range(40)]

    assert cues(5) == cues(5)
    assert cues(5) != cues(6)
    assert set(cues(5)) == {0, 1}


def test_an_env_batch_resets_ended_episodes_and_reports_them() -> None:
    rl = RLConfig(corridor_length=2)
    batch = EnvBatch(rl, 3, seed=0)
    cues = batch.obs[:, :2].argmax(1)
    finished = []
    for _ in range(3):
        _, rewards, dones, done_now = batch.step(cues)  # recall the cue at the junction
        finished += done_now
    assert dones.tolist() == [1.0, 1.0, 1.0] and rewards.tolist() == [1.0, 1.0, 1.0]
    assert sorted(finished) == [(0, 1.0, 3, True), (1, 1.0, 3, True), (2, 1.0, 3, True)]
    assert batch.obs[:, :2].sum(1).tolist() == [1.0, 1.0, 1.0]  # new episodes show their cue
    again = EnvBatch(rl, 3, seed=0)
    assert np.array_equal(again.obs, EnvBatch(rl, 3, seed=0).obs)


@pytest.mark.parametrize("size", [7, 9])
def test_minigrid_memory_is_its_flat_3x3_symbolic_view(size: int) -> None:
    pytest.importorskip("minigrid")
    rl = RLConfig(env=f"MiniGrid-MemoryS{size}-v0")
    assert env_spec(rl) == (MINIGRID_FEATURES, 7) and MINIGRID_FEATURES == 27
    env = make_env(rl)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (27,) and obs.dtype == np.float32 and 0 <= obs.min() <= obs.max() <= 1
    assert env.unwrapped.agent_view_size == 3
    again = make_env(rl).reset(seed=0)[0]
    assert np.array_equal(obs, again)


def test_spaces_the_policies_cannot_read_are_one_line_naming_what_is_supported() -> None:
    spaces = gym.spaces
    with pytest.raises(
        ConfigError, match=r"^the rl policies choose among Discrete actions, not Box"
    ) as info:
        action_count(spaces.Box(-1.0, 1.0, shape=(2,)))
    assert "continuous actions are not supported" in str(info.value)
    assert "corridor, proof-of-memory, MiniGrid-MemoryS7-v0" in str(info.value)
    assert "\n" not in str(info.value)
    with pytest.raises(
        ConfigError, match="^the rl policies read flat Box or Discrete observations"
    ):
        observation_size(spaces.Box(0, 255, shape=(7, 7, 3)))
    with pytest.raises(
        ConfigError, match="^the rl policies read flat Box or Discrete observations"
    ):
        observation_size(spaces.Dict({"image": spaces.Box(0, 1, shape=(3,))}))
    assert observation_size(spaces.Box(0, 1, shape=(4,))) == 4
    assert action_count(spaces.Discrete(5)) == 5


def test_an_unknown_environment_names_the_supported_ones() -> None:
    with pytest.raises(
        ConfigError, match=r"^unknown environment \(task.rl.env\) 'CartPole-v1'"
    ) as info:
        make_env(RLConfig(env="CartPole-v1"))
    names = (
        "MiniGrid-MemoryS7-v0, MiniGrid-MemoryS9-v0, corridor, popgym-RepeatPreviousEasy-v0, "
        "proof-of-memory."
    )
    assert f"choose one of: {names}" in str(info.value)
