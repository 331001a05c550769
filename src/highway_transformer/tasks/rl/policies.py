"""The policies of ``task.name=rl``: an episodic Transformer memory, LSTM / GRU, and an MLP.

Every policy is called two ways (so the trainer's wrappers, DDP or compiled, pass both):

* acting, ``policy(obs [N, F], carry)`` -> ``(logits [N, A], value [N], carry after)``: one
  step of each of ``N`` environments; ``carry`` (a dict of tensors) is what the policy
  remembers of each episode, stored beside each step of a rollout;
* replaying, ``policy(obs [b, T, F], carried, dones [b, T])`` -> ``(logits, values [b, T])``:
  a rollout's steps again, with gradients, from what was carried at each step.

The Transformer (:class:`TransformerPolicy`, CleanRL's ``ppo_trxl``) keeps each episode's
past layer inputs in a sliding window of ``task.rl.memory_length`` steps per layer; each
step's query attends to ``[memory; current]``, the memory emptied when the episode ends. Its
blocks are the library's :class:`~highway_transformer.nn.block.Block` with
:func:`~highway_transformer.models.builders.build_connection`, so every ``model.gate.kind``
and ``model.norm`` works: TrXL (``post``), TrXL-I (``pre``), the GTrXL gates, SDU, highway,
gated MHDPA. The window is the same as recomputing the episode with a band mask
(:meth:`TransformerPolicy.episode`, the test's oracle).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ...config import Config
from ...models.builders import build_connection, final_norm
from ...nn.attention import MultiHeadAttention, attend
from ...nn.block import Block, FeedForwardSublayer, collect_gate_biases
from ...nn.positional import encoding_dtype, sinusoid

Carry = dict[str, Tensor]


class EpisodicAttention(nn.Module):
    """Dot attention of the current positions over ``[context; h]``, with a key mask
    (``keys``: True where a query may attend, broadcast to ``[B, 1, Lq, Lk]``).
    Oracle: :func:`highway_transformer.nn.reference.episodic_attention`."""

    def __init__(self, d_model: int, n_heads: int, d_head: int | None, dropout: float) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(d_model, n_heads, d_head, dropout, causal=False)

    def forward(
        self,
        h: Tensor,
        context: Tensor | None = None,
        *,
        state: dict | None = None,
        keys: Tensor | None = None,
        **options: Any,
    ) -> Tensor:
        a = self.attention
        batch, length, _ = h.shape
        source = h if context is None else torch.cat([context, h], dim=1)
        w, b = a.qkv.weight.chunk(3), a.qkv.bias.chunk(3)
        q = nn.functional.linear(h, w[0], b[0])
        k, v = (nn.functional.linear(source, w[i], b[i]) for i in (1, 2))

        def heads(x: Tensor) -> Tensor:
            return x.view(batch, x.shape[1], a.n_heads, a.d_head).transpose(1, 2)

        dropout_p = a.dropout_attn if self.training else 0.0
        out = attend(heads(q), heads(k), heads(v), keys, False, dropout_p)
        return a.out(out.transpose(1, 2).reshape(batch, length, a.n_heads * a.d_head))


def _heads(d_model: int, actions: int) -> tuple[nn.Module, nn.Module]:
    return nn.Linear(d_model, actions), nn.Linear(d_model, 1)


class TransformerPolicy(nn.Module):
    """Observation encoder, episode-time sinusoid, blocks with episodic memory, two heads."""

    def __init__(self, config: Config, features: int, actions: int) -> None:
        super().__init__()
        m = config.model
        self.d_model, self.n_layers = m.d_model, m.n_layers
        self.memory_length = config.task.rl.memory_length
        self.positions = m.positional != "none"  # CleanRL's ppo_trxl can go without
        self.encoder = nn.Sequential(nn.Linear(features, m.d_model), nn.ReLU())
        self.blocks = nn.ModuleList(
            Block(
                ["attn", "ffn"],
                [
                    EpisodicAttention(m.d_model, m.n_heads, m.d_head, m.dropout_attn),
                    FeedForwardSublayer(m.d_model, m.d_inner, m.dropout),
                ],
                [build_connection(m, layer, "attn"), build_connection(m, layer, "ffn")],
            )
            for layer in range(m.n_layers)
        )
        self.norm = final_norm(m)
        self.actor, self.critic = _heads(m.d_model, actions)

    def gate_biases(self) -> dict[str, Tensor]:
        return collect_gate_biases(self.blocks)  # type: ignore[arg-type]

    def embed(self, obs: Tensor, positions: Tensor) -> Tensor:
        """Encoded observations plus the sinusoid of their step in the episode (none with
        ``model.positional=none``)."""
        x = self.encoder(obs)
        if not self.positions:
            return x
        pos = sinusoid(positions.reshape(-1), self.d_model, dtype=encoding_dtype(x))
        return x + pos.to(x.dtype).view(*positions.shape, self.d_model)

    def step(self, obs: Tensor, carry: Carry) -> tuple[Tensor, Tensor, Tensor]:
        """(logits, value, layer inputs [N, layers, D]) of one step per environment."""
        x = self.embed(obs, carry["position"])[:, None]  # [N, 1, D]
        keys = torch.cat([carry["valid"], carry["valid"].new_ones(len(obs), 1)], dim=1)
        keys = keys[:, None, None, :]  # [N, 1, 1, M + 1]
        inputs = []
        for layer, block in enumerate(self.blocks):
            inputs.append(x[:, 0])
            x = block(x, memory=carry["window"][:, :, layer], keys=keys)
        x = self.norm(x[:, 0])
        return self.actor(x), self.critic(x).squeeze(-1), torch.stack(inputs, dim=1)

    def forward(self, obs: Tensor, carry: Carry, dones: Tensor | None = None) -> Any:
        if dones is None:  # acting
            logits, value, inputs = self.step(obs, carry)
            after = {
                "window": torch.cat([carry["window"][:, 1:], inputs[:, None]], dim=1),
                "valid": torch.cat(
                    [carry["valid"][:, 1:], torch.ones_like(carry["valid"][:, :1])], dim=1
                ),
                "position": carry["position"] + 1,
            }
            return logits, value, after
        b, t = obs.shape[:2]
        flat = {k: v.flatten(0, 1) for k, v in carry.items()}
        logits, value, _ = self.step(obs.flatten(0, 1), flat)
        return logits.view(b, t, -1), value.view(b, t)

    def episode(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """Logits and values of whole episodes ``obs [B, T, F]`` recomputed at once: step
        ``t`` of each layer attends to the layer inputs of steps ``t - memory_length .. t``
        (the acting window's oracle)."""
        steps = obs.shape[1]
        x = self.embed(obs, torch.arange(steps, device=obs.device).expand(obs.shape[:2]))
        t = torch.arange(steps, device=obs.device)
        distance = t[:, None] - t[None, :]
        band = (distance >= 0) & (distance <= self.memory_length)
        for block in self.blocks:
            x = block(x, keys=band)
        x = self.norm(x)
        return self.actor(x), self.critic(x).squeeze(-1)


class RecurrentPolicy(nn.Module):
    """An LSTM or GRU over the episode (CleanRL's ``ppo_lstm``): replays recompute the
    rollout from the state carried at its first step, reset where episodes end."""

    def __init__(self, config: Config, features: int, actions: int, cell: str) -> None:
        super().__init__()
        d = config.model.d_model
        self.d_model, self.lstm = d, cell == "lstm"
        self.encoder = nn.Sequential(nn.Linear(features, d), nn.ReLU())
        self.cell = nn.LSTMCell(d, d) if self.lstm else nn.GRUCell(d, d)
        self.actor, self.critic = _heads(d, actions)

    def _cell(self, x: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        if self.lstm:
            h, c = self.cell(x, tuple(state.chunk(2, dim=-1)))  # type: ignore[arg-type]
            return h, torch.cat([h, c], dim=-1)
        h = self.cell(x, state)
        return h, h

    def forward(self, obs: Tensor, carry: Carry, dones: Tensor | None = None) -> Any:
        if dones is None:
            h, state = self._cell(self.encoder(obs), carry["state"])
            return self.actor(h), self.critic(h).squeeze(-1), {"state": state}
        x, state, outputs = self.encoder(obs), carry["state"][:, 0], []
        for t in range(obs.shape[1]):
            if t:  # an episode that ended at t - 1 starts afresh
                state = state * (1 - dones[:, t - 1])[:, None].to(state.dtype)
            h, state = self._cell(x[:, t], state)
            outputs.append(h)
        h = torch.stack(outputs, dim=1)
        return self.actor(h), self.critic(h).squeeze(-1)


class MLPPolicy(nn.Module):
    """Memoryless: each step's action from its observation alone (the chance line)."""

    def __init__(self, config: Config, features: int, actions: int) -> None:
        super().__init__()
        d = config.model.d_model
        self.body = nn.Sequential(nn.Linear(features, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU())
        self.actor, self.critic = _heads(d, actions)

    def forward(self, obs: Tensor, carry: Carry, dones: Tensor | None = None) -> Any:
        h = self.body(obs)
        logits, value = self.actor(h), self.critic(h).squeeze(-1)
        return (logits, value, {}) if dones is None else (logits, value)


#: ``task.rl.policy`` -> builder ``(config, features, actions) -> module``.
POLICIES = {
    "transformer": TransformerPolicy,
    "lstm": lambda c, f, a: RecurrentPolicy(c, f, a, "lstm"),
    "gru": lambda c, f, a: RecurrentPolicy(c, f, a, "gru"),
    "mlp": MLPPolicy,
}


def build_policy(config: Config, features: int, actions: int) -> nn.Module:
    return POLICIES[config.task.rl.policy](config, features, actions)


def initial_carry(config: Config, n: int, device: torch.device) -> Carry:
    """What each policy carries into the first step of ``n`` episodes (from the config alone,
    as the trainer may hand the task a wrapped model)."""
    rl, d = config.task.rl, config.model.d_model
    if rl.policy == "transformer":
        valid = torch.zeros(n, rl.memory_length, dtype=torch.bool, device=device)
        window = torch.zeros(n, rl.memory_length, config.model.n_layers, d, device=device)
        return {"window": window, "valid": valid, "position": valid.new_zeros(n, dtype=torch.long)}
    if rl.policy in ("lstm", "gru"):
        return {"state": torch.zeros(n, (2 if rl.policy == "lstm" else 1) * d, device=device)}
    return {}


def trim_carry(carry: Carry) -> Carry:
    """A Transformer carry cut to the window slots some step has filled (the newest are last),
    for a replay: the rest is masked out for every query, so the outputs are the same with less
    work, as CleanRL's ppo_trxl drops its memory padding. Other carries are returned as is."""
    if "valid" not in carry:
        return carry
    filled = int(carry["valid"].sum(-1).max()) if carry["valid"].numel() else 0
    start = carry["valid"].shape[-1] - filled
    return {
        **carry,
        "window": carry["window"][..., start:, :, :],
        "valid": carry["valid"][..., start:],
    }


def reset_carry(carry: Carry, ended: Tensor) -> Carry:
    """``carry`` with the environments whose episode ``ended`` (bool ``[N]``) emptied."""
    out = {}
    for key, value in carry.items():
        keep = (~ended).view(-1, *([1] * (value.dim() - 1)))
        out[key] = value & keep if value.dtype == torch.bool else value * keep.to(value.dtype)
    return out
