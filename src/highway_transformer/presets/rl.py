"""Presets for ``task.name=rl``: PPO with a Gated Transformer-XL memory on the corridor.

GTrXL (Parisotto et al. 2019) in reinforcement learning, where it was made: identity-map
reordering (pre-LN), GRU gating with ``b_g = 2``, Adam at 2.5e-3 annealed linearly, a small
memory policy; PPO's hyper-parameters as CleanRL's ``ppo_trxl`` where a tiny corridor allows.

``gtrxl-rl/`` holds the rows of the GTrXL paper's comparison (TrXL, TrXL-I, the five GTrXL
gates, SDU, LSTM, a memoryless MLP) on a longer corridor, every row with the same budget
(:data:`TABLE_RL`, chosen by the pilot in docs/rl.md); ``gtrxl-rl-long/`` the same rows on a
corridor twice as long (:data:`TABLE_RL_LONG`).
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import Config, DataConfig, GateConfig, ModelConfig, RLConfig, TaskConfig, TrainConfig


def corridor(
    gate: str, policy: str = "transformer", norm: str | None = None, activation: str = "sigmoid"
) -> Config:
    """The proof-of-memory corridor (cue 4 steps before the junction), 2 blocks of width 32;
    ``norm`` None: pre-LN for the GTrXL gates (with ``b_g = 2``), post-LN otherwise."""
    gtrxl = gate.startswith("gtrxl")
    model = ModelConfig(
        d_model=32, n_layers=2, n_heads=2, d_inner=64, dropout=0.0,
        norm=norm or ("pre" if gtrxl else "post"), init="torch",
        gate=GateConfig(kind=gate, activation=activation, bias=2.0 if gtrxl else None),
    )  # fmt: skip
    return Config(
        source="small preset of this project: GTrXL (Parisotto et al. 2019) with PPO "
        "(Schulman et al. 2017) on a proof-of-memory corridor, CleanRL ppo_trxl's loss",
        model=model,
        data=DataConfig(batch_size=1, eval_batch_size=1),
        train=TrainConfig(
            optimizer="adam",
            lr=2.5e-3,
            clip=0.5,
            max_steps=400,
            eval_interval=100,
            log_interval=10,
        ),
        # 400 optimizer steps: 25 rollouts of 8 x 64 steps, 4 epochs x 4 minibatches each
        task=TaskConfig(name="rl", rl=RLConfig(policy=policy)),
    )


#: The budget of every ``gtrxl-rl/`` row: the cue 16 steps before the junction, a memory
#: window that reaches it, 64 greedy episodes an evaluation, 480 optimizer steps (30
#: rollouts). The pilot in docs/rl.md: GTrXL-GRU's seeds 1-4 succeed by step 240 of a longer
#: run, and a 240-step run (its learning rate decayed sooner) left seed 2 at chance.
TABLE_RL: dict[str, object] = {
    "task.rl.corridor_length": 16,
    "task.rl.memory_length": 16,
    "task.rl.eval_episodes": 64,
    "train.max_steps": 480,
    "train.eval_interval": 80,
}

#: ``gtrxl-rl/`` row -> (description, gate kind, policy, norm, SDU activation).
TABLE_ROWS: dict[str, tuple[str, str, str, str | None, str]] = {
    "trxl": ("TrXL: post-LN, no gate", "none", "transformer", "post", "sigmoid"),
    "trxl-i": ("TrXL-I: pre-LN (identity map reordering), no gate", "none", "transformer",
               "pre", "sigmoid"),
    "gtrxl-gru": ("GTrXL-GRU: pre-LN, GRU gates, b_g = 2", "gtrxl-gru", "transformer", None,
                  "sigmoid"),
    "gtrxl-input": ("GTrXL input gate, pre-LN", "gtrxl-input", "transformer", None, "sigmoid"),
    "gtrxl-output": ("GTrXL output gate, pre-LN", "gtrxl-output", "transformer", None,
                     "sigmoid"),
    "gtrxl-highway": ("GTrXL highway gate, pre-LN, b_g = 2", "gtrxl-highway", "transformer",
                      None, "sigmoid"),
    "gtrxl-sigmoid-tanh": ("GTrXL sigmoid-tanh gate, pre-LN", "gtrxl-sigmoid-tanh",
                           "transformer", None, "sigmoid"),
    "sdu-sigmoid": ("SDU sigma gate, pre-LN", "sdu", "transformer", "pre", "sigmoid"),
    "sdu-tanh": ("SDU tanh gate, pre-LN", "sdu", "transformer", "pre", "tanh"),
    "lstm": ("LSTM policy (recurrent baseline)", "none", "lstm", None, "sigmoid"),
    "mlp": ("memoryless MLP policy (the chance line)", "none", "mlp", None, "sigmoid"),
}  # fmt: skip


#: The budget of every ``gtrxl-rl-long/`` row: the cue 32 steps before the junction, a
#: window that reaches it, 100 greedy episodes an evaluation, 320 optimizer steps (20
#: rollouts, 10,240 environment steps). The pilot in docs/rl.md: at 640 steps GTrXL-GRU's and
#: TrXL's seed 1 both passed 90% training success by step 320.
TABLE_RL_LONG: dict[str, object] = {
    "task.rl.corridor_length": 32,
    "task.rl.memory_length": 32,
    "task.rl.eval_episodes": 100,
    "train.max_steps": 320,
    "train.eval_interval": 80,
}


#: CleanRL ppo_trxl's documented ProofofMemory-v0 run (docs/rl-algorithms/ppo-trxl.md):
#: 24,576 environment steps (its 25,000 in whole rollouts: 12 of 16 x 128), 4 epochs x 8
#: minibatches of steps drawn from the whole rollout, 4 pre-LN layers of width 64 with 1 head,
#: memory 16, lr 3e-4 (its annealing
#: over 163.84M steps leaves it constant here, and the entropy weight too), AdamW (torch's
#: weight decay 0.01), clip 0.2, gradient norm 0.5, gamma 0.995, lambda 0.95, no advantage
#: normalisation. Its value loss has no 1/2, so vf_coef 0.1 there is 0.2 here.
PROOF_OF_MEMORY_STEPS = 12 * 16 * 128


def proof_of_memory() -> Config:
    """CleanRL ppo_trxl's sizes and PPO settings on ``task.rl.env=proof-of-memory``."""
    model = ModelConfig(
        d_model=64, n_layers=4, n_heads=1, d_inner=64, dropout=0.0, norm="pre", init="torch",
        gate=GateConfig(kind="none"),
    )  # fmt: skip
    rl = RLConfig(
        env="proof-of-memory", memory_length=16, num_envs=16, num_steps=128,
        total_steps=PROOF_OF_MEMORY_STEPS, update_epochs=4, num_minibatches=8, minibatch="steps",
        gamma=0.995, gae_lambda=0.95, clip_coef=0.2, vf_coef=0.2, ent_coef=0.001,
        norm_adv=False, clip_vloss=True, eval_episodes=64, stats_episodes=100,
    )  # fmt: skip
    steps = rl.optimizer_steps()
    return Config(
        source="CleanRL ppo_trxl's ProofofMemory-v0 settings (docs/rl-algorithms/ppo-trxl.md)",
        model=model,
        data=DataConfig(batch_size=1, eval_batch_size=1),
        train=TrainConfig(
            optimizer="adamw",
            lr=3e-4,
            schedule="constant",
            weight_decay=0.01,
            clip=0.5,
            max_steps=steps,
            eval_interval=steps,
            log_interval=32,
        ),  # fmt: skip
        task=TaskConfig(name="rl", rl=rl),
    )


def table_row(row: str, budget_of: dict[str, object] = TABLE_RL) -> Config:
    """The ``gtrxl-rl/`` row ``row`` (``gtrxl-rl-long/`` with :data:`TABLE_RL_LONG`): its
    gate, norm and policy at the table's budget."""
    _, gate, policy, norm, activation = TABLE_ROWS[row]
    budget = dict(budget_of)
    if policy != "transformer":  # the window is the transformer's; the others refuse it
        budget.pop("task.rl.memory_length")
    return corridor(gate, policy, norm, activation).replace(**budget)


PRESETS: dict[str, tuple[str, Callable[[], Config]]] = {
    "rl/corridor-gtrxl": (
        "PPO, GTrXL-GRU memory policy, proof-of-memory corridor",
        lambda: corridor("gtrxl-gru"),
    ),
    "rl/corridor-mlp": (
        "PPO, memoryless MLP policy (the chance line), proof-of-memory corridor",
        lambda: corridor("none", "mlp"),
    ),
    "rl/proof-of-memory": (
        "PPO, TrXL-I memory at CleanRL ppo_trxl's ProofofMemory-v0 sizes and settings",
        proof_of_memory,
    ),
    **{
        f"gtrxl-rl/{row}": (f"PPO on the 16-step corridor, {what}", lambda row=row: table_row(row))
        for row, (what, *_) in TABLE_ROWS.items()
    },
    **{
        f"gtrxl-rl-long/{row}": (
            f"PPO on the 32-step corridor, {what}",
            lambda row=row: table_row(row, TABLE_RL_LONG),
        )
        for row, (what, *_) in TABLE_ROWS.items()
    },
}
