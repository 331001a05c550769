"""The attention-output gate (``nn/output_gate.py``; Qiu et al. 2025, G1) in dot-product,
Shaw and relative attention against :func:`highway_transformer.nn.reference`'s literal forms
(fp32 1e-5, fp64 1e-12), and in float64 against the reference code's ``Qwen3Attention``
forward (transcribed below), the weights copied across."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from highway_transformer.errors import ConfigError
from highway_transformer.nn import reference
from highway_transformer.nn.attention import MultiHeadAttention
from highway_transformer.nn.decoding import KVCache
from highway_transformer.nn.output_gate import AttentionOutputGate, build_output_gate
from highway_transformer.nn.relative import RelativeMultiHeadAttention
from highway_transformer.nn.shaw import ShawAttention

D, HEADS, D_HEAD = 16, 4, 4
TOLERANCES = [(torch.float64, 1e-12), (torch.float32, 1e-5)]


def _stir(module: nn.Module) -> nn.Module:
    """Every parameter made to matter (gate biases and weights away from their init)."""
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.2 * torch.randn_like(p))
    return module


def _x(dtype: torch.dtype, length: int = 6) -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    return torch.randn(2, length, D, generator=g, dtype=torch.float64).to(dtype)


def test_the_gate_is_a_projection_of_its_own_none_adds_nothing() -> None:
    assert build_output_gate("none", D, HEADS, D_HEAD) is None
    assert build_output_gate("elementwise", D, HEADS, D_HEAD).proj.weight.shape == (16, D)
    headwise = build_output_gate("headwise", D, HEADS, D_HEAD, bias=False)
    assert headwise.proj.weight.shape == (HEADS, D) and headwise.proj.bias is None
    plain = MultiHeadAttention(D, HEADS)
    assert set(plain.state_dict()) == {"qkv.weight", "qkv.bias", "out.weight", "out.bias"}
    with pytest.raises(ConfigError, match="unknown attention-output gate 'both'"):
        AttentionOutputGate(D, HEADS, D_HEAD, "both")


@pytest.mark.parametrize(("dtype", "tol"), TOLERANCES)
@pytest.mark.parametrize("granularity", ["elementwise", "headwise"])
def test_the_module_is_the_oracle(dtype: torch.dtype, tol: float, granularity: str) -> None:
    torch.manual_seed(0)
    gate = _stir(AttentionOutputGate(D, HEADS, D_HEAD, granularity)).to(dtype)
    h, heads = _x(dtype), _x(dtype).flip(1)  # heads [B, L, H·dh], as the modules hand them
    got = gate(h, heads)
    split = reference.split_heads(heads, HEADS)
    expected = reference.merge_heads(
        reference.attention_output_gate(split, h, reference.output_gate_weights(gate))
    )
    torch.testing.assert_close(got, expected, atol=tol, rtol=tol)


@pytest.mark.parametrize(("dtype", "tol"), TOLERANCES)
@pytest.mark.parametrize("granularity", ["elementwise", "headwise"])
@pytest.mark.parametrize("bias", [True, False])
def test_dot_attention_with_rope_and_the_gate_is_the_oracle(
    dtype: torch.dtype, tol: float, granularity: str, bias: bool
) -> None:
    torch.manual_seed(0)
    attn = MultiHeadAttention(D, HEADS, rope_theta=100.0, bias=bias, output_gate=granularity)
    attn = _stir(attn).to(dtype).eval()
    x = _x(dtype)
    expected = reference.multi_head_attention(
        x,
        reference.attention_weights(attn.qkv, attn.out),
        HEADS,
        rope_base=100.0,
        gate=reference.output_gate_weights(attn.output_gate),
    )
    torch.testing.assert_close(attn(x), expected, atol=tol, rtol=tol)


def test_rope_and_the_gate_decode_under_a_kv_cache_as_the_full_pass() -> None:
    torch.manual_seed(0)
    attn = _stir(MultiHeadAttention(D, HEADS, rope_theta=10000.0, output_gate="headwise"))
    attn = attn.double().eval()
    x = _x(torch.float64, 7)
    with torch.no_grad():
        full = attn(x)
        cache = KVCache()
        parts = [attn(x[:, a:b], cache=cache) for a, b in ((0, 3), (3, 4), (4, 6), (6, 7))]
    torch.testing.assert_close(torch.cat(parts, 1), full, atol=1e-12, rtol=0)


def test_rope_needs_an_even_head_size() -> None:
    with pytest.raises(ConfigError, match="RoPE needs an even head size, got 3"):
        MultiHeadAttention(9, 3, rope_theta=10000.0)


@pytest.mark.parametrize(("dtype", "tol"), TOLERANCES)
@pytest.mark.parametrize("granularity", ["elementwise", "headwise"])
def test_shaw_attention_with_the_gate_is_the_oracle(
    dtype: torch.dtype, tol: float, granularity: str
) -> None:
    torch.manual_seed(0)
    attn = _stir(ShawAttention(D, HEADS, 3, output_gate=granularity)).to(dtype).eval()
    x = _x(dtype)
    expected = reference.shaw_multihead_attention(
        x,
        reference.attention_weights(attn.qkv, attn.out),
        attn.rel_k.weight,
        attn.rel_v.weight,
        HEADS,
        3,
        gate=reference.output_gate_weights(attn.output_gate),
    )
    torch.testing.assert_close(attn(x), expected, atol=tol, rtol=tol)


@pytest.mark.parametrize(("dtype", "tol"), TOLERANCES)
@pytest.mark.parametrize("granularity", ["elementwise", "headwise"])
def test_relative_attention_with_the_gate_is_the_oracle(
    dtype: torch.dtype, tol: float, granularity: str
) -> None:
    torch.manual_seed(0)
    attn = RelativeMultiHeadAttention(D, HEADS, D_HEAD, output_gate=granularity, kernel="core")
    attn = _stir(attn).to(dtype).eval()
    x, memory = _x(dtype, 5), _x(dtype, 3)
    expected = reference.rel_multihead_attention(
        x,
        memory,
        reference.rel_attention_weights(attn),
        HEADS,
        gate=reference.output_gate_weights(attn.output_gate),
    )
    torch.testing.assert_close(attn(x, memory), expected, atol=tol, rtol=tol)


# --------------------------------------------------------------------------- the reference code


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Transcribed from ``modeling_qwen3.py`` (``qiuzh20/gated_attention``): ``rotate_half``."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):  # noqa: ANN001, ANN201 - as written there
    """Transcribed from ``modeling_qwen3.py``: ``apply_rotary_pos_emb``."""
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def qwen3_rotary(length: int, head_dim: int, base: float, dtype: torch.dtype) -> tuple:
    """``Qwen3RotaryEmbedding.forward`` of ``modeling_qwen3.py`` with the default rope type
    (``inv_freq = 1 / base^(arange(0, dim, 2) / dim)``, ``emb = cat(freqs, freqs)``)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=dtype) / head_dim))
    position_ids = torch.arange(length, dtype=dtype)[None, :]
    freqs = (inv_freq[None, :, None] @ position_ids[:, None, :]).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


class Qwen3Attention(nn.Module):
    """``Qwen3Attention`` of ``modeling_qwen3.py`` (``qiuzh20/gated_attention``): its
    ``__init__`` projections and its eager ``forward``, transcribed line for line without the
    KV cache, GQA repeat (``num_key_value_heads == num_heads`` here) and qk-norm branches."""

    def __init__(self, hidden_size: int, num_heads: int, gate: str, qkv_bias: bool) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.num_key_value_heads = num_heads
        self.num_key_value_groups = self.num_heads // self.num_key_value_heads
        self.headwise_attn_output_gate = gate == "headwise"
        self.elementwise_attn_output_gate = gate == "elementwise"
        if self.headwise_attn_output_gate:
            self.q_proj = nn.Linear(
                self.hidden_size, self.num_heads * self.head_dim + self.num_heads, bias=qkv_bias
            )
        elif self.elementwise_attn_output_gate:
            self.q_proj = nn.Linear(
                self.hidden_size, self.num_heads * self.head_dim * 2, bias=qkv_bias
            )
        else:
            self.q_proj = nn.Linear(self.hidden_size, self.num_heads * self.head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(
            self.hidden_size, self.num_key_value_heads * self.head_dim, bias=qkv_bias
        )
        self.v_proj = nn.Linear(
            self.hidden_size, self.num_key_value_heads * self.head_dim, bias=qkv_bias
        )
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, self.hidden_size, bias=qkv_bias)

    def forward(self, hidden_states, attention_mask, position_embeddings):  # noqa: ANN001, ANN201
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)
        if self.headwise_attn_output_gate:
            query_states = query_states.view(bsz, q_len, self.num_key_value_heads, -1)
            query_states, gate_score = torch.split(
                query_states,
                [self.head_dim * self.num_key_value_groups, self.num_key_value_groups],
                dim=-1,
            )
            gate_score = gate_score.reshape(bsz, q_len, -1, 1)
            query_states = query_states.reshape(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        elif self.elementwise_attn_output_gate:
            query_states = query_states.view(bsz, q_len, self.num_key_value_heads, -1)
            query_states, gate_score = torch.split(
                query_states,
                [
                    self.head_dim * self.num_key_value_groups,
                    self.head_dim * self.num_key_value_groups,
                ],
                dim=-1,
            )
            gate_score = gate_score.reshape(bsz, q_len, -1, self.head_dim)
            query_states = query_states.reshape(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        else:
            query_states = query_states.view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        key_states = key_states.view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        value_states = value_states.view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(
            self.head_dim
        )
        causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
        attn_weights = attn_weights + causal_mask
        attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous()
        if self.headwise_attn_output_gate or self.elementwise_attn_output_gate:
            attn_output = attn_output * torch.sigmoid(gate_score)
        attn_output = attn_output.reshape(bsz, q_len, -1)
        return self.o_proj(attn_output)


@torch.no_grad()
def copy_into_qwen3(ours: MultiHeadAttention, theirs: Qwen3Attention) -> None:
    """Our weights into theirs: the gate's rows follow each head's query rows in their
    widened ``q_proj`` (its ``view(bsz, q_len, num_key_value_heads, -1)`` split)."""
    w_q, w_k, w_v = ours.qkv.weight.chunk(3)
    gate = ours.output_gate.proj.weight
    per_head = gate.shape[0] // ours.n_heads
    rows = [
        torch.cat(
            [w_q[h * ours.d_head : (h + 1) * ours.d_head], gate[h * per_head : (h + 1) * per_head]]
        )
        for h in range(ours.n_heads)
    ]
    theirs.q_proj.weight.copy_(torch.cat(rows))
    theirs.k_proj.weight.copy_(w_k)
    theirs.v_proj.weight.copy_(w_v)
    theirs.o_proj.weight.copy_(ours.out.weight)


@pytest.mark.parametrize("granularity", ["elementwise", "headwise"])
def test_our_gated_attention_is_the_reference_codes_qwen3_attention(granularity: str) -> None:
    torch.manual_seed(0)
    ours = MultiHeadAttention(D, HEADS, rope_theta=10000.0, bias=False, output_gate=granularity)
    ours = _stir(ours).double().eval()
    theirs = Qwen3Attention(D, HEADS, granularity, qkv_bias=False).double()
    copy_into_qwen3(ours, theirs)
    x = _x(torch.float64, 7)
    future = torch.ones(7, 7, dtype=torch.bool).triu(1)
    mask = torch.zeros(7, 7, dtype=torch.float64).masked_fill(future, float("-inf"))[None, None]
    expected = theirs(x, mask, qwen3_rotary(7, D_HEAD, 10000.0, torch.float64))
    # their softmax runs in float32 whatever the input (dtype=torch.float32): ~1e-8 apart
    torch.testing.assert_close(ours(x), expected, atol=1e-7, rtol=0)
    ungated = MultiHeadAttention(D, HEADS, rope_theta=10000.0, bias=False).double().eval()
    ungated.load_state_dict(ours.state_dict(), strict=False)
    assert (ungated(x) - expected).abs().max() > 1e-2  # the gate is what makes them agree
