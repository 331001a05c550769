"""Every fast module against its literal equations in :mod:`highway_transformer.nn.reference`.

Float64 throughout, small random shapes, tight tolerances; outputs, and gradients where the
fast path writes its own backward (the relative-attention core, LocalRNN, the RT LayerNorm).
"""

from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from highway_transformer.nn import reference
from highway_transformer.nn.attention import MultiHeadAttention
from highway_transformer.nn.connections import Connection, build_combiner
from highway_transformer.nn.feedforward import FeedForward
from highway_transformer.nn.local_rnn import LocalRNN
from highway_transformer.nn.memory import update_memory
from highway_transformer.nn.norms import build_norm
from highway_transformer.nn.positional import SinusoidalPositionalEncoding
from highway_transformer.nn.relative import (
    RelativeMultiHeadAttention,
    RelativePositions,
    distance_encoding,
    rel_shift,
    relative_attention_mask,
)
from highway_transformer.nn.shaw import ShawAttention

F64 = torch.float64
TOL = 1e-12
D, H, DH = 8, 2, 4


def _rand(*shape: int, seed: int = 0, grad: bool = False) -> Tensor:
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)
    return x.requires_grad_(grad)


def _randomised(module: nn.Module, seed: int = 0, scale: float = 0.5) -> nn.Module:
    """Every parameter redrawn (biases too, so every term matters), in float64."""
    g = torch.Generator().manual_seed(seed)
    module = module.double()
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=F64) * scale)
    return module


def _close(got: Tensor, want: Tensor, tol: float = TOL) -> None:
    torch.testing.assert_close(got, want, atol=tol, rtol=0)


def _grads_close(got: Tensor, want: Tensor, wrt: list[Tensor], tol: float = 1e-11) -> None:
    """The gradients of ``got`` and ``want`` under one random upstream gradient agree."""
    upstream = _rand(*got.shape, seed=99)
    for a, b in zip(
        torch.autograd.grad(got, wrt, upstream),
        torch.autograd.grad(want, wrt, upstream),
        strict=True,
    ):
        _close(a, b, tol)
        assert b.abs().max() > 0  # the gradient is exercised


# --------------------------------------------------------------------------- Transformer-XL

XL_CASES = [
    # (L, M (None: no memory), clamp_len, same_length)
    (4, None, 0, False),
    (5, 3, 0, False),  # M < L
    (3, 6, 0, False),  # M > L
    (4, 0, 0, False),  # empty memory
    (5, 4, 2, False),  # clamp_len
    (4, 5, -1, True),  # same_length, M > L
    (5, 2, 3, True),  # same_length, M < L, clamp_len
    (1, 5, 0, False),  # one query: no shift, no mask
    (1, 5, 0, True),  # one query, same_length
]


@pytest.mark.parametrize(("q_len", "mem_len", "clamp_len", "same_length"), XL_CASES)
@pytest.mark.parametrize("shift", [True, False])
def test_relative_attention_is_terms_a_to_d(
    q_len: int, mem_len: int | None, clamp_len: int, same_length: bool, shift: bool
) -> None:
    """The fused core's forward and hand-written backward against the reference, scored
    as the code does (``shift``) and pair by pair with each pair's distance."""
    torch.manual_seed(0)
    m = _randomised(RelativeMultiHeadAttention(D, H, DH))
    h = _rand(2, q_len, D, seed=1, grad=True)
    memory = None if mem_len is None else _rand(2, mem_len, D, seed=2, grad=True)
    fast = m(h, memory, clamp_len=clamp_len, same_length=same_length)
    slow = reference.rel_multihead_attention(
        h,
        memory,
        reference.rel_attention_weights(m),
        H,
        clamp_len=clamp_len,
        same_length=same_length,
        shift=shift,
    )
    _close(fast, slow)
    leaves = [h, *([memory] if mem_len else []), *m.parameters()]
    _grads_close(fast, slow, leaves)


@pytest.mark.parametrize(("q_len", "held", "window"), [(4, 0, 3), (3, 2, 6), (4, 6, 6), (2, 1, 0)])
def test_relative_attention_with_shared_biases_and_a_filling_window(
    q_len: int, held: int, window: int
) -> None:
    """``same_length`` with the configured memory length (the model's path), ``u`` / ``v``
    shared across layers (:class:`RelativePositions`)."""
    torch.manual_seed(0)
    m = _randomised(RelativeMultiHeadAttention(D, H, DH, own_biases=False))
    positions = _randomised(RelativePositions(D, H, DH, 0.0, shared_biases=True), seed=3)
    h = _rand(2, q_len, D, seed=1, grad=True)
    memory = _rand(2, held, D, seed=2, grad=True)
    inputs = positions(q_len, held, h, same_length=True, window=window)
    fast = m(h, memory, relative=inputs)
    weights = reference.rel_attention_weights(m, positions.r_w_bias, positions.r_r_bias)
    slow = reference.rel_multihead_attention(h, memory, weights, H, same_length=True, window=window)
    _close(fast, slow)
    leaves = [h, *([memory] if held else []), *m.parameters(), *positions.parameters()]
    _grads_close(fast, slow, leaves)


@pytest.mark.parametrize(("q_len", "mem_len"), [(1, 3), (4, 0), (4, 5), (6, 2)])
def test_code_shift_equals_the_terms_on_every_visible_key(q_len: int, mem_len: int) -> None:
    """``AC + rel_shift(BD)`` (the code) is ``(a) + (b) + (c) + (d)`` (the paper) wherever
    the causal mask lets a query look; the fast module's ``rel_shift`` is the code's."""
    k_len, bsz = q_len + mem_len, 3
    q, k = _rand(q_len, bsz, H, DH, seed=1), _rand(k_len, bsz, H, DH, seed=2)
    r_k, u, v = _rand(k_len, H, DH, seed=3), _rand(H, DH, seed=4), _rand(H, DH, seed=5)
    shifted = reference.rel_scores(q + u, q + v, k, r_k)
    a, b, c, d = reference.rel_score_terms(q, k, reference.pair_position_keys(r_k, q_len), u, v)
    visible = ~reference.xl_attention_mask(q_len, mem_len)
    _close(shifted[visible], (a + b + c + d)[visible])
    bd = torch.einsum("ibnd,jnd->ijbn", q, r_k)
    fast = rel_shift(bd.permute(2, 3, 0, 1)).permute(2, 3, 0, 1)  # the library's on [..., L, K]
    assert torch.equal(fast, reference.rel_shift(bd))


@pytest.mark.parametrize("window", [None, 0, 1, 3, 9])
@pytest.mark.parametrize(("q_len", "mem_len"), [(1, 0), (1, 4), (4, 0), (4, 3), (3, 6)])
def test_attention_mask_is_the_codes(q_len: int, mem_len: int, window: int | None) -> None:
    for same_length in (False, True):
        fast = relative_attention_mask(q_len, mem_len, same_length=same_length, window=window)
        assert torch.equal(
            fast, reference.xl_attention_mask(q_len, mem_len, same_length, window)
        ), same_length


@pytest.mark.parametrize(
    ("k_len", "d_model", "clamp_len"), [(9, 8, 0), (9, 8, -1), (9, 8, 3), (6, 7, 2)]
)
def test_relative_sinusoid_is_the_codes(k_len: int, d_model: int, clamp_len: int) -> None:
    fast = distance_encoding(k_len, d_model, clamp_len, torch.zeros(1, dtype=F64))
    _close(fast, reference.relative_sinusoid(k_len, d_model, clamp_len))


@pytest.mark.parametrize("d_model", [8, 7])
def test_absolute_sinusoid_is_eqs_5_6(d_model: int) -> None:
    x = torch.zeros(1, 6, d_model, dtype=F64)
    fast = SinusoidalPositionalEncoding(d_model)(x, start=37)[0]
    _close(fast, reference.absolute_sinusoid(torch.arange(37, 43, dtype=F64), d_model))


def test_memory_update_is_the_codes() -> None:
    old = [_rand(2, 3, D, seed=i) for i in range(2)]
    new = [_rand(2, 4, D, seed=10 + i) for i in range(2)]
    for mem_len in (2, 5, 9):
        fast = update_memory(old, new, mem_len)
        time_major = [t.transpose(0, 1) for t in old], [t.transpose(0, 1) for t in new]
        slow = reference.xl_update_memory(*time_major, mem_len)
        for a, b in zip(fast, slow, strict=True):
            assert torch.equal(a, b.transpose(0, 1))


# --------------------------------------------------------------------------- LocalRNN


def _local_rnn(cell: str, window: int) -> LocalRNN:
    torch.manual_seed(0)
    return _randomised(LocalRNN(D, window, cell))


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
@pytest.mark.parametrize(("window", "length"), [(1, 4), (3, 6), (5, 3)])
def test_local_rnn_is_eq_2(cell: str, window: int, length: int) -> None:
    module = _local_rnn(cell, window)
    x = _rand(2, length, D, seed=1, grad=True)
    fast = module(x)
    slow = reference.local_rnn(x, cell, reference.rnn_weights(module.rnn), window)
    _close(fast, slow)
    # one step from h_0 = 0 leaves W_hh unused
    params = [p for n, p in module.named_parameters() if window > 1 or "weight_hh" not in n]
    _grads_close(fast, slow, [x, *params])
    # the written-out cells are torch's: the same as the module's own nn.RNN over each window
    _close(slow, reference.local_rnn_windows(module.rnn, x, window))


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
@pytest.mark.parametrize("window", [1, 4])
def test_local_rnn_step_is_eq_2_over_the_history(cell: str, window: int) -> None:
    module = _local_rnn(cell, window)
    x = _rand(2, 7, D, seed=1)
    weights = reference.rnn_weights(module.rnn)
    state = None
    for lo, hi in [(0, 1), (1, 4), (4, 7)]:
        out, new_state = module.step(x[:, lo:hi], state)
        _close(out, reference.local_rnn(x[:, lo:hi], cell, weights, window, history=state))
        state = new_state


# --------------------------------------------------------------------------- gates, connections

HT = {
    "sdu-sigmoid": lambda x, y, w: reference.sdu(x, y, *w, "sigmoid"),
    "sdu-tanh": lambda x, y, w: reference.sdu(x, y, *w, "tanh"),
    "highway": lambda x, y, w: reference.highway_gate(x, y, *w),
    "gated": lambda x, y, w: reference.gated_sublayer(x, y, *w),
}


@pytest.mark.parametrize("name", sorted(HT))
def test_highway_transformer_gates(name: str) -> None:
    kind, _, activation = name.partition("-")
    gate = _randomised(build_combiner(kind, D, activation or "sigmoid"))
    x, y = _rand(2, 3, D, seed=1), _rand(2, 3, D, seed=2)
    _close(gate(x, y), HT[name](x, y, reference.ht_gate_weights(gate)))


def _gtrxl_reference(gate: nn.Module, x: Tensor, y: Tensor) -> Tensor:
    """The GTrXL gate of ``gate``'s kind from nn.reference, with its weights split by name."""
    b_g = gate.b_g
    if hasattr(gate, "w_g"):  # input, output and highway: one W_g
        w_g = gate.w_g.weight
        fn = {
            "InputGate": lambda: reference.gtrxl_input_gate(x, y, w_g),
            "OutputGate": lambda: reference.gtrxl_output_gate(x, y, w_g, b_g),
            "HighwayGTrXLGate": lambda: reference.gtrxl_highway_gate(x, y, w_g, b_g),
        }[type(gate).__name__]
        return fn()
    if hasattr(gate, "wu_y"):
        w_g, u_g = gate.wu_y.weight.chunk(2)
        return reference.gtrxl_sigmoid_tanh_gate(x, y, w_g, u_g, b_g)
    w_r, w_z, w_g = gate.w_y.weight.chunk(3)
    u_r, u_z = gate.u_x.weight.chunk(2)
    return reference.gtrxl_gru_gate(x, y, w_r, u_r, w_z, u_z, w_g, gate.u_g.weight, b_g)


@pytest.mark.parametrize(
    "kind", ["gtrxl-input", "gtrxl-output", "gtrxl-highway", "gtrxl-sigmoid-tanh", "gtrxl-gru"]
)
def test_gtrxl_gates(kind: str) -> None:
    gate = _randomised(build_combiner(kind, D, "sigmoid", 1.5))
    x, y = _rand(2, 3, D, seed=1), _rand(2, 3, D, seed=2)
    _close(gate(x, y), _gtrxl_reference(gate, x, y))


def _combiner_reference(kind: str, combiner: nn.Module) -> reference.Combine:
    """The equation of a combiner of ``kind`` (default activation) with its weights."""
    if kind == "none":
        return reference.residual
    if kind.startswith("gtrxl"):
        return lambda x, y: _gtrxl_reference(combiner, x, y)
    gate = {"sdu": reference.sdu, "highway": reference.highway_gate}[kind]
    return lambda x, y: gate(x, y, *reference.ht_gate_weights(combiner))


@pytest.mark.parametrize(
    ("norm", "kind"), [("post", "sdu"), ("post", "none"), ("pre", "highway"), ("pre", "gtrxl-gru")]
)
def test_connections(norm: str, kind: str) -> None:
    connection = _randomised(Connection(D, build_combiner(kind, D), norm))
    sublayer = _randomised(nn.Linear(D, D), seed=5)
    x, context = _rand(2, 3, D, seed=1), _rand(2, 2, D, seed=2)

    def attend(h: Tensor, c: Tensor) -> Tensor:  # a sublayer that reads a context
        return sublayer(h) + c.mean(1, keepdim=True)

    def layer_norm(v: Tensor) -> Tensor:
        ln = connection.norm
        return reference.layer_norm(v, ln.weight, ln.bias, ln.eps)

    connect = reference.pre_ln_connection if norm == "pre" else reference.post_ln_connection
    combine = _combiner_reference(kind, connection.combiner)
    _close(connection(x, attend, context), connect(x, attend, layer_norm, combine, context))


# --------------------------------------------------------------------------- norms, sublayers


def test_layer_norms() -> None:
    x = _rand(3, 4, 16, seed=1, grad=True) * 2 + 1
    torch_ln = _randomised(build_norm("torch", 16), seed=2)
    _close(torch_ln(x), reference.layer_norm(x, torch_ln.weight, torch_ln.bias, torch_ln.eps))
    rt = _randomised(build_norm("rt", 16), seed=3)
    fast, slow = rt(x), reference.rt_layer_norm(x, rt.weight, rt.bias, rt.eps)
    _close(fast, slow)
    _grads_close(fast, slow, [x, rt.weight, rt.bias])  # a hand-written backward


def test_feed_forward_is_eq_8() -> None:
    ffn = _randomised(FeedForward(D, 3 * D))
    x = _rand(2, 3, D, seed=1)
    weights = (ffn.fc1.weight, ffn.fc1.bias, ffn.fc2.weight, ffn.fc2.bias)
    _close(ffn(x), reference.position_wise_ff(x, *weights))


def test_multi_head_attention_is_eqs_1_3() -> None:
    attn = _randomised(MultiHeadAttention(D, H))
    x = _rand(2, 5, D, seed=1)
    weights = reference.attention_weights(attn.qkv, attn.out)
    _close(attn(x), reference.multi_head_attention(x, weights, H))


@pytest.mark.parametrize(("clip", "causal"), [(1, True), (2, False), (9, True)])
def test_shaw_attention_is_eqs_2_4(clip: int, causal: bool) -> None:
    attn = _randomised(ShawAttention(D, H, clip, causal=causal))
    h = _rand(2, 6, D, seed=1)
    weights = reference.attention_weights(attn.qkv, attn.out)
    slow = reference.shaw_multihead_attention(
        h, weights, attn.rel_k.weight, attn.rel_v.weight, H, clip, causal
    )
    _close(attn(h), slow)
