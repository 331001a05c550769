"""``task.name=rl``: PPO with an episodic-memory policy, hosted by the one trainer.

A training "batch" is one PPO minibatch: whole rollouts of ``num_envs / num_minibatches``
environments. The first minibatch of each rollout collects it (``num_steps`` steps of every
environment, with the model the trainer hands :meth:`RLTask.loss`, no gradients), computes
GAE, and every minibatch after is one optimizer step on the clipped objective, for
``update_epochs`` shuffled passes. So run folders, checkpoints, SIGTERM, metrics.jsonl,
progress and provenance are the trainer's. Evaluation plays ``eval_episodes`` greedy
episodes (``valid`` and ``test`` on their own seeds); the loss is minus the mean return.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from ...config import Config
from ...errors import CheckpointError, ConfigError
from ...files import first_line
from ...runtime.world import World
from ..base import Batch, Task, TaskState
from .envs import EnvBatch, env_spec
from .policies import Carry, build_policy, initial_carry, reset_carry, trim_carry
from .popgym_envs import EPISODE_STEPS, RANDOM_RETURN, best_memoryless_return
from .ppo import gae, ppo_loss

#: popgym's RepeatPreviousEasy, the id of :mod:`.popgym_envs`.
POPGYM_REPEAT_PREVIOUS = "popgym-RepeatPreviousEasy-v0"
#: Seed offsets of the training environments (per rollout) and of the evaluation splits.
TRAIN_SEED_STRIDE, EVAL_SEEDS = 1000, {"valid": 10**6, "test": 2 * 10**6}


class RLTask(Task):
    """PPO on ``task.rl.env`` with ``task.rl.policy``."""

    name = "rl"
    metrics = {"loss": "lower", "return": "higher", "success": "higher"}
    headline = "success"
    eval_unit = "episode"

    def __init__(self, config: Config, device: torch.device) -> None:
        rl = config.task.rl
        if rl.total_steps:  # the environment steps decide the optimizer steps
            config = config.replace(**{"train.max_steps": rl.optimizer_steps()})
        super().__init__(config, device)
        self.rl = rl
        self.features, self.actions = env_spec(rl)
        self.updates = 0  # optimizer steps taken (entropy annealing)
        self.rollouts = 0
        self.episodes: deque[tuple[float, int, bool]] = deque(maxlen=rl.stats_episodes)
        self.last: dict[str, Tensor] = {}
        self.envs: EnvBatch | None = None
        self.carry: Carry = {}
        self.rollout: dict[str, Any] = {}
        self.minibatch = 0  # the next minibatch of the rollout's update: epoch x minibatches
        self.order = torch.arange(self._shuffled())  # the current epoch's shuffle
        self.resume_warning: str | None = None

    @staticmethod
    def build_model(config: Config) -> nn.Module:
        return build_policy(config, *env_spec(config.task.rl))

    # ------------------------------------------------------------------ training

    def train_batches(self) -> Iterator[Batch]:
        """Each rollout's minibatches: ``update_epochs`` shuffled passes over its environments
        (``task.rl.minibatch=envs``) or over all its steps (``steps``)."""
        rl = self.rl
        unit = "steps" if rl.minibatch == "steps" else "envs"
        n = self._shuffled()
        size = n // rl.num_minibatches
        while True:  # from the saved position, so a resume continues the update in flight
            epoch, k = divmod(self.minibatch, rl.num_minibatches)
            if k == 0:
                self.order = torch.randperm(n, generator=self.generator)
            self.minibatch = (self.minibatch + 1) % (rl.update_epochs * rl.num_minibatches)
            yield {"collect": epoch == 0 and k == 0, unit: self.order[k * size : (k + 1) * size]}

    def _shuffled(self) -> int:
        """How many units an epoch shuffles: the rollout's environments, or all its steps."""
        rl = self.rl
        return rl.num_envs * (rl.num_steps if rl.minibatch == "steps" else 1)

    def shard(self, world: World) -> None:
        if world.size > 1:  # every rank would collect the same rollouts
            raise ConfigError(
                f"task.name=rl trains in one process, not {world.size}; drop --nproc (raise "
                "task.rl.num_envs for more experience per rollout)"
            )
        super().shard(world)

    def local_batches(self) -> Iterator[Batch]:
        return self.train_batches()  # one process: a rollout is not split across ranks

    def entropy_coef(self) -> float:
        """``ent_coef``, annealed linearly to ``final_ent_coef`` over the run."""
        rl = self.rl
        if rl.final_ent_coef is None:
            return rl.ent_coef
        done = min(1.0, self.updates / max(self.config.train.max_steps, 1))
        return rl.ent_coef + (rl.final_ent_coef - rl.ent_coef) * done

    def loss(self, model: nn.Module, batch: Batch) -> tuple[Tensor, int]:
        if batch["collect"] or not self.rollout:
            self.rollout = self.collect(model)
        if "steps" in batch:
            r = _steps(self.rollout, batch["steps"].to(self.device))
        else:
            r = _environments(self.rollout, batch["envs"].to(self.device))
        logits, values = model(r["obs"], trim_carry(r["carry"]), r["dones"])
        logp = torch.log_softmax(logits.float(), dim=-1)
        new_logprob = logp.gather(-1, r["actions"][..., None]).squeeze(-1)
        entropy = -(logp.exp() * logp).sum(-1)
        terms = ppo_loss(
            *(x.flatten() for x in (new_logprob, r["logprobs"], r["advantages"])),
            values.float().flatten(), r["values"].flatten(), r["returns"].flatten(),
            entropy.flatten(), self.rl, self.entropy_coef(),
        )  # fmt: skip
        self.updates += 1
        self.last = {"policy_loss": terms.policy, "value_loss": terms.value,
                     "entropy": terms.entropy, "approx_kl": terms.approx_kl,
                     "clipfrac": terms.clipfrac}  # fmt: skip
        count = new_logprob.numel()
        return terms.loss * count, count

    @torch.no_grad()
    def collect(self, model: nn.Module) -> dict[str, Any]:
        """One rollout of every environment (time-major ``[T, N]``) with its advantages."""
        rl, device = self.rl, self.device
        if self.envs is None:
            seed = self.config.train.seed + TRAIN_SEED_STRIDE * (self.rollouts + 1)
            self.envs = EnvBatch(rl, rl.num_envs, seed)
            self.carry = initial_carry(self.config, rl.num_envs, device)
        was_training = model.training
        model.eval()  # no dropout while acting
        steps: dict[str, list] = {k: [] for k in ("obs", "carry", "actions", "logprobs",
                                                  "values", "rewards", "dones")}  # fmt: skip
        for _ in range(rl.num_steps):
            obs = torch.as_tensor(self.envs.obs, dtype=torch.float32, device=device)
            logits, value, after = model(obs, self.carry)
            logp = torch.log_softmax(logits.float(), dim=-1).cpu()
            action = torch.multinomial(logp.exp(), 1, generator=self.generator).squeeze(-1)
            _, reward, done, finished = self.envs.step(action.numpy())
            self.episodes.extend(tuple(e[1:]) for e in finished)
            ended = torch.as_tensor(done, device=device).bool()
            logprob = logp.gather(1, action[:, None]).squeeze(1).to(device)
            taken = (obs, self.carry, action.to(device), logprob, value.float(), reward, done)
            for key, item in zip(steps, taken, strict=True):
                steps[key].append(item)
            self.carry = reset_carry(after, ended)
        obs = torch.as_tensor(self.envs.obs, dtype=torch.float32, device=device)
        last_value = model(obs, self.carry)[1].float()
        model.train(was_training)
        self.rollouts += 1
        rollout = {k: _stack(v, device) for k, v in steps.items() if k != "carry"}
        rollout["carry"] = {k: torch.stack([c[k] for c in steps["carry"]]) for k in self.carry}
        rollout["advantages"], rollout["returns"] = gae(
            rollout["rewards"], rollout["values"], rollout["dones"], last_value,
            rl.gamma, rl.gae_lambda,
        )  # fmt: skip
        return rollout

    def train_metrics(self) -> dict[str, float]:
        out = {key: float(value) for key, value in self.last.items()}
        if self.episodes:
            out["episodic_return"] = float(np.mean([e[0] for e in self.episodes]))
            out["success_rate"] = float(np.mean([e[2] for e in self.episodes]))
            out["episode_length"] = float(np.mean([e[1] for e in self.episodes]))
        out["env_steps"] = float(self.rollouts * self.rl.num_envs * self.rl.num_steps)
        return out

    # ------------------------------------------------------------------ evaluation

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str, quick: bool = False) -> dict[str, float]:
        """``eval_episodes`` greedy episodes, one per environment, on the split's seeds."""
        n = self.rl.eval_episodes
        envs = EnvBatch(self.rl, n, self.config.train.seed + EVAL_SEEDS[split])
        carry = initial_carry(self.config, n, self.device)
        results: dict[int, tuple[float, int, bool]] = {}
        try:
            while len(results) < n:
                obs = torch.as_tensor(envs.obs, dtype=torch.float32, device=self.device)
                logits, _, after = model(obs, carry)
                _, _, done, finished = envs.step(logits.argmax(-1).cpu().numpy())
                for i, *episode in finished:
                    results.setdefault(i, tuple(episode))  # type: ignore[arg-type]
                carry = reset_carry(after, torch.as_tensor(done, device=self.device).bool())
                if self.eval_progress is not None:
                    self.eval_progress(len(results), n)
        finally:
            envs.close()
        mean = float(np.mean([r[0] for r in results.values()]))
        success = float(np.mean([r[2] for r in results.values()]))
        return {"loss": -mean, "return": mean, "success": success}

    def trivial_losses(self, split: str) -> dict[str, float]:
        """The chance lines on ``split``'s greedy episodes (loss = minus the return): a
        uniformly random policy and the best memoryless policy. On the corridor (random:
        return 0) the memoryless one sees the same junction whatever the cue and so can only
        take the split's more frequent cue; on RepeatPreviousEasy (random: -0.5) it names one
        suit for each suit on view (:func:`.popgym_envs.best_memoryless_return`); the other
        environments have none (no check)."""
        if self.rl.env == POPGYM_REPEAT_PREVIOUS:
            best = best_memoryless_return(self.eval_suits(split))
            return {"random policy": -RANDOM_RETURN, "memoryless policy": -best}
        if self.rl.env != "corridor":
            return {}
        cues = self.eval_cues(split)
        best = max(float(np.mean(cues == 0)), float(np.mean(cues == 1)))
        return {"random policy": 0.0, "memoryless policy": -(2.0 * best - 1.0)}

    def eval_cues(self, split: str) -> np.ndarray:
        """The cue (0 left, 1 right) of each greedy episode :meth:`evaluate` plays on
        ``split``: the first observation of each of its seeded environments."""
        envs = EnvBatch(self.rl, self.rl.eval_episodes, self.config.train.seed + EVAL_SEEDS[split])
        try:
            return envs.obs[:, :2].argmax(-1)
        finally:
            envs.close()

    def eval_suits(self, split: str) -> np.ndarray:
        """The suit on view at each step (``[episodes, 51]``) of each greedy RepeatPreviousEasy
        episode :meth:`evaluate` plays on ``split``: the deck does not depend on the actions."""
        envs = EnvBatch(self.rl, self.rl.eval_episodes, self.config.train.seed + EVAL_SEEDS[split])
        try:
            suits = [envs.obs.argmax(-1)]
            for _ in range(EPISODE_STEPS - 1):  # the last step's card is never on view
                suits.append(envs.step(np.zeros(len(envs.envs), dtype=np.int64))[0].argmax(-1))
            return np.stack(suits, axis=1)
        finally:
            envs.close()

    # ------------------------------------------------------------------ state

    def state_dict(self) -> TaskState:
        """Everything a resume needs to continue bit for bit: counters, recent episodes, the
        update's position and shuffle, the environments' episodes so far (replayed at
        load), the policy's carry and, mid-update, the rollout being trained on."""
        state = {**super().state_dict(), "updates": self.updates, "rollouts": self.rollouts,
                 "episodes": [list(e) for e in self.episodes], "minibatch": self.minibatch,
                 "order": self.order, "envs": None}  # fmt: skip
        if self.envs is not None:
            state["envs"] = self.envs.state_dict()
            state["env_obs"] = torch.from_numpy(self.envs.obs.copy())
            state.update(_flat("carry.", self.carry))
        if self.minibatch and self.rollout:  # otherwise the next minibatch collects anew
            state.update(_flat("rollout.", self.rollout))
        return state

    def load_state_dict(self, state: TaskState) -> None:
        super().load_state_dict(state)
        self.updates, self.rollouts = int(state["updates"]), int(state["rollouts"])
        self.episodes.extend(tuple(e) for e in state["episodes"])
        self.envs, self.rollout = None, {}
        if "envs" not in state:  # written before resumes were exact
            self.resume_warning = (
                "this rl checkpoint predates exact resume: its environments restart and the "
                "rollout in flight is collected again (the run continues, not bit for bit)"
            )
            return
        try:
            self._restore(state)
        except (KeyError, TypeError, ValueError, IndexError, RuntimeError, AttributeError) as exc:
            raise CheckpointError(
                f"the rl task's saved state is damaged ({first_line(exc)}); resume from "
                "another copy or start a new run (--overwrite)"
            ) from None

    def resume_note(self) -> str | None:
        return self.resume_warning

    def _restore(self, state: TaskState) -> None:
        """The update position, environments, carry and rollout of :meth:`state_dict`."""
        rl, n, device = self.rl, self.rl.num_envs, self.device
        minibatch, order = int(state["minibatch"]), state["order"]
        if len(order) != self._shuffled():  # the shuffle of every environment (or step)
            raise CheckpointError(
                f"the checkpoint's rl state shuffles {len(order)} units, not the "
                f"{self._shuffled()} of task.rl.num_envs={n}, num_steps={rl.num_steps}, "
                f"minibatch={rl.minibatch}; resume with the settings it was trained with, or "
                "start a new run (--overwrite)"
            )
        if not 0 <= minibatch < rl.update_epochs * rl.num_minibatches:
            raise ValueError(f"minibatch {minibatch} is outside the update")
        self.minibatch, self.order = minibatch, order.clone()
        if state["envs"] is None:  # saved before the first rollout
            return
        if not len(state["envs"]["starts"]) == len(state["envs"]["actions"]) == n:
            raise ValueError(f"the environments saved are not task.rl.num_envs={n}")
        blank = initial_carry(self.config, n, device)
        self.carry = {
            k: _shaped(state[f"carry.{k}"], v.shape, k).to(device) for k, v in blank.items()
        }
        if minibatch:
            self.rollout = self._saved_rollout(state, blank)
        envs = EnvBatch.restore(rl, state["envs"])
        if not np.array_equal(envs.obs, state["env_obs"].numpy()):
            envs.close()
            raise CheckpointError(
                "the saved environments replay to other observations than they had (another "
                "gymnasium or minigrid version?); resume with the versions the run was trained "
                "with, or start a new run (--overwrite)"
            )
        self.envs = envs

    def _saved_rollout(self, state: TaskState, blank: Carry) -> dict[str, Any]:
        """The rollout of :meth:`state_dict`, its shapes checked against this config's."""
        t, n, device = self.rl.num_steps, self.rl.num_envs, self.device
        rollout: dict[str, Any] = {
            key: _shaped(state[f"rollout.{key}"], (t, n), key).to(device) for key in ROLLOUT_KEYS
        }
        rollout["obs"] = _shaped(state["rollout.obs"], (t, n, self.features), "obs").to(device)
        rollout["carry"] = {
            k: _shaped(state[f"rollout.carry.{k}"], (t, *v.shape), k).to(device)
            for k, v in blank.items()
        }
        return rollout


#: The rollout's tensors of one number a step and environment (``[T, N]``).
ROLLOUT_KEYS = ("actions", "logprobs", "values", "rewards", "dones", "advantages", "returns")


def _flat(prefix: str, tensors: dict[str, Any]) -> dict[str, Tensor]:
    """Nested dicts of tensors as one flat dict, names joined with dots (a checkpoint's)."""
    out: dict[str, Tensor] = {}
    for key, value in tensors.items():
        if isinstance(value, dict):
            out.update(_flat(f"{prefix}{key}.", value))
        else:
            out[prefix + key] = value
    return out


def _shaped(tensor: Tensor, shape: tuple[int, ...], what: str) -> Tensor:
    if not isinstance(tensor, Tensor) or tuple(tensor.shape) != tuple(shape):
        got = list(tensor.shape) if isinstance(tensor, Tensor) else type(tensor).__name__
        raise ValueError(f"{what} is {got}, not of shape {list(shape)}")
    return tensor


def _environments(rollout: dict[str, Any], envs: Tensor) -> dict[str, Any]:
    """The rollout of environments ``envs``, batch-major: ``[T, N, ...] -> [b, T, ...]``
    (the carried tensors too)."""
    out: dict[str, Any] = {}
    for key, value in rollout.items():
        if isinstance(value, dict):
            out[key] = {k: v[:, envs].transpose(0, 1) for k, v in value.items()}
        else:
            out[key] = value[:, envs].transpose(0, 1)
    return out


def _steps(rollout: dict[str, Any], steps: Tensor) -> dict[str, Any]:
    """Steps ``steps`` (indices into the flattened ``[T x N]``) of the rollout, as one row
    ``[1, S, ...]``: a replay of single steps, each with what it carried."""
    out: dict[str, Any] = {}
    for key, value in rollout.items():
        if isinstance(value, dict):
            out[key] = {k: v.flatten(0, 1)[steps][None] for k, v in value.items()}
        else:
            out[key] = value.flatten(0, 1)[steps][None]
    return out


def _stack(items: list, device: torch.device) -> Tensor:
    if isinstance(items[0], Tensor):
        return torch.stack(items).to(device)
    return torch.as_tensor(np.stack(items), dtype=torch.float32, device=device)
