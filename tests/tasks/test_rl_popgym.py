"""popgym's RepeatPreviousEasy in ``task.name=rl`` (``tasks/rl/popgym_envs.py``): its suit read
one-hot, its scoring (the card 3 before the one on view) and success checked by playing it, its
chance lines against episodes played literally, and its settings refused in one line."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from highway_transformer.config import RLConfig
from highway_transformer.errors import ConfigError, MissingExtra
from highway_transformer.presets import get_preset
from highway_transformer.tasks import RLTask
from highway_transformer.tasks.rl import EVAL_SEEDS
from highway_transformer.tasks.rl.envs import EnvBatch, env_spec, make_env, observation_encoder
from highway_transformer.tasks.rl.popgym_envs import RANDOM_RETURN, SCORED_STEPS
from highway_transformer.training.trainer import train
from highway_transformer.validation import validate

gym = pytest.importorskip("gymnasium")
ENV = "popgym-RepeatPreviousEasy-v0"
RL = RLConfig(env=ENV)


def _needs_popgym() -> None:
    pytest.importorskip("popgym", reason=f"{ENV} needs the rl extra's popgym")


def _play(choose) -> tuple[list[int], float, int, bool]:  # noqa: ANN001 - suits seen -> action
    """One episode of seed 3 through :class:`EnvBatch`: the suits on view, and its return,
    length and success as the batch reports them."""
    batch = EnvBatch(RL, 1, seed=3)
    seen = [int(batch.obs[0].argmax())]
    while True:
        obs, _, _, finished = batch.step(np.array([choose(seen)]))
        if finished:
            return seen, *finished[0][1:]
        seen.append(int(obs[0].argmax()))


def test_a_discrete_observation_is_read_one_hot() -> None:
    encode = observation_encoder(gym.spaces.Discrete(3, start=1))
    assert encode(2).tolist() == [0.0, 1.0, 0.0] and encode(1).dtype == np.float32
    box = observation_encoder(gym.spaces.Box(0, 1, shape=(2,)))
    assert box([0.5, 1]).tolist() == [0.5, 1.0]


def test_repeat_previous_easy_scores_the_suit_three_cards_before_the_one_on_view() -> None:
    _needs_popgym()
    assert env_spec(RL) == (4, 4)
    obs = EnvBatch(RL, 2, seed=0).obs
    assert obs.shape == (2, 4) and (obs.sum(1) == 1).all()  # one suit each, one-hot
    # remembering: the card 3 before the one on view, once there is one
    seen, ret, length, success = _play(lambda seen: seen[-4] if len(seen) >= 4 else 0)
    assert (length, ret, success) == (51, pytest.approx(1.0), True) and len(seen) == 51
    # naming suit 0 always: right as often as suit 0 is among the 48 scored targets
    seen, ret, length, success = _play(lambda seen: 0)
    right = seen[:SCORED_STEPS].count(0)
    assert ret == pytest.approx(2 * right / SCORED_STEPS - 1) and not success
    assert len(seen) == 51 and sorted(np.bincount(seen, minlength=4))[-1] <= 13  # one deck


def test_the_chance_lines_are_a_random_and_the_best_memoryless_policy() -> None:
    _needs_popgym()
    config = validate(
        get_preset("rl/corridor-mlp").replace(
            **{"task.rl.env": ENV, "train.device": "cpu", "task.rl.eval_episodes": 24}
        )
    )
    task = RLTask(config, torch.device("cpu"))
    lines = task.trivial_losses("valid")
    assert lines["random policy"] == pytest.approx(0.5) and RANDOM_RETURN == -0.5
    # the best suit to name for each suit on view, counted by hand on the split's decks
    suits = task.eval_suits("valid")
    counts = np.zeros((4, 4))
    for episode in suits:
        for t in range(SCORED_STEPS):
            counts[episode[t + 3], episode[t]] += 1
    mapping = counts.argmax(1)
    # played literally: that mapping's greedy episodes return what the line says
    n = config.task.rl.eval_episodes
    envs = EnvBatch(config.task.rl, n, config.train.seed + EVAL_SEEDS["valid"])
    returns: dict[int, float] = {}
    while len(returns) < n:
        for i, ret, _, _ in envs.step(mapping[envs.obs.argmax(1)])[3]:
            returns.setdefault(i, ret)
    assert lines["memoryless policy"] == pytest.approx(-np.mean(list(returns.values())))
    # 13 matches in 51 a step at best in expectation: near chance, a little above it
    assert -0.5 < -lines["memoryless policy"] < -0.4
    # and a random policy's greedy-split return is -0.5 on average
    rng = np.random.default_rng(0)
    random_returns = []
    for _ in range(10):
        envs = EnvBatch(config.task.rl, n, config.train.seed + EVAL_SEEDS["valid"])
        for _ in range(51):
            random_returns += [e[1] for e in envs.step(rng.integers(0, 4, n))[3]]
    assert np.mean(random_returns) == pytest.approx(RANDOM_RETURN, abs=0.03)


def test_a_short_run_trains_and_is_checked_against_the_memoryless_line(tmp_path: Path) -> None:
    _needs_popgym()
    config = get_preset("rl/corridor-gtrxl").replace(
        **{
            "task.rl.env": ENV,
            "train.max_steps": 16,
            "train.eval_interval": 16,
            "task.rl.eval_episodes": 4,
            "train.device": "cpu",
        }  # fmt: skip
    )
    results = train(config, tmp_path / "run", progress=False)
    assert -1.0 <= results["valid"]["return"] <= 1.0
    assert results["learned"]["baseline"] in ("memoryless policy", "random policy")


def test_a_corridor_setting_on_it_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError) as info:
        validate(get_preset("rl/corridor-gtrxl").replace(
            **{"task.rl.env": ENV, "task.rl.corridor_length": 8}))  # fmt: skip
    message = str(info.value)
    assert message.startswith(f"task.rl.corridor_length applies to task.rl.env=corridor, not {ENV}")
    assert "\n" not in message


def test_without_popgym_it_names_the_install_commands(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "popgym", None)
    with pytest.raises(MissingExtra) as info:
        make_env(RL)
    message = str(info.value)
    assert f"task.rl.env={ENV} needs popgym" in message and "\n" not in message
    assert "pip install 'highway-transformer[rl]'" in message and "pip install popgym" in message
