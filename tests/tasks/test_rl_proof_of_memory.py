"""``task.rl.env=proof-of-memory`` (``tasks/rl/proof_of_memory.py``): CleanRL's
ProofofMemory-v0 under gymnasium's API checks, solved by a policy that remembers the goals,
and left at one layout of two by any policy that does not."""

from __future__ import annotations

import numpy as np
import pytest

from highway_transformer.config import RLConfig
from highway_transformer.errors import ConfigError
from highway_transformer.validation import validate

gym = pytest.importorskip("gymnasium")

from highway_transformer.config import Config, TaskConfig  # noqa: E402
from highway_transformer.tasks.rl.envs import EnvBatch, env_spec, make_env  # noqa: E402
from highway_transformer.tasks.rl.proof_of_memory import (  # noqa: E402
    GOAL_CELL,
    GOAL_REWARD,
    MAX_EPISODE_STEPS,
    STEP_SIZE,
    TIME_PENALTY,
)

RL = RLConfig(env="proof-of-memory")


def play(seed: int, policy) -> tuple[list[np.ndarray], list[float], bool, bool]:
    """(observations, rewards, terminated, success) of one episode; ``policy(obs, t)``."""
    env = make_env(RL)
    observations, rewards = [env.reset(seed=seed)[0]], []
    for t in range(MAX_EPISODE_STEPS + 1):
        obs, reward, terminated, truncated, info = env.step(policy(observations, t))
        observations.append(obs)
        rewards.append(reward)
        if terminated or truncated:
            return observations, rewards, terminated, info["success"]
    raise AssertionError("the episode outlived its time limit")


def remembering(observations: list[np.ndarray], t: int) -> int:
    """Walk towards the goal that the first observation showed rewarding."""
    return 1 if observations[0][2] > 0 else 0


def test_it_passes_gymnasium_checks_and_is_deterministic_given_its_seed() -> None:
    from gymnasium.utils.env_checker import check_env

    env = make_env(RL)
    check_env(env, skip_render_check=True)
    assert env_spec(RL) == (3, 2)
    starts = [make_env(RL).reset(seed=s)[0].tolist() for s in range(30)]
    assert starts == [make_env(RL).reset(seed=s)[0].tolist() for s in range(30)]
    assert {round(o[1], 2) for o in starts} == {-0.4, -0.2, 0.0, 0.2, 0.4}
    assert {(o[0], o[2]) for o in starts} == {(-1.0, 1.0), (1.0, -1.0)}


def test_goals_show_for_three_observations_while_the_agent_is_frozen() -> None:
    observations, rewards, _, _ = play(0, lambda obs, t: 1)
    start = observations[0][1]
    assert all(np.array_equal(o, observations[0]) for o in observations[:3])
    assert rewards[:2] == [0.0, 0.0]
    assert observations[3][[0, 2]].tolist() == [0.0, 0.0]  # hidden from the first move on
    assert observations[3][1] == pytest.approx(start + STEP_SIZE)


def test_remembering_the_goals_reaches_the_best_return_every_time() -> None:
    for seed in range(40):
        observations, rewards, terminated, success = play(seed, remembering)
        cell = round(observations[0][1] / STEP_SIZE)
        moves = GOAL_CELL - (cell if observations[0][2] > 0 else -cell)  # the shortest way
        assert terminated and success and len(rewards) == 2 + moves
        assert sum(rewards) == pytest.approx(GOAL_REWARD - (moves - 1) * TIME_PENALTY)


def test_without_memory_the_two_goal_layouts_look_alike_and_one_of_them_fails() -> None:
    table = np.random.default_rng(0).integers(2, size=2 * GOAL_CELL + 1)

    def memoryless(observations: list[np.ndarray], t: int) -> int:  # position -> action
        return int(table[round(observations[-1][1] / STEP_SIZE) + GOAL_CELL])

    by_start: dict[float, dict[float, tuple]] = {}
    for seed in range(60):
        observations, _, _, success = play(seed, memoryless)
        hidden = tuple(tuple(o) for o in observations[3:])
        by_start.setdefault(observations[0][1], {})[observations[0][0]] = (hidden, success)
    pairs = [layouts for layouts in by_start.values() if len(layouts) == 2]
    assert len(pairs) == 5  # every start cell with both layouts
    for left_bad, left_good in (layouts.values() for layouts in pairs):
        assert left_bad[0] == left_good[0]  # the same observations once the goals are hidden
        # the same end cell: one layout's success is the other's failure (or both time out)
        assert not (left_bad[1] and left_good[1])


def test_an_undecided_walk_is_cut_at_the_time_limit() -> None:
    observations, rewards, terminated, success = play(0, lambda obs, t: t % 2)
    assert not terminated and not success and len(rewards) == MAX_EPISODE_STEPS
    assert sum(rewards) == pytest.approx(-(MAX_EPISODE_STEPS - 2) * TIME_PENALTY)


def test_a_batch_reports_successes_and_refuses_a_corridor_length() -> None:
    batch = EnvBatch(RL, 4, seed=0)
    goal_right, finished = np.zeros(4, dtype=int), []
    for _ in range(3 * MAX_EPISODE_STEPS):
        shown = batch.obs[:, 0] != 0  # a new episode's goals are on view
        goal_right[shown] = batch.obs[shown, 2] > 0
        finished += batch.step(goal_right)[3]
    assert len(finished) >= 8 and {i for i, *_ in finished} == {0, 1, 2, 3}
    assert all(success and ret > 0 for _, ret, _, success in finished)
    config = Config(task=TaskConfig(name="rl", rl=RLConfig(env="proof-of-memory")))
    with pytest.raises(ConfigError, match="corridor_length applies to task.rl.env=corridor"):
        validate(config.replace(**{"task.rl.corridor_length": 8}))
