"""Presets for ``task.name=rl``: PPO with a Gated Transformer-XL memory on the corridor.

GTrXL (Parisotto et al. 2019) in reinforcement learning, where it was made: identity-map
reordering (pre-LN), GRU gating with ``b_g = 2``, Adam at 2.5e-4 annealed linearly, a small
memory policy; PPO's hyper-parameters as CleanRL's ``ppo_trxl`` where a tiny corridor allows.
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import Config, DataConfig, GateConfig, ModelConfig, RLConfig, TaskConfig, TrainConfig


def corridor(gate: str, policy: str = "transformer") -> Config:
    """The proof-of-memory corridor (cue 4 steps before the junction), 2 blocks of width 32."""
    pre = gate.startswith("gtrxl")
    model = ModelConfig(
        d_model=32, n_layers=2, n_heads=2, d_inner=64, dropout=0.0, norm="pre" if pre else "post",
        init="torch", gate=GateConfig(kind=gate, bias=2.0 if pre else None),
    )  # fmt: skip
    return Config(
        source="small preset of this project: GTrXL (Parisotto et al. 2019) with PPO "
        "(Schulman et al. 2017) on a proof-of-memory corridor, CleanRL ppo_trxl's loss",
        model=model,
        data=DataConfig(batch_size=1, eval_batch_size=1),
        train=TrainConfig(
            optimizer="adam", lr=2.5e-3, clip=0.5, eval_interval=100, log_interval=10
        ),
        # 400 optimizer steps: 25 rollouts of 8 x 64 steps, 4 epochs x 4 minibatches each
        task=TaskConfig(name="rl", rl=RLConfig(policy=policy)),
    )


PRESETS: dict[str, tuple[str, Callable[[], Config]]] = {
    "rl/corridor-gtrxl": (
        "PPO, GTrXL-GRU memory policy, proof-of-memory corridor",
        lambda: corridor("gtrxl-gru"),
    ),
    "rl/corridor-mlp": (
        "PPO, memoryless MLP policy (the chance line), proof-of-memory corridor",
        lambda: corridor("none", "mlp"),
    ),
}
