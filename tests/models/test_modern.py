"""The modern baseline as options of the Transformer family: the ``modern/transformer`` model
equals a hand-written Llama-style model (nanoGPT / x-transformers shape) with the same
weights; RoPE decodes from a cache at the right positions; the defaults build today's model,
parameter for parameter, and a config written before these keys loads unchanged."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import LM_FAMILIES, LM_VOCAB, build_lm
from torch import Tensor, nn

from highway_transformer.api import build_model, load_pretrained
from highway_transformer.config import Config, GateConfig, ModelConfig
from highway_transformer.config.loading import from_dict
from highway_transformer.errors import ConfigError
from highway_transformer.models.lm import LanguageModel
from highway_transformer.presets import get_preset
from highway_transformer.storage.folder import CONFIG_FILE, write_manifest
from highway_transformer.training.checkpoint import save_checkpoint
from highway_transformer.validation import validate

# --------------------------------------------------------------------------- a Llama by hand


def rms(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rope(x: Tensor, base: float) -> Tensor:
    """Llama's rotate-half RoPE on ``[B, H, L, dh]`` at positions 0 … L-1."""
    d, length = x.shape[-1], x.shape[-2]
    inv_freq = 1.0 / base ** (torch.arange(0, d, 2, dtype=x.dtype) / d)
    freqs = torch.outer(torch.arange(length, dtype=x.dtype), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * emb.cos() + torch.cat([-x2, x1], dim=-1) * emb.sin()


class LlamaBlock(nn.Module):
    """``x + attn(rms(x))``, then ``+ mlp(rms(·))``: separate q/k/v/o, gate/up/down, no bias."""

    def __init__(self, d: int, n_heads: int, hidden: int, base: float, gated: bool) -> None:
        super().__init__()
        self.n_heads, self.base, self.gated = n_heads, base, gated
        self.attn_norm, self.mlp_norm = nn.Parameter(torch.ones(d)), nn.Parameter(torch.ones(d))
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.g = nn.Linear(d, d, bias=False)  # the elementwise attention-output gate
        self.gate_proj, self.up_proj = (
            nn.Linear(d, hidden, bias=False),
            nn.Linear(d, hidden, bias=False),
        )
        self.down_proj = nn.Linear(hidden, d, bias=False)

    def heads(self, x: Tensor) -> Tensor:
        b, length, d = x.shape
        return x.view(b, length, self.n_heads, d // self.n_heads).transpose(1, 2)

    def forward(self, x: Tensor) -> Tensor:
        h = rms(x, self.attn_norm)
        q, k, v = (self.heads(f(h)) for f in (self.q, self.k, self.v))
        q, k = rope(q, self.base), rope(k, self.base)
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        length = x.shape[1]
        future = torch.ones(length, length, dtype=torch.bool).triu(1)
        y = scores.masked_fill(future, float("-inf")).softmax(-1) @ v
        y = y.transpose(1, 2).reshape(x.shape)
        if self.gated:
            y = y * torch.sigmoid(self.g(h))
        x = x + self.o(y)
        h = rms(x, self.mlp_norm)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self, config: ModelConfig, hidden: int) -> None:
        super().__init__()
        d = config.d_model
        self.embed = nn.Embedding(config.vocab_size, d)
        gated = config.attn_output_gate == "elementwise"
        self.blocks = nn.ModuleList(
            LlamaBlock(d, config.n_heads, hidden, config.rope_theta, gated)
            for _ in range(config.n_layers)
        )
        self.norm = nn.Parameter(torch.ones(d))

    def forward(self, tokens: Tensor) -> Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return rms(x, self.norm) @ self.embed.weight.T  # tied output, no bias


@torch.no_grad()
def copy_weights(ours: LanguageModel, theirs: Llama) -> None:
    theirs.embed.weight.copy_(ours.embedding.weight)
    theirs.norm.copy_(ours.final_norm.weight)
    for block, mine in zip(theirs.blocks, ours.blocks, strict=True):
        attn, ffn = mine.sublayers[0].attention, mine.sublayers[1]
        for linear, w in zip((block.q, block.k, block.v), attn.qkv.weight.chunk(3), strict=True):
            linear.weight.copy_(w)
        block.o.weight.copy_(attn.out.weight)
        if attn.output_gate is not None:
            block.g.weight.copy_(attn.output_gate.proj.weight)
        block.gate_proj.weight.copy_(ffn.fc1.weight)
        block.up_proj.weight.copy_(ffn.fc3.weight)
        block.down_proj.weight.copy_(ffn.fc2.weight)
        block.attn_norm.copy_(mine.connections[0].norm.weight)
        block.mlp_norm.copy_(mine.connections[1].norm.weight)


def _modern(preset: str) -> ModelConfig:
    config = get_preset(preset).replace(
        **{"model.vocab_size": 40, "model.d_model": 32, "model.n_heads": 4, "model.d_inner": 96}
    )
    config.model.dropout = 0.0
    return validate(config).model


@pytest.mark.parametrize("preset", ["modern/transformer", "modern/transformer+attn-output"])
def test_the_modern_baseline_is_a_hand_written_llama(preset: str) -> None:
    config = _modern(preset)
    torch.manual_seed(0)
    ours = LanguageModel(config).eval()
    with torch.no_grad():  # norm weights away from 1, so a swapped norm would show
        for name, p in ours.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    theirs = Llama(config, hidden=64).eval()  # 96 · 2/3 = 64, already a multiple of 8
    copy_weights(ours, theirs)
    n_ours = sum(p.numel() for p in ours.parameters())
    assert n_ours == sum(p.numel() for p in theirs.parameters()) - (
        0 if config.attn_output_gate != "none" else config.n_layers * 32 * 32
    )
    tokens = torch.randint(0, 40, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = ours.logits(ours(tokens)[0])
        torch.testing.assert_close(logits, theirs(tokens), atol=1e-5, rtol=1e-5)


def test_rope_decodes_from_the_cache_at_absolute_positions() -> None:
    model = build_lm(LM_FAMILIES["modern"]).double()
    tokens = torch.randint(0, LM_VOCAB, (2, 9), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full, _ = model(tokens)
        state = model.new_state()
        parts = [model(tokens[:, a:b], state=state)[0] for a, b in ((0, 4), (4, 5), (5, 9))]
    torch.testing.assert_close(torch.cat(parts, 1), full, atol=1e-12, rtol=0)
    assert state.layers[0][0]["kv"].length == 9


# --------------------------------------------------------------------------- today's model


def test_the_defaults_build_todays_parameters() -> None:
    """The parameter names and shapes of a default one-layer model, written out: none of the
    new keys adds, removes or renames a parameter when left at its default."""
    config = ModelConfig(vocab_size=11, d_model=8, n_layers=1, n_heads=2, d_inner=12)
    shapes = {k: tuple(v.shape) for k, v in LanguageModel(config).state_dict().items()}
    block = "blocks.0."
    assert shapes == {
        "embedding.weight": (11, 8),
        f"{block}sublayers.0.attention.qkv.weight": (24, 8),
        f"{block}sublayers.0.attention.qkv.bias": (24,),
        f"{block}sublayers.0.attention.out.weight": (8, 8),
        f"{block}sublayers.0.attention.out.bias": (8,),
        f"{block}sublayers.1.fc1.weight": (12, 8),
        f"{block}sublayers.1.fc1.bias": (12,),
        f"{block}sublayers.1.fc2.weight": (8, 12),
        f"{block}sublayers.1.fc2.bias": (8,),
        f"{block}connections.0.norm.weight": (8,),
        f"{block}connections.0.norm.bias": (8,),
        f"{block}connections.1.norm.weight": (8,),
        f"{block}connections.1.norm.bias": (8,),
        "output.weight": (11, 8),
        "output.bias": (11,),
    }


def test_a_config_written_before_the_new_keys_loads_as_the_defaults() -> None:
    written = Config().to_dict()
    for key in ("rope_theta", "ffn", "bias", "attn_output_gate"):
        del written["model"][key]
    assert from_dict(Config, written) == Config()


def test_a_checkpoint_written_before_the_new_keys_loads_unchanged(tmp_path: Path) -> None:
    config = Config(model=ModelConfig(vocab_size=11, d_model=8, n_layers=1, n_heads=2, d_inner=16))
    torch.manual_seed(0)
    model = build_model(config.model).eval()
    folder = save_checkpoint(tmp_path / "old", model, config)
    written = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    for key in ("rope_theta", "ffn", "bias", "attn_output_gate"):
        del written["model"][key]  # as a checkpoint of a version before these keys
    (folder / CONFIG_FILE).write_text(json.dumps(written), encoding="utf-8")
    write_manifest(folder)
    loaded, loaded_config, _ = load_pretrained(folder)
    assert loaded_config == config
    tokens = torch.randint(0, 11, (2, 7))
    with torch.no_grad():
        assert torch.equal(loaded.logits(loaded(tokens)[0]), model.logits(model(tokens)[0]))


@pytest.mark.parametrize(("d_inner", "hidden"), [(8, 8), (12, 8), (16, 16), (25, 24), (512, 344)])
def test_swiglu_hidden_is_two_thirds_of_d_inner_up_to_eights(d_inner: int, hidden: int) -> None:
    config = ModelConfig(vocab_size=11, d_model=8, n_layers=1, n_heads=2, d_inner=d_inner)
    config.ffn = "swiglu"
    assert build_model(config).blocks[0].sublayers[1].fc1.out_features == hidden


@pytest.mark.parametrize(("d_inner", "fix"), [(4, "d_inner=12 (hidden 8"), (13, "d_inner=12 (")])
def test_a_d_inner_that_swiglus_rounding_widens_is_refused(d_inner: int, fix: str) -> None:
    config = ModelConfig(
        vocab_size=11, d_model=8, n_layers=1, n_heads=2, d_inner=d_inner, ffn="swiglu"
    )
    with pytest.raises(ConfigError, match=re.escape(fix)):
        build_model(config)


@pytest.mark.parametrize(
    "overrides",
    [
        {"layer_norm": "rmsnorm"},
        {"ffn": "swiglu"},
        {"bias": False},
        {"attn_output_gate": "headwise"},
        {"gate": GateConfig(kind="sdu"), "attn_output_gate": "elementwise"},
    ],
)
def test_each_option_trains_alone_and_sdu_combines_with_the_output_gate(overrides: dict) -> None:
    model = build_lm(ModelConfig(**{**LM_FAMILIES["transformer"].__dict__, **overrides}))
    tokens = torch.randint(0, LM_VOCAB, (2, 7))
    loss = model.token_nll(model(tokens)[0], tokens).mean()
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is not None for p in model.parameters())
    biases = [n for n, _ in model.named_parameters() if n.endswith("bias")]
    if overrides.get("bias") is False:
        assert biases == []
    if "gate" in overrides:  # both gates: the connection's b1 and the attention's W_θ
        assert model.gate_biases() and any("output_gate" in n for n in biases)
