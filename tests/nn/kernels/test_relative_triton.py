"""The fused Triton kernel of Transformer-XL relative attention (``nn/kernels/relative_triton.py``)
against the core (``nn/kernels/relative_core.py``) and the reference code's formula
(:mod:`highway_transformer.nn.reference`): outputs and the gradients of every operand, with
memory, ``same_length`` and clamped positions, one query, tiles cut at odd places, dropout
with the kernel's own keep mask; and the ``model.attention_kernel`` setting.

Without CUDA the kernels run through Triton's interpreter, which Triton chooses when it is
first imported: this module sets ``TRITON_INTERPRET=1`` before importing it (a CPU-only
process: the interpreter changes nothing else there). Tiles are 16 × 16 in the interpreter,
so shapes of 17 to 40 keys cross tile boundaries.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from types import SimpleNamespace

import pytest
import torch

if not torch.cuda.is_available() and "triton" not in sys.modules:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is first imported

from highway_transformer.config import Config, ModelConfig  # noqa: E402
from highway_transformer.config.loading import from_dict  # noqa: E402
from highway_transformer.errors import ConfigError  # noqa: E402
from highway_transformer.nn import reference  # noqa: E402
from highway_transformer.nn.kernels import (  # noqa: E402
    attention_function,
    relative_core,
    relative_triton,
)
from highway_transformer.nn.relative import (  # noqa: E402
    RelativeMultiHeadAttention,
    relative_attention_mask,
)
from highway_transformer.validation import validate  # noqa: E402

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
_WHY_NOT = relative_triton.unavailable_reason(DEVICE)
if _WHY_NOT is not None and relative_triton.available():
    _WHY_NOT = "triton was imported before this module could choose its interpreter: " + _WHY_NOT
needs_kernel = pytest.mark.skipif(_WHY_NOT is not None, reason=f"no fused kernel here: {_WHY_NOT}")
_WHY_NOT_FP64 = _WHY_NOT or relative_triton.fp64_unavailable_reason(DEVICE)
#: The float64 cases: the interpreter on a CPU; on CUDA from Triton 3.9 (3.6 refuses fp64 dots).
needs_fp64_kernel = pytest.mark.skipif(
    _WHY_NOT_FP64 is not None, reason=f"no float64 fused kernel here: {_WHY_NOT_FP64}"
)


def operands(n_h, bsz, q_len, mem_len, d_h, dtype, seed=0):  # noqa: ANN001, ANN201
    """The core's operands, leaves wanting gradients; the position keys after the zero row
    the module prepends (none for one query)."""
    g = torch.Generator().manual_seed(seed)
    k_len = mem_len + q_len

    def leaf(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=dtype).to(DEVICE).requires_grad_()

    r_k = torch.randn(n_h, k_len, d_h, generator=g, dtype=dtype)
    r_rows = torch.cat([torch.zeros(n_h, 1, d_h, dtype=dtype), r_k], 1) if q_len > 1 else r_k
    return (
        leaf(n_h * bsz, q_len, d_h),
        leaf(n_h, bsz * q_len, d_h),
        leaf(n_h * bsz, k_len, d_h),
        leaf(n_h * bsz, k_len, d_h),
        r_rows.to(DEVICE).requires_grad_(),
    )


def mask_of(q_len: int, mem_len: int, window: int | None) -> torch.Tensor | None:
    """The layer's mask: causal, ``same_length`` with ``window`` when given; None for one
    query that sees its whole memory (what :class:`RelativePositions` passes)."""
    if q_len == 1 and window is None:
        return None
    same = window is not None
    return relative_attention_mask(q_len, mem_len, same_length=same, window=window, device=DEVICE)


def outputs_and_gradients(fn, ops, mask, upstream, *args):  # noqa: ANN001, ANN201
    out = fn(*ops, mask, *args)
    return [out.detach(), *torch.autograd.grad((out * upstream).sum(), ops)]


def reference_attention(q_u, q_v, key, value, r_rows, mask, scale, keep=None):  # noqa: ANN001, ANN201
    """:func:`reference.rel_scores` (the code's ``_rel_shift``) and :func:`reference.rel_attend`
    of the head-major operands, laid out time-major and back."""
    n_h = q_v.shape[0]
    hb, q_len, d_h = q_u.shape
    bsz, k_len = hb // n_h, key.shape[1]

    def time_major(t: torch.Tensor) -> torch.Tensor:
        return t.reshape(n_h, bsz, -1, d_h).permute(2, 1, 0, 3)

    if keep is not None:
        keep = keep.view(n_h, bsz, q_len, k_len).permute(2, 3, 1, 0)  # [L, K, B, H]
    r_k = r_rows[:, -k_len:].transpose(0, 1)
    scores = reference.rel_scores(time_major(q_u), time_major(q_v), time_major(key), r_k)
    out = reference.rel_attend(scores, time_major(value), mask, scale, keep)
    return out.permute(2, 1, 0, 3).reshape(hb, q_len, d_h)


# (heads, batch, L, M, d_head, same_length window or None)
SHAPES = [
    (2, 2, 5, 7, 4, None),  # memory, one tile
    (1, 2, 17, 20, 8, None),  # L and K past a tile: 2 × 3 tiles, ragged
    (2, 1, 16, 16, 16, None),  # exact tiles
    (1, 1, 33, 0, 8, None),  # no memory, 3 query tiles
    (2, 1, 20, 13, 8, 9),  # same_length: keys before the window hidden (whole tiles too)
    (2, 2, 1, 9, 4, None),  # one query (decoding): no zero row, no mask
    (1, 2, 1, 18, 4, 7),  # one query with same_length
]


@needs_fp64_kernel
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "H{}B{}L{}M{}d{}w{}".format(*s))
def test_fused_matches_the_core_and_the_reference_in_fp64(shape: tuple) -> None:
    n_h, bsz, q_len, mem_len, d_h, window = shape
    ops = operands(n_h, bsz, q_len, mem_len, d_h, torch.float64)
    mask, scale = mask_of(q_len, mem_len, window), 1 / math.sqrt(d_h)
    upstream = torch.randn(n_h * bsz, q_len, d_h, dtype=torch.float64, device=DEVICE)
    fused = outputs_and_gradients(relative_triton.relative_attention, ops, mask, upstream, scale)
    core = outputs_and_gradients(relative_core.relative_attention, ops, mask, upstream, scale)
    oracle = outputs_and_gradients(reference_attention, ops, mask, upstream, scale)
    for got, want, slow in zip(fused, core, oracle, strict=True):
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
        torch.testing.assert_close(got, slow, atol=1e-12, rtol=0)
    assert all(g.abs().max() > 0 for g in fused)


@needs_kernel
@pytest.mark.parametrize("shape", [SHAPES[1], SHAPES[4], SHAPES[5]], ids=["ragged", "same", "L1"])
def test_fused_matches_the_core_in_fp32(shape: tuple) -> None:
    n_h, bsz, q_len, mem_len, d_h, window = shape
    ops = operands(n_h, bsz, q_len, mem_len, d_h, torch.float32)
    mask, scale = mask_of(q_len, mem_len, window), 1 / math.sqrt(d_h)
    upstream = torch.randn(n_h * bsz, q_len, d_h, device=DEVICE)
    fused = outputs_and_gradients(relative_triton.relative_attention, ops, mask, upstream, scale)
    core = outputs_and_gradients(relative_core.relative_attention, ops, mask, upstream, scale)
    for got, want in zip(fused, core, strict=True):
        assert got.dtype == torch.float32
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("seed", [0, 1])
def test_fused_in_half_precision_is_as_close_as_the_core(dtype: torch.dtype, seed: int) -> None:
    """bf16 / fp16 operands (fp32 softmax statistics): against float64 on the same rounded
    operands, the kernel's largest error is within twice the core's, or within two machine
    epsilons of the largest value (both round their results to the dtype: one unit in the
    last place of a value near 2 is 0.016 in bf16)."""
    n_h, bsz, q_len, mem_len, d_h, window = SHAPES[4]
    ops = operands(n_h, bsz, q_len, mem_len, d_h, dtype, seed=seed)
    exact = [t.detach().double().requires_grad_() for t in ops]
    mask, scale = mask_of(q_len, mem_len, window), 1 / math.sqrt(d_h)
    g = torch.Generator().manual_seed(seed)
    upstream = torch.randn(n_h * bsz, q_len, d_h, generator=g, dtype=torch.float64).to(DEVICE)
    fused = outputs_and_gradients(
        relative_triton.relative_attention, ops, mask, upstream.to(dtype), scale
    )
    core = outputs_and_gradients(
        relative_core.relative_attention, ops, mask, upstream.to(dtype), scale
    )
    want = outputs_and_gradients(relative_core.relative_attention, exact, mask, upstream, scale)
    eps = torch.finfo(dtype).eps
    for got, theirs, truth in zip(fused, core, want, strict=True):
        assert got.dtype == dtype
        fused_error = float((got.double() - truth).abs().max())
        core_error = float((theirs.double() - truth).abs().max())
        bound = max(2 * core_error, 2 * eps * float(truth.abs().max()))
        assert fused_error <= bound, (fused_error, core_error, bound)


@needs_kernel
@pytest.mark.parametrize(
    ("dtype", "tolerance"),
    [pytest.param(torch.float64, 1e-12, marks=needs_fp64_kernel, id="fp64"),
     pytest.param(torch.float32, 1e-5, id="fp32")],
)  # fmt: skip
@pytest.mark.parametrize("shape", [SHAPES[1], SHAPES[4]], ids=["ragged", "same"])
def test_dropout_is_the_core_with_the_kernels_keep_mask(
    shape: tuple, dtype: torch.dtype, tolerance: float
) -> None:
    """The keep mask :func:`relative_triton.dropout_keep` materialises is the one the forward
    and the backward apply: the core given that mask computes the same numbers."""
    n_h, bsz, q_len, mem_len, d_h, window = shape
    ops = operands(n_h, bsz, q_len, mem_len, d_h, dtype)
    mask, scale, p, seed = mask_of(q_len, mem_len, window), 1 / math.sqrt(d_h), 0.3, 1234
    keep = relative_triton.dropout_keep(seed, (n_h * bsz, q_len, q_len + mem_len), p, DEVICE)
    assert 0.55 < keep.float().mean() < 0.85  # about 1 - p kept
    upstream = torch.randn(n_h * bsz, q_len, d_h, dtype=dtype, device=DEVICE)
    fused = outputs_and_gradients(
        relative_triton._FusedRelativeAttention.apply, ops, mask, upstream, scale, p, seed
    )
    weights = keep.to(dtype) / (1 - p)
    core = outputs_and_gradients(
        relative_core._RelativeAttention.apply, ops, mask, upstream, weights, scale
    )
    for got, want in zip(fused, core, strict=True):
        torch.testing.assert_close(got, want, atol=tolerance, rtol=0)


@needs_kernel
def test_dropout_repeats_for_a_seed_and_changes_with_it() -> None:
    n_h, bsz, q_len, mem_len, d_h, _ = SHAPES[0]
    ops = operands(n_h, bsz, q_len, mem_len, d_h, torch.float32)
    mask = mask_of(q_len, mem_len, None)

    def run(seed: int) -> torch.Tensor:
        torch.manual_seed(seed)
        return relative_triton.relative_attention(*ops, mask, 0.5, 0.4).detach()

    first = run(7)
    assert torch.equal(run(7), first)
    assert not torch.equal(run(8), first)
    shape = (n_h * bsz, q_len, q_len + mem_len)
    a = relative_triton.dropout_keep(3, shape, 0.4, DEVICE)
    assert torch.equal(relative_triton.dropout_keep(3, shape, 0.4, DEVICE), a)
    assert not torch.equal(relative_triton.dropout_keep(4, shape, 0.4, DEVICE), a)


@needs_fp64_kernel
@pytest.mark.parametrize("same_length", [False, True])
def test_fused_layer_is_the_reference_layer_with_clamped_positions(same_length: bool) -> None:
    """The whole sublayer with ``kernel="fused"`` (position keys built by the layer from a
    clamped R, zero rows, memory) against :func:`reference.rel_multihead_attention`, float64,
    outputs and the gradients of the input, the memory and every parameter."""
    torch.manual_seed(0)
    m = RelativeMultiHeadAttention(12, 2, 8, kernel="fused").double().to(DEVICE)
    with torch.no_grad():
        m.r_w_bias.normal_(std=0.5)
        m.r_r_bias.normal_(std=0.5)
    g = torch.Generator().manual_seed(1)
    h = torch.randn(2, 18, 12, generator=g, dtype=torch.float64).to(DEVICE).requires_grad_()
    memory = torch.randn(2, 9, 12, generator=g, dtype=torch.float64).to(DEVICE).requires_grad_()
    clamp = 6
    ours = m(h, memory, clamp_len=clamp, same_length=same_length)
    oracle = reference.rel_multihead_attention(
        h, memory, reference.rel_attention_weights(m), 2, clamp_len=clamp,
        same_length=same_length, shift=False,
    )  # fmt: skip
    torch.testing.assert_close(ours, oracle, atol=1e-12, rtol=0)
    leaves = [h, memory, *m.parameters()]
    upstream = torch.randn_like(ours)
    for a, b in zip(
        torch.autograd.grad((ours * upstream).sum(), leaves),
        torch.autograd.grad((oracle * upstream).sum(), leaves),
        strict=True,
    ):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


# --------------------------------------------------------------------------- the setting


def test_auto_picks_the_core_on_a_cpu_and_core_always() -> None:
    q_u = torch.zeros(2, 4, 8)
    assert attention_function("auto", q_u) is relative_core.relative_attention
    assert attention_function("core", q_u) is relative_core.relative_attention


def test_auto_keeps_the_core_until_the_kernel_is_verified_on_a_gpu() -> None:
    like = SimpleNamespace(device=torch.device("cuda"), dtype=torch.bfloat16, shape=(2, 4, 8))
    assert not relative_triton.VERIFIED_ON_GPU  # flip it once gpu_check.sh has checked it
    assert attention_function("auto", like) is relative_core.relative_attention


def test_auto_picks_the_kernel_on_cuda_where_it_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once verified on a GPU, on CUDA (operands stood in for: only their device, dtype and
    length are read) ``auto`` is the kernel for fp32/bf16/fp16 segments, the core for one
    query, float64, under ``torch.compile`` and without triton; ``fused`` is the kernel
    there."""

    def like(dtype: torch.dtype = torch.bfloat16, q_len: int = 4) -> SimpleNamespace:
        return SimpleNamespace(device=torch.device("cuda"), dtype=dtype, shape=(2, q_len, 8))

    monkeypatch.setattr(relative_triton, "VERIFIED_ON_GPU", True)
    core, kernel = relative_core.relative_attention, relative_triton.relative_attention
    if relative_triton.available():
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            assert attention_function("auto", like(dtype)) is kernel
        assert attention_function("fused", like(torch.float64, 1)) is kernel
    assert attention_function("auto", like(q_len=1)) is core
    assert attention_function("auto", like(torch.float64)) is core
    assert attention_function("core", like()) is core
    with monkeypatch.context() as patched:
        patched.setattr(torch.compiler, "is_compiling", lambda: True)
        assert attention_function("auto", like()) is core
    monkeypatch.setattr(relative_triton, "triton", None)
    assert attention_function("auto", like()) is core


def test_the_module_imports_without_triton(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("triton", "triton.language"):
        monkeypatch.setitem(sys.modules, name, None)  # importing it now raises ImportError
    name = "highway_transformer.nn.kernels._relative_triton_without_triton"  # a copy, its package
    spec = importlib.util.spec_from_file_location(name, relative_triton.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert not module.available() and not module.interpreting()
    q_u = torch.zeros(2, 4, 8)
    with pytest.raises(ConfigError, match=r"needs triton \(pip install triton"):
        module.relative_attention(q_u, q_u, q_u, q_u, q_u, None, 1.0)
    with pytest.raises(ConfigError, match="needs triton"):
        module.dropout_keep(1, (1, 2, 3), 0.1, "cpu")


def test_fused_where_it_cannot_run_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    q_u = torch.zeros(2, 4, 8)
    monkeypatch.setattr(relative_triton, "triton", None)
    with pytest.raises(ConfigError, match=r"needs triton \(pip install triton") as missing:
        attention_function("fused", q_u)
    assert "model.attention_kernel=core" in str(missing.value)
    monkeypatch.undo()
    if relative_triton.available():
        monkeypatch.setattr(relative_triton, "interpreting", lambda: False)
        with pytest.raises(ConfigError, match="runs on CUDA, not on cpu.*TRITON_INTERPRET=1"):
            attention_function("fused", q_u)
        with pytest.raises(ConfigError, match="runs on CUDA"):
            relative_triton.relative_attention(q_u, q_u, q_u, q_u, q_u, None, 1.0)
    with pytest.raises(ConfigError, match="attention kernel"):
        RelativeMultiHeadAttention(8, 2, 4, kernel="flash")


@pytest.mark.parametrize("kernel", ["core", "fused"])
def test_attention_kernel_applies_to_relative_attention_only(kernel: str) -> None:
    validate(Config(model=ModelConfig(family="xl", attention_kernel=kernel)))
    for family in ("transformer", "rtransformer"):
        with pytest.raises(ConfigError, match="model.attention_kernel applies to relative"):
            validate(Config(model=ModelConfig(family=family, attention_kernel=kernel)))
    with pytest.raises(ConfigError, match="attention kernel"):
        validate(Config(model=ModelConfig(family="xl", attention_kernel="flash")))


def test_the_setting_reaches_the_layers_and_old_configs_load() -> None:
    from highway_transformer.models.builders import ATTENTIONS

    layer = ATTENTIONS["relative"].build(ModelConfig(family="xl", attention_kernel="core"), True)
    assert layer.kernel == "core"
    saved = Config(model=ModelConfig(family="xl")).to_dict()
    del saved["model"]["attention_kernel"]  # a checkpoint's config from before the key
    assert validate(from_dict(Config, saved)).model.attention_kernel == "auto"


def test_float64_on_cuda_needs_a_triton_that_compiles_fp64_dots(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Triton 3.6 refuses a float64 ``tl.dot`` on CUDA: fused fp64 there is a one-line
    ConfigError naming the version, and the fp64 tests skip with that reason."""
    monkeypatch.setattr(relative_triton, "triton", SimpleNamespace(__version__="3.6.0"))
    monkeypatch.setattr(relative_triton, "interpreting", lambda: False)
    cuda = torch.device("cuda")
    reason = relative_triton.fp64_unavailable_reason(cuda)
    assert reason is not None and "triton 3.6.0" in reason and ">= 3.9" in reason
    assert relative_triton.fp64_unavailable_reason(torch.device("cpu")) is None
    monkeypatch.setattr(relative_triton, "unavailable_reason", lambda device: None)
    with pytest.raises(ConfigError, match="float64 tl.dot needs triton >= 3.9"):
        relative_triton._check(cuda, torch.float64)
    relative_triton._check(cuda, torch.float32)  # fp32 is fine on 3.6
    monkeypatch.setattr(relative_triton, "triton", SimpleNamespace(__version__="3.9.1"))
    assert relative_triton.fp64_unavailable_reason(cuda) is None
