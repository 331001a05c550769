"""``task.name=rl`` end to end (``tasks/rl/__init__.py``): its settings validated in one line
each, PPO hosted by the one trainer (run folder, metrics.jsonl, results, resume, the CLI),
and the memory test itself: a tiny Transformer memory solves the corridor where the
memoryless MLP and a window too short for the cue stay at chance."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from highway_transformer import cli
from highway_transformer.config import Config, RLConfig
from highway_transformer.errors import (
    CheckpointError,
    ConfigError,
    MissingExtra,
    TrainingInterrupted,
)
from highway_transformer.presets import get_preset
from highway_transformer.storage.folder import MODEL_FILE
from highway_transformer.storage.runfolder import read_metrics, read_results
from highway_transformer.tasks import RLTask
from highway_transformer.tasks.rl.envs import EnvBatch, env_spec
from highway_transformer.training import checkpoint as ckpt
from highway_transformer.training.trainer import Trainer, train
from highway_transformer.validation import validate

pytest.importorskip("gymnasium")

#: 8 rollouts of 8 environments x 64 steps: 128 optimizer steps.
BUDGET = {"task.rl.total_steps": 8 * 8 * 64, "train.eval_interval": 64, "train.device": "cpu"}


def _train(tmp_path: Path, preset: str, name: str, **over) -> dict:
    config = get_preset(preset).replace(**{**BUDGET, **over})
    return train(config, tmp_path / name, progress=False)


def test_a_transformer_memory_solves_the_corridor_where_no_memory_stays_at_chance(
    tmp_path: Path,
) -> None:
    solved = _train(tmp_path, "rl/corridor-gtrxl", "gtrxl")
    assert solved["valid"]["success"] >= 0.95 and solved["test"]["success"] >= 0.95
    assert solved["test"]["return"] >= 0.9
    memoryless = _train(tmp_path, "rl/corridor-mlp", "mlp")
    # 32 greedy episodes a split: a coin's success rate, not the cue's
    assert 0.25 <= memoryless["valid"]["success"] <= 0.75
    assert 0.25 <= memoryless["test"]["success"] <= 0.75
    # one layer whose window ends a step short of the cue cannot recall it either
    short = {"model.n_layers": 1, "task.rl.memory_length": 3}
    assert _train(tmp_path, "rl/corridor-gtrxl", "short", **short)["valid"]["success"] <= 0.75


def test_ppo_runs_in_the_trainer_run_folder_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    config = get_preset("rl/corridor-gtrxl").replace(
        **{**BUDGET, "task.rl.total_steps": 2 * 8 * 64, "train.log_interval": 4}
    )
    results = train(config, out, progress=False)
    assert results["steps"] == 2 * 4 * 4  # rollouts x update_epochs x num_minibatches
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in records if r["split"] == "train"]
    assert [r["step"] for r in trained] == list(range(4, 33, 4))
    last = trained[-1]
    for key in ("episodic_return", "success_rate", "approx_kl", "clipfrac", "entropy"):
        assert key in last, key
    assert last["env_steps"] == 2 * 8 * 64 and 0 <= last["success_rate"] <= 1
    assert set(results["test"]) == {"loss", "return", "success"}
    assert results["test"]["loss"] == -results["test"]["return"]
    assert (out / "checkpoint").is_dir() and (out / "best").is_dir()
    longer = config.replace(**{"task.rl.total_steps": 3 * 8 * 64})
    with pytest.raises(CheckpointError, match="the task config differs in task.rl="):
        train(longer, out, resume=True, progress=False)  # another budget: refused


#: 3 rollouts of 4 environments x 16 steps (5-step episodes run across rollouts), 2 epochs x 2
#: minibatches each: 12 optimizer steps, a checkpoint and a record after each.
RESUME = {"task.rl.num_envs": 4, "task.rl.num_steps": 16, "task.rl.update_epochs": 2,
          "task.rl.num_minibatches": 2, "task.rl.total_steps": 3 * 4 * 16,
          "task.rl.eval_episodes": 4, "train.eval_interval": 6, "train.log_interval": 1,
          "train.checkpoint_interval": 1, "train.device": "cpu"}  # fmt: skip
POLICIES = {
    "transformer": {},
    "lstm": {"task.rl.policy": "lstm"},
    # 128 steps a rollout: every room has ended an episode (its 245-step limit) by step 5
    "minigrid": {
        "task.rl.env": "MiniGrid-MemoryS7-v0",
        "task.rl.num_steps": 128,
        "task.rl.total_steps": 3 * 4 * 128,
        "train.eval_interval": 12,
    },  # fmt: skip
}


def _resume_config(case: str) -> Config:
    if case == "minigrid":
        pytest.importorskip("minigrid", reason="MiniGrid needs the rl extra's minigrid")
    return get_preset("rl/corridor-gtrxl").replace(**{**RESUME, **POLICIES[case]})


def _without_clock(run: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("time", "rate")} for r in read_metrics(run)]


def _assert_same_run(one: Path, two: Path) -> None:
    for folder in ("checkpoint", "best"):
        a = (one / folder / MODEL_FILE).read_bytes()
        assert a == (two / folder / MODEL_FILE).read_bytes(), folder
    assert _without_clock(one) == _without_clock(two)
    a, b = read_results(one), read_results(two)
    assert a is not None and b is not None and (a["valid"], a["test"]) == (b["valid"], b["test"])


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``straight(case)``: the run folder of ``case`` trained without a stop (once a case)."""
    runs: dict[str, Path] = {}

    def run(case: str) -> Path:
        if case not in runs:
            runs[case] = tmp_path_factory.mktemp(case) / "straight"
            train(_resume_config(case), runs[case], progress=False)
        return runs[case]

    return run


@pytest.mark.parametrize("case", list(POLICIES))
@pytest.mark.parametrize("stop", [4, 5, 7], ids=["rollout-boundary", "after-collect", "mid-epoch"])
def test_a_resumed_run_is_the_uninterrupted_one_bit_for_bit(
    case: str,
    stop: int,
    straight: Callable[[str], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    interrupt_after_step: Callable[[pytest.MonkeyPatch, int], None],
) -> None:
    """Stopped at the end of a rollout's update (4), after the step that collected the next
    rollout (5) or inside its second epoch (7), then resumed: the same weights, records and
    results as the run that never stopped (the environments, carry and rollout restored)."""
    config, run = _resume_config(case), tmp_path / "resumed"
    with monkeypatch.context() as patch:
        interrupt_after_step(patch, stop)
        with pytest.raises(KeyboardInterrupt):
            train(config, run, progress=False)
    saved = ckpt.task_state(ckpt.load_trainer_state(run / "checkpoint"))
    assert ("rollout.obs" in saved) == (stop % 4 != 0)  # the rollout travels mid-update only
    if stop > 4:  # episodes replayed from a reset's random state, not only from their seed
        assert any("rng" in start for start in saved["envs"]["starts"])
    torch.manual_seed(12345)  # the resumed run must not depend on the global RNG state
    said: list[str] = []
    train(config, run, resume=True, progress=False, log=said.append)
    assert not any("predates exact resume" in line for line in said)
    _assert_same_run(straight(case), run)


def test_sigterm_during_a_collection_resumes_the_same_run(
    straight: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM halfway through step 9's rollout (the third): the step ends, its checkpoint is
    written, and the resumed run is the uninterrupted one."""
    config, run = _resume_config("transformer"), tmp_path / "run"
    in_step_9 = {"now": False, "env steps": 0}
    one_step, stepped = Trainer._train_step, EnvBatch.step

    def train_step(trainer: Trainer, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        in_step_9["now"] = trainer.state.step == 8
        return one_step(trainer, *args, **kwargs)

    def signal_halfway(batch: EnvBatch, actions):  # noqa: ANN001, ANN202 - EnvBatch.step's
        in_step_9["env steps"] += in_step_9["now"]
        if in_step_9["now"] and in_step_9["env steps"] == 8:  # of the rollout's 16
            os.kill(os.getpid(), signal.SIGTERM)
        return stepped(batch, actions)

    monkeypatch.setattr(Trainer, "_train_step", train_step)
    monkeypatch.setattr(EnvBatch, "step", signal_halfway)
    with pytest.raises(TrainingInterrupted, match="stopped by SIGTERM: checkpoint at step 9 of 12"):
        train(config, run, progress=False)
    monkeypatch.undo()
    train(config, run, resume=True, progress=False)
    _assert_same_run(straight("transformer"), run)


def test_an_older_checkpoint_resumes_with_restarted_environments_and_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint without the environments' state (written before resumes were exact):
    the counters, steps and records continue, and the log says once that it is not exact."""
    config, out = _resume_config("transformer"), tmp_path / "run"

    def old_state(task: RLTask) -> dict:
        episodes = [list(e) for e in task.episodes]
        return {"generator": task.generator.get_state(), "updates": task.updates,
                "rollouts": task.rollouts, "episodes": episodes}  # fmt: skip

    with monkeypatch.context() as patch:
        patch.setattr(RLTask, "state_dict", old_state)

        def stop(step: int) -> None:
            if step == 6:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            Trainer(config, out, progress=False).fit(after_step=stop)
    said: list[str] = []
    results = train(config, out, resume=True, progress=False, log=said.append)
    notes = [line for line in said if "predates exact resume" in line]
    assert len(notes) == 1 and "\n" not in notes[0] and "environments restart" in notes[0]
    assert results["steps"] == 12
    records = read_metrics(out)
    assert [r["step"] for r in records if r["split"] == "train"] == list(range(1, 13))
    # the rollout in flight collected again at step 7, a fourth rollout at step 11
    assert records[-2]["env_steps"] == 4 * 4 * 16


def _task_after_one_rollout(**over) -> RLTask:
    config = validate(_resume_config("transformer").replace(**over))
    task = RLTask(config, torch.device("cpu"))
    model, batches = task.build_model(config), task.train_batches()
    task.loss(model, next(batches))  # collects the first rollout
    return task


def test_a_mismatched_or_damaged_rl_state_is_one_line_saying_what_to_do() -> None:
    state = _task_after_one_rollout().state_dict()
    fewer = _task_after_one_rollout(**{"task.rl.num_envs": 2})
    with pytest.raises(CheckpointError) as info:
        fewer.load_state_dict(state)
    message = str(info.value)
    assert message.startswith("the checkpoint's rl state shuffles 4 units, not the 2 ")
    assert "task.rl.num_envs=2" in message and "\n" not in message
    damaged = {**state, "rollout.values": state["rollout.values"][:3]}
    with pytest.raises(CheckpointError, match=r"the rl task's saved state is damaged \(values"):
        _task_after_one_rollout().load_state_dict(damaged)
    replayed = {**state, "env_obs": state["env_obs"] + 1}
    with pytest.raises(CheckpointError, match="replay to other observations"):
        _task_after_one_rollout().load_state_dict(replayed)


@pytest.mark.parametrize(
    ("env", "steps"),
    [("corridor", 10), ("MiniGrid-MemoryS7-v0", 250), ("popgym-RepeatPreviousEasy-v0", 120)],
)
def test_restored_environments_continue_as_the_originals(env: str, steps: int) -> None:
    """:meth:`EnvBatch.restore` (replayed episodes) steps on exactly as the batch it copies,
    episode ends and the resets after them included (MiniGrid's rooms: 245 steps at most;
    popgym's decks: 51)."""
    extra = {"MiniGrid-MemoryS7-v0": "minigrid", "popgym-RepeatPreviousEasy-v0": "popgym"}
    if env in extra:
        pytest.importorskip(extra[env], reason=f"{env} needs the rl extra's {extra[env]}")
    rl = RLConfig(env=env, num_envs=3)
    count, actions = env_spec(rl)[1], torch.Generator().manual_seed(0)
    original = EnvBatch(rl, 3, seed=5)
    for _ in range(steps):
        original.step(torch.randint(count, (3,), generator=actions).numpy())
    copy = EnvBatch.restore(rl, json.loads(json.dumps(original.state_dict())))  # through JSON
    assert (copy.obs == original.obs).all() and (copy.lengths == original.lengths).all()
    for _ in range(steps):
        move = torch.randint(count, (3,), generator=actions).numpy()
        a, b = original.step(move), copy.step(move)
        assert all((x == y).all() for x, y in zip(a[:3], b[:3], strict=True)) and a[3] == b[3]


def test_the_cli_trains_task_rl_from_its_preset(tmp_path: Path, capsys) -> None:
    out = tmp_path / "cli"
    argv = ["train", "--task", "rl", "task.rl.total_steps=512", "--out", str(out), "--no-progress"]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert "success" in text and (out / "results.json").is_file()
    saved = json.loads((out / "results.json").read_text())
    assert saved["task"] == "rl" and saved["steps"] == 16


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"task.rl.gamma": 0.9}, "task.rl.gamma applies to task.name=rl only, not lm"),
        ({"task.name": "rl", "task.rl.env": "CartPole-v1"}, "unknown environment (task.rl.env)"),
        ({"task.name": "rl", "task.rl.policy": "rnn"}, "unknown policy (task.rl.policy)"),
        (
            {"task.name": "rl", "task.rl.policy": "mlp", "task.rl.memory_length": 4},
            "task.rl.memory_length applies to task.rl.policy=transformer, not mlp",
        ),
        (
            {
                "task.name": "rl",
                "task.rl.env": "MiniGrid-MemoryS7-v0",
                "task.rl.corridor_length": 6,
            },
            "task.rl.corridor_length applies to task.rl.env=corridor",
        ),
        (
            {"task.name": "rl", "model.family": "xl"},
            "task.name=rl builds its memory policy from transformer blocks",
        ),
        (
            {"task.name": "rl", "task.rl.num_minibatches": 3},
            "task.rl.num_minibatches=3 must divide task.rl.num_envs=8",
        ),
        (
            {"task.name": "rl", "task.rl.minibatch": "steps", "task.rl.policy": "gru"},
            "task.rl.minibatch=steps draws single steps, and task.rl.policy=gru",
        ),
        (
            {"task.name": "rl", "task.rl.minibatch": "steps", "task.rl.num_minibatches": 3},
            "task.rl.num_minibatches=3 must divide the rollout's 512 steps",
        ),
        ({"task.name": "rl", "train.accumulate": 2}, "task.name=rl takes one optimizer step"),
        ({"task.name": "rl", "task.rl.gamma": 1.5}, "task.rl.gamma must be >= 0 and <= 1"),
        ({"task.name": "rl", "task.rl.clip_coef": 0.0}, "task.rl.clip_coef must be > 0"),
        ({"task.name": "rl", "model.memory.mem_len": 8}, "task.name=rl has no segment memory"),
        (
            {"task.name": "rl", "task.rl.policy": "lstm", "model.attn_output_gate": "headwise"},
            "model.attn_output_gate=headwise gates attention heads, and task.rl.policy=lstm",
        ),
        (
            {"task.name": "rl", "model.ffn": "swiglu"},
            "model.ffn=swiglu applies to the language and sequence models",
        ),
    ],
)
def test_each_rl_problem_is_one_line_naming_the_setting(overrides: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate(Config().replace(**overrides))
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_total_steps_decide_the_optimizer_steps() -> None:
    rl = RLConfig(num_envs=4, num_steps=32, update_epochs=2, num_minibatches=2)
    assert RLConfig(total_steps=0).optimizer_steps() == 16  # one rollout at least
    assert RLConfig(**{**rl.__dict__, "total_steps": 10 * 128 + 5}).optimizer_steps() == 40
    config = Config().replace(**{"task.name": "rl", "task.rl.total_steps": 4096})
    assert validate(config).train.max_steps == 1000  # the task replaces it:
    assert RLTask(config, torch.device("cpu")).config.train.max_steps == 128
    plain = config.replace(**{"task.rl.total_steps": 0, "train.max_steps": 7})
    assert RLTask(plain, torch.device("cpu")).config.train.max_steps == 7


def test_step_minibatches_cover_every_step_of_a_rollout_once_a_pass(tmp_path: Path) -> None:
    """task.rl.minibatch=steps (CleanRL ppo_trxl's minibatches): each pass draws every step of
    the rollout once, and PPO trains on them (5 of 6 minibatches with num_minibatches=3 and
    2 epochs after the collecting one, on whole rows ``[1, S]``)."""
    config = validate(Config().replace(**{
        "task.name": "rl", "task.rl.minibatch": "steps", "task.rl.num_envs": 4,
        "task.rl.num_steps": 6, "task.rl.num_minibatches": 3, "task.rl.update_epochs": 2,
        "task.rl.memory_length": 4, "model.d_model": 16, "model.n_heads": 2,
        "model.d_inner": 16, "model.n_layers": 1, "train.device": "cpu",
    }))  # fmt: skip
    task = RLTask(config, torch.device("cpu"))
    batches = task.train_batches()
    passes = [[next(batches) for _ in range(3)] for _ in range(2)]
    assert [b["collect"] for b in passes[0] + passes[1]] == [True] + [False] * 5
    for one_pass in passes:
        drawn = torch.cat([b["steps"] for b in one_pass])
        assert sorted(drawn.tolist()) == list(range(24)) and all("envs" not in b for b in one_pass)
    model = RLTask.build_model(config)
    loss, count = task.loss(model, passes[0][0])
    assert count == 8 and torch.isfinite(loss)
    loss.backward()  # gradients reach the policy through the replayed steps
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_the_proof_of_memory_preset_mirrors_cleanrl_and_learns(tmp_path: Path) -> None:
    """rl/proof-of-memory (CleanRL ppo_trxl's ProofofMemory-v0 settings): 12 rollouts of 16 x
    128 steps; half of them leave its greedy policy at the rewarding goal (100% on the
    default seed; 67% after 4 rollouts, 42% after 2)."""
    config = get_preset("rl/proof-of-memory")
    assert config.task.rl.total_steps == 12 * 16 * 128 and config.train.max_steps == 12 * 32
    results = train(config.replace(**{"task.rl.total_steps": 6 * 16 * 128,
                                      "train.eval_interval": 192, "train.device": "cpu"}),
                    tmp_path / "pom", progress=False)  # fmt: skip
    assert results["valid"]["success"] >= 0.9 and results["valid"]["return"] > 1.0


def test_rl_without_its_extra_names_the_install_command(monkeypatch) -> None:
    from highway_transformer.tasks.rl.envs import make_env

    monkeypatch.setitem(sys.modules, "gymnasium", None)
    with pytest.raises(MissingExtra, match=r"pip install 'highway-transformer\[rl\]'") as info:
        make_env(RLConfig())
    assert "\n" not in str(info.value)


def test_the_core_does_not_import_gymnasium() -> None:
    code = (
        "import sys, highway_transformer.cli, highway_transformer.tasks, "
        "highway_transformer.validation; print('gymnasium' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr[-400:]


def _constant_return(config: Config, split: str, action: int) -> float:
    """The mean return of the split's greedy episodes played by a policy that always takes
    ``action`` (a memoryless one: every junction looks the same), stepped literally."""
    from highway_transformer.tasks.rl import EVAL_SEEDS

    rl = config.task.rl
    envs = EnvBatch(rl, rl.eval_episodes, config.train.seed + EVAL_SEEDS[split])
    returns: dict[int, float] = {}
    while len(returns) < rl.eval_episodes:
        for i, ret, _, _ in envs.step(torch.full((rl.eval_episodes,), action).numpy())[3]:
            returns.setdefault(i, ret)
    return sum(returns.values()) / len(returns)


@pytest.mark.parametrize("split", ["valid", "test"])
def test_the_chance_lines_are_a_random_and_the_best_memoryless_policy(split: str) -> None:
    config = validate(get_preset("gtrxl-rl/gtrxl-gru").replace(**{"train.device": "cpu"}))
    lines = RLTask(config, torch.device("cpu")).trivial_losses(split)
    best = max(_constant_return(config, split, a) for a in (0, 1))
    assert lines == pytest.approx({"random policy": 0.0, "memoryless policy": -best})
    assert lines["memoryless policy"] <= 0.0  # the better fixed action: at least a coin's return


def test_a_memoryless_run_is_not_learned_and_a_memory_is(tmp_path: Path) -> None:
    """The trainer's check against the chance lines: the MLP cannot beat the best fixed
    junction action on its own split, the GTrXL memory does."""
    solved = _train(tmp_path, "rl/corridor-gtrxl", "gtrxl")
    assert solved["learned"]["learned"] and solved["learned"]["baseline"] == "memoryless policy"
    memoryless = _train(tmp_path, "rl/corridor-mlp", "mlp")
    assert memoryless["learned"]["learned"] is False
