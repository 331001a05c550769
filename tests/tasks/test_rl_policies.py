"""The rl policies (``tasks/rl/policies.py``): the Transformer's sliding memory window equals
recomputing the episode (fp64) for every gate and norm position, an episode's end empties
it, and replaying a rollout gives what acting gave, for every policy."""

from __future__ import annotations

import pytest
import torch

from highway_transformer.config import Config
from highway_transformer.config.names import GATE_NAMES
from highway_transformer.tasks.rl.policies import (
    POLICIES,
    TransformerPolicy,
    build_policy,
    initial_carry,
    reset_carry,
    trim_carry,
)

FEATURES, ACTIONS = 5, 3


def _config(gate: str = "none", norm: str = "post", policy: str = "transformer", **over) -> Config:
    settings = {
        "task.name": "rl",
        "task.rl.policy": policy,
        "model.d_model": 16,
        "model.d_inner": 24,
        "model.n_layers": 2,
        "model.n_heads": 2,
        "model.dropout": 0.0,
        "model.norm": "pre" if gate.startswith("gtrxl") else norm,
        "model.gate.kind": gate,
        **over,
    }
    if policy == "transformer":
        settings.setdefault("task.rl.memory_length", 3)
    return Config().replace(**settings)


def _act(policy: torch.nn.Module, config: Config, obs: torch.Tensor, ends: set[int] = frozenset()):
    """Act through ``obs [N, T, F]`` step by step; ``ends``: steps after which every episode
    ends. (logits [N, T, A], values [N, T], the carries before each step)."""
    n, steps = obs.shape[:2]
    carry = {k: v.double() if v.is_floating_point() else v for k, v in
             initial_carry(config, n, torch.device("cpu")).items()}  # fmt: skip
    logits, values, carries = [], [], []
    for t in range(steps):
        carries.append(carry)
        out, value, after = policy(obs[:, t], carry)
        logits.append(out)
        values.append(value)
        carry = reset_carry(after, torch.full((n,), t in ends))
    stacked = {k: torch.stack([c[k] for c in carries], dim=1) for k in carries[0]}
    return torch.stack(logits, 1), torch.stack(values, 1), stacked


@pytest.mark.parametrize(
    ("gate", "norm"), [(g, "post") for g in GATE_NAMES if not g.startswith("gtrxl")]
    + [(g, "pre") for g in GATE_NAMES]
)  # fmt: skip
def test_the_memory_window_equals_recomputing_the_episode(gate: str, norm: str) -> None:
    """TrXL (post), TrXL-I (pre), the GTrXL gates, SDU, highway and gated MHDPA: each step
    attends to the last memory_length layer inputs, as a band-masked recompute."""
    torch.manual_seed(0)
    config = _config(gate, norm)
    policy = TransformerPolicy(config, FEATURES, ACTIONS).double().eval()
    obs = torch.randn(3, 8, FEATURES, dtype=torch.float64)  # 8 steps > memory_length 3
    logits, values, _ = _act(policy, config, obs)
    whole_logits, whole_values = policy.episode(obs)
    torch.testing.assert_close(logits, whole_logits, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(values, whole_values, rtol=1e-10, atol=1e-12)
    # the window matters: a wider one (7 steps) gives other outputs
    wide = TransformerPolicy(config.replace(**{"task.rl.memory_length": 7}), FEATURES, ACTIONS)
    wide.load_state_dict(policy.state_dict())
    assert not torch.allclose(wide.double().eval().episode(obs)[0], whole_logits)


def test_an_episode_end_empties_the_memory() -> None:
    torch.manual_seed(1)
    config = _config("gtrxl-gru")
    policy = TransformerPolicy(config, FEATURES, ACTIONS).double().eval()
    obs = torch.randn(2, 7, FEATURES, dtype=torch.float64)
    logits, _, carries = _act(policy, config, obs, ends={2})  # the first episode: steps 0-2
    fresh, _ = policy.episode(obs[:, 3:])  # the second, alone
    torch.testing.assert_close(logits[:, 3:], fresh, rtol=1e-10, atol=1e-12)
    assert not carries["valid"][:, 3].any() and int(carries["position"][0, 3]) == 0
    continued, _, _ = _act(policy, config, obs)  # without the end, step 3 remembers 0-2
    assert not torch.allclose(continued[:, 3], logits[:, 3])


@pytest.mark.parametrize("name", list(POLICIES))
def test_replaying_a_rollout_gives_what_acting_gave(name: str) -> None:
    """The training path (replay from the stored carries, resets after episode ends) is the
    acting path again, for every policy."""
    torch.manual_seed(2)
    config = _config(policy=name)
    policy = build_policy(config, FEATURES, ACTIONS).double().eval()
    obs = torch.randn(3, 9, FEATURES, dtype=torch.float64)
    logits, values, carries = _act(policy, config, obs, ends={1, 5})
    dones = torch.zeros(3, 9, dtype=torch.float64)
    dones[:, [1, 5]] = 1.0
    replay_logits, replay_values = policy(obs, carries, dones)
    torch.testing.assert_close(replay_logits, logits, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(replay_values, values, rtol=1e-10, atol=1e-12)


def test_a_replay_cut_to_the_filled_slots_gives_the_same_outputs() -> None:
    """trim_carry drops the window slots no step has filled yet (no step here is more than 4
    steps into its episode, so 3 of the 7 slots are never filled)."""
    torch.manual_seed(5)
    config = _config("sdu", "pre", **{"task.rl.memory_length": 7})
    policy = TransformerPolicy(config, FEATURES, ACTIONS).double().eval()
    obs = torch.randn(2, 9, FEATURES, dtype=torch.float64)
    logits, values, carries = _act(policy, config, obs, ends={4})
    cut = trim_carry(carries)
    assert cut["window"].shape[2] == cut["valid"].shape[2] == 4 and cut["valid"].any(-1).any()
    dones = torch.zeros(2, 9, dtype=torch.float64)
    replay_logits, replay_values = policy(obs, cut, dones)
    torch.testing.assert_close(replay_logits, logits, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(replay_values, values, rtol=1e-10, atol=1e-12)
    first = {k: v[:, :1] for k, v in carries.items()}  # nothing filled: the step alone
    assert trim_carry(first)["window"].shape[2] == 0
    torch.testing.assert_close(policy(obs[:, :1], trim_carry(first), dones[:, :1])[0],
                               logits[:, :1], rtol=1e-10, atol=1e-12)  # fmt: skip
    assert trim_carry({"state": torch.ones(2, 3)})["state"].shape == (2, 3)


def test_without_positions_the_step_in_the_episode_is_not_added() -> None:
    """model.positional=none (CleanRL ppo_trxl's ``--trxl_positional_encoding none``)."""
    torch.manual_seed(6)
    obs = torch.randn(3, FEATURES)
    early, late = torch.zeros(3, dtype=torch.long), torch.full((3,), 5)
    bare = TransformerPolicy(_config(**{"model.positional": "none"}), FEATURES, ACTIONS)
    torch.testing.assert_close(bare.embed(obs, early), bare.embed(obs, late))
    placed = TransformerPolicy(_config(), FEATURES, ACTIONS)
    assert not torch.allclose(placed.embed(obs, early), placed.embed(obs, late))


def test_only_memory_policies_tell_episodes_apart() -> None:
    """Two episodes differing in their first observation only: the MLP's last step cannot
    tell them apart, the Transformer's and the LSTM's can."""
    obs = torch.zeros(2, 4, FEATURES, dtype=torch.float64)
    obs[0, 0, 0] = 1.0
    for name, remembers in (("mlp", False), ("transformer", True), ("lstm", True)):
        torch.manual_seed(3)
        config = _config(policy=name)
        policy = build_policy(config, FEATURES, ACTIONS).double().eval()
        logits, _, _ = _act(policy, config, obs)
        assert torch.allclose(logits[0, -1], logits[1, -1]) != remembers, name


def test_the_transformer_policy_reports_its_gate_biases() -> None:
    policy = TransformerPolicy(_config("sdu"), FEATURES, ACTIONS)
    assert set(policy.gate_biases()) == {"layer1.attn", "layer1.ffn", "layer2.attn", "layer2.ffn"}


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float32, 1e-5), (torch.float64, 1e-12)])
def test_episodic_attention_equals_its_oracle(dtype: torch.dtype, tol: float) -> None:
    from highway_transformer.nn import reference
    from highway_transformer.tasks.rl.policies import EpisodicAttention

    torch.manual_seed(4)
    attention = EpisodicAttention(16, 2, None, 0.0).to(dtype)
    h = torch.randn(3, 1, 16, dtype=dtype)
    memory = torch.randn(3, 5, 16, dtype=dtype)
    valid = torch.tensor([[True] * 5, [False, False, True, True, True], [False] * 5])
    keys = torch.cat([valid, torch.ones(3, 1, dtype=torch.bool)], 1)[:, None, None, :]
    fast = attention(h, memory, keys=keys)
    a = attention.attention
    weights = reference.attention_weights(a.qkv, a.out)
    slow = reference.episodic_attention(h, memory, valid, weights, 2)
    torch.testing.assert_close(fast, slow, rtol=tol, atol=tol)
    # an empty memory (a first step) attends to the step alone
    alone = reference.episodic_attention(h, memory[:, :0], valid[:, :0], weights, 2)
    torch.testing.assert_close(slow[2], alone[2], rtol=tol, atol=tol)
