"""Transformer-XL relative attention as a fused Triton kernel (forward and backward).

The same function as :func:`.relative_core.relative_attention`, with the same operands
(head-major ``H·B`` matrices: ``q_u [H·B, L, dh]``, ``q_v [H, B·L, dh]``, ``key`` /
``value [H·B, K, dh]``, ``r_rows [H, K+p, dh]`` the position keys of the distances
``K-1 … 0`` after ``p`` zero rows, ``mask [L, K]``), computed flash-attention style: a
program holds a tile of queries, walks the key tiles with an online softmax and keeps only
the output and each query's log-sum-exp; no ``[H·B, L, K]`` tensor is written.

The position term comes from the tile itself. For query ``i`` and key ``j`` the shift of
:func:`.relative_core.shifted_view` reads position row ``c = j - i + L-1+p`` of ``r_rows``;
over a ``BM × BN`` tile those rows form a band of ``BM + BN - 1`` consecutive rows. The
kernel multiplies the tile's ``q_v`` rows with the band (``[BM, BW]``, tensor cores) and
picks entry ``(a, b)`` from column ``b - a + BM-1`` (``tl.gather``). Backward: two kernels
recompute the scores from the saved log-sum-exp, one program per key tile (``d key``,
``d value``) and one per query tile (``d q_u``, ``d q_v``, and the band's gradient, the
inverse gather, added into ``d r_rows`` with atomics in float32, float64 for float64: the
order of those additions, and so the last bits of ``d r_rows``, may vary between runs on a
GPU).

Future keys (``j > M+i``, ``M = K-L``) are always hidden: the shift gives them no position
row (the core reads unrelated numbers there, which every mask the layer makes hides). A
query that sees no key gives NaN, as in the core.

Dropout on the attention weights keeps ``(i, j)`` of matrix ``n`` where Philox
(``tl.rand``) at counter ``(n·L + i)·K + j`` is ``>= p``; the seed is drawn from torch's
global generator, so seeded runs repeat, and the backward regenerates the same mask
(:func:`dropout_keep` materialises it for tests). The stream differs from the core's
(numpy's SFC64 on the CPU, ``torch.rand`` on a GPU): the same distribution, other draws.

Triton is optional: without it this module imports and :func:`relative_attention` raises a
:class:`~highway_transformer.errors.ConfigError`. On a CPU the kernels run only through
Triton's interpreter (``TRITON_INTERPRET=1`` set before ``triton`` is first imported): the
tests' route, far too slow for training.

Oracle: :mod:`.relative_core` (itself checked against :func:`.reference.rel_attention`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ...errors import ConfigError

try:  # optional: CUDA builds of torch bring it; pip install triton elsewhere
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised where triton is not installed
    triton = None
    tl = None

_LOG2E = 1.4426950408889634
#: Tile size (queries and keys) on a GPU by dtype: each kernel's shared memory, compiled for
#: sm_90, stays near 100 KiB at most (16-bit at 64: 80 KiB; fp32 at 32: 96 KiB; fp64 at 16:
#: 100 KiB; fp32 at 64 would need 208 KiB, fp64 at 32 about 210 KiB).
GPU_BLOCKS = {torch.float16: 64, torch.bfloat16: 64, torch.float32: 32, torch.float64: 16}
#: In Triton's interpreter: small tiles, so the tests cross tile boundaries at tiny sizes.
INTERPRETER_BLOCK = 16
#: Whether the kernel has been checked on a GPU against the core (``tests/nn/
#: test_relative_triton.py`` on CUDA, through ``benchmarks/gpu_check.sh``). Until then
#: ``model.attention_kernel=auto`` keeps the core on every device: an unmeasured kernel is
#: opted into (``fused``), never chosen for a user.
VERIFIED_ON_GPU = False
#: The first Triton whose CUDA backend compiles a float64 ``tl.dot`` of these tiles: 3.6
#: refuses it ("Currently fp64 don't support largeK MMA"); its interpreter does not.
FP64_ON_CUDA_FROM = (3, 9)
_DTYPES = tuple(GPU_BLOCKS)


def available() -> bool:
    """Whether triton imported (the fused kernel may run on CUDA)."""
    return triton is not None


def interpreting() -> bool:
    """Whether Triton runs kernels through its interpreter (``TRITON_INTERPRET=1`` when it
    was imported): the kernels then run on CPU tensors too."""
    if triton is None:
        return False
    # Decided when the kernels below were decorated (as the environment was then).
    return type(_forward_kernel).__name__ == "InterpretedFunction"


def unavailable_reason(device: torch.device) -> str | None:
    """Why the fused kernel cannot run on ``device`` (None: it can)."""
    if triton is None:
        return (
            "model.attention_kernel=fused needs triton (pip install triton; CUDA builds of "
            "torch bring it); use model.attention_kernel=core or auto"
        )
    if device.type != "cuda" and not interpreting():
        return (
            f"model.attention_kernel=fused runs on CUDA, not on {device.type} (on a CPU only "
            "through Triton's interpreter: TRITON_INTERPRET=1 before triton is imported); use "
            "model.attention_kernel=core or auto"
        )
    return None


if triton is not None:

    @triton.jit
    def _dot(a, b, DOT: tl.constexpr, ACC: tl.constexpr, PREC: tl.constexpr):
        """``a @ b`` accumulated in ``ACC``, the operands as ``DOT``: their own dtype, except
        bf16 in the interpreter (its dot multiplies bf16 bit patterns as integers): float32,
        which holds every bf16 product exactly, as a tensor core does."""
        return tl.dot(a.to(DOT), b.to(DOT), out_dtype=ACC, input_precision=PREC)

    @triton.jit
    def _keep(seed, n, offs_i, offs_j, q_len, k_len, p_drop):
        """Dropout's keep mask of a tile: Philox at counter ``(n·L + i)·K + j``."""
        counter = (n * q_len + offs_i[:, None].to(tl.int64)) * k_len + offs_j[None, :]
        return tl.rand(seed, counter) >= p_drop

    @triton.jit
    def _scores(  # noqa: PLR0913 - a tile's operands
        qu,
        qv,
        KEY,
        R,
        MASK,
        n,
        h,
        i0,
        j0,
        offs_i,
        offs_d,
        q_len,
        k_len,
        width,
        d_head,
        qk_scale,
        BM: tl.constexpr,
        BN: tl.constexpr,
        BW: tl.constexpr,
        HAS_MASK: tl.constexpr,
        ACC: tl.constexpr,
        DOT: tl.constexpr,
        PREC: tl.constexpr,
    ):
        """The tile's scaled scores in base 2 (``log2(e)·scale·(AC + shift(BD))``, ``-inf``
        where hidden), its keys and position band, and which entries are visible."""
        offs_j = j0 + tl.arange(0, BN)
        j_ok = offs_j < k_len
        d_ok = offs_d < d_head
        key = tl.load(
            KEY + n * k_len * d_head + offs_j[:, None] * d_head + offs_d[None, :],
            mask=j_ok[:, None] & d_ok[None, :],
            other=0.0,
        )
        ac = _dot(qu, tl.trans(key), DOT, ACC, PREC)
        # Band: position rows c0 … c0+BW-1; entry (a, b) of the tile reads row c0 + b-a+BM-1.
        c0 = j0 - i0 - (BM - 1) + q_len - 1 + width - k_len
        offs_c = c0 + tl.arange(0, BW)
        c_ok = (offs_c >= 0) & (offs_c < width)
        band = tl.load(
            R + h * width * d_head + offs_c[:, None] * d_head + offs_d[None, :],
            mask=c_ok[:, None] & d_ok[None, :],
            other=0.0,
        )
        products = _dot(qv, tl.trans(band), DOT, ACC, PREC)
        pick = tl.arange(0, BN)[None, :] - tl.arange(0, BM)[:, None] + (BM - 1)
        bd = tl.gather(products, pick, 1)
        visible = (offs_i[:, None] < q_len) & j_ok[None, :]
        visible = visible & (offs_j[None, :] <= offs_i[:, None] + (k_len - q_len))  # causal
        if HAS_MASK:
            hidden = tl.load(
                MASK + offs_i[:, None] * k_len + offs_j[None, :], mask=visible, other=1
            )
            visible = visible & (hidden == 0)
        s = tl.where(visible, (ac + bd) * qk_scale, float("-inf"))
        return s, visible, key, band, offs_j, offs_c, c_ok

    @triton.jit(do_not_specialize=["seed"])
    def _forward_kernel(  # noqa: PLR0913
        QU,
        QV,
        KEY,
        VALUE,
        R,
        MASK,
        OUT,
        LSE,
        seed,
        qk_scale,
        p_drop,
        n_batch,
        q_len,
        k_len,
        width,
        d_head,
        BM: tl.constexpr,
        BN: tl.constexpr,
        BW: tl.constexpr,
        BD: tl.constexpr,
        HAS_MASK: tl.constexpr,
        DROPOUT: tl.constexpr,
        ACC: tl.constexpr,
        DOT: tl.constexpr,
        PREC: tl.constexpr,
    ):
        n = tl.program_id(1).to(tl.int64)
        h = n // n_batch
        i0 = tl.program_id(0) * BM
        offs_i = i0 + tl.arange(0, BM)
        offs_d = tl.arange(0, BD)
        rows = n * q_len * d_head + offs_i[:, None] * d_head + offs_d[None, :]
        row_ok = (offs_i[:, None] < q_len) & (offs_d[None, :] < d_head)
        qu = tl.load(QU + rows, mask=row_ok, other=0.0)
        qv = tl.load(QV + rows, mask=row_ok, other=0.0)
        m_i = tl.full([BM], float("-inf"), ACC)
        l_i = tl.zeros([BM], ACC)
        acc = tl.zeros([BM, BD], ACC)
        hi = tl.minimum(k_len - q_len + i0 + BM, k_len)  # later keys are every row's future
        for j0 in range(0, hi, BN):
            s, visible, key, band, offs_j, offs_c, c_ok = _scores(
                qu, qv, KEY, R, MASK, n, h, i0, j0, offs_i, offs_d, q_len, k_len, width,
                d_head, qk_scale, BM, BN, BW, HAS_MASK, ACC, DOT, PREC,
            )  # fmt: skip
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows that saw no key yet
            alpha = tl.exp2(m_i - m_safe)
            p = tl.exp2(s - m_safe[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            if DROPOUT:
                keep = _keep(seed, n, offs_i, offs_j, q_len, k_len, p_drop)
                p = tl.where(keep, p / (1.0 - p_drop), 0.0)
            value = tl.load(
                VALUE + n * k_len * d_head + offs_j[:, None] * d_head + offs_d[None, :],
                mask=(offs_j[:, None] < k_len) & (offs_d[None, :] < d_head),
                other=0.0,
            )
            acc = acc * alpha[:, None]
            acc += _dot(p.to(value.dtype), value, DOT, ACC, PREC)
            m_i = m_new
        l_i = tl.where(offs_i < q_len, l_i, 1.0)  # rows past L: nothing to divide
        out = acc / l_i[:, None]
        tl.store(OUT + rows, out.to(OUT.dtype.element_ty), mask=row_ok)
        tl.store(LSE + n * q_len + offs_i, m_i + tl.log2(l_i), mask=offs_i < q_len)

    @triton.jit(do_not_specialize=["seed"])
    def _backward_keys_kernel(  # noqa: PLR0913
        QU,
        QV,
        KEY,
        VALUE,
        R,
        MASK,
        D_OUT,
        LSE,
        DELTA,
        D_KEY,
        D_VALUE,
        seed,
        qk_scale,
        scale,
        p_drop,
        n_batch,
        q_len,
        k_len,
        width,
        d_head,
        BM: tl.constexpr,
        BN: tl.constexpr,
        BW: tl.constexpr,
        BD: tl.constexpr,
        HAS_MASK: tl.constexpr,
        DROPOUT: tl.constexpr,
        ACC: tl.constexpr,
        DOT: tl.constexpr,
        PREC: tl.constexpr,
    ):
        """``d key`` and ``d value`` of one key tile, over the query tiles that see it."""
        n = tl.program_id(1).to(tl.int64)
        h = n // n_batch
        j0 = tl.program_id(0) * BN
        offs_d = tl.arange(0, BD)
        d_ok = offs_d < d_head
        offs_jt = j0 + tl.arange(0, BN)
        cols = n * k_len * d_head + offs_jt[:, None] * d_head + offs_d[None, :]
        col_ok = (offs_jt[:, None] < k_len) & d_ok[None, :]
        value = tl.load(VALUE + cols, mask=col_ok, other=0.0)
        d_key = tl.zeros([BN, BD], ACC)
        d_value = tl.zeros([BN, BD], ACC)
        lo = tl.maximum(j0 - (k_len - q_len), 0)  # earlier queries see none of these keys
        for i0 in range((lo // BM) * BM, q_len, BM):
            offs_i = i0 + tl.arange(0, BM)
            rows = n * q_len * d_head + offs_i[:, None] * d_head + offs_d[None, :]
            row_ok = (offs_i[:, None] < q_len) & d_ok[None, :]
            qu = tl.load(QU + rows, mask=row_ok, other=0.0)
            qv = tl.load(QV + rows, mask=row_ok, other=0.0)
            s, visible, key, band, offs_j, offs_c, c_ok = _scores(
                qu, qv, KEY, R, MASK, n, h, i0, j0, offs_i, offs_d, q_len, k_len, width,
                d_head, qk_scale, BM, BN, BW, HAS_MASK, ACC, DOT, PREC,
            )  # fmt: skip
            lse = tl.load(LSE + n * q_len + offs_i, mask=offs_i < q_len, other=0.0)
            p = tl.where(visible, tl.exp2(s - lse[:, None]), 0.0)
            d_out = tl.load(D_OUT + rows, mask=row_ok, other=0.0)
            d_p = _dot(d_out, tl.trans(value), DOT, ACC, PREC)
            weights = p
            if DROPOUT:
                keep = _keep(seed, n, offs_i, offs_j, q_len, k_len, p_drop)
                weights = tl.where(keep, p / (1.0 - p_drop), 0.0)
                d_p = tl.where(keep, d_p / (1.0 - p_drop), 0.0)
            d_value += _dot(tl.trans(weights.to(d_out.dtype)), d_out, DOT, ACC, PREC)
            delta = tl.load(DELTA + n * q_len + offs_i, mask=offs_i < q_len, other=0.0)
            d_s = p * (d_p - delta[:, None])
            d_key += _dot(tl.trans(d_s.to(qu.dtype)), qu, DOT, ACC, PREC)
        tl.store(D_KEY + cols, (d_key * scale).to(D_KEY.dtype.element_ty), mask=col_ok)
        tl.store(D_VALUE + cols, d_value.to(D_VALUE.dtype.element_ty), mask=col_ok)

    @triton.jit(do_not_specialize=["seed"])
    def _backward_queries_kernel(  # noqa: PLR0913
        QU,
        QV,
        KEY,
        VALUE,
        R,
        MASK,
        D_OUT,
        LSE,
        DELTA,
        D_QU,
        D_QV,
        D_R,
        seed,
        qk_scale,
        scale,
        p_drop,
        n_batch,
        q_len,
        k_len,
        width,
        d_head,
        BM: tl.constexpr,
        BN: tl.constexpr,
        BW: tl.constexpr,
        BD: tl.constexpr,
        HAS_MASK: tl.constexpr,
        DROPOUT: tl.constexpr,
        ACC: tl.constexpr,
        DOT: tl.constexpr,
        PREC: tl.constexpr,
    ):
        """``d q_u``, ``d q_v`` of one query tile, and its bands' share of ``d r_rows``."""
        n = tl.program_id(1).to(tl.int64)
        h = n // n_batch
        i0 = tl.program_id(0) * BM
        offs_i = i0 + tl.arange(0, BM)
        offs_d = tl.arange(0, BD)
        d_ok = offs_d < d_head
        rows = n * q_len * d_head + offs_i[:, None] * d_head + offs_d[None, :]
        row_ok = (offs_i[:, None] < q_len) & d_ok[None, :]
        qu = tl.load(QU + rows, mask=row_ok, other=0.0)
        qv = tl.load(QV + rows, mask=row_ok, other=0.0)
        d_out = tl.load(D_OUT + rows, mask=row_ok, other=0.0)
        lse = tl.load(LSE + n * q_len + offs_i, mask=offs_i < q_len, other=0.0)
        delta = tl.load(DELTA + n * q_len + offs_i, mask=offs_i < q_len, other=0.0)
        d_qu = tl.zeros([BM, BD], ACC)
        d_qv = tl.zeros([BM, BD], ACC)
        # Band column t of tile row a is tile column t - (BM-1) + a (the inverse gather).
        back = tl.arange(0, BW)[None, :] - (BM - 1) + tl.arange(0, BM)[:, None]
        back_ok = (back >= 0) & (back < BN)
        back = tl.minimum(tl.maximum(back, 0), BN - 1)
        hi = tl.minimum(k_len - q_len + i0 + BM, k_len)
        for j0 in range(0, hi, BN):
            s, visible, key, band, offs_j, offs_c, c_ok = _scores(
                qu, qv, KEY, R, MASK, n, h, i0, j0, offs_i, offs_d, q_len, k_len, width,
                d_head, qk_scale, BM, BN, BW, HAS_MASK, ACC, DOT, PREC,
            )  # fmt: skip
            p = tl.where(visible, tl.exp2(s - lse[:, None]), 0.0)
            value = tl.load(
                VALUE + n * k_len * d_head + offs_j[:, None] * d_head + offs_d[None, :],
                mask=(offs_j[:, None] < k_len) & d_ok[None, :],
                other=0.0,
            )
            d_p = _dot(d_out, tl.trans(value), DOT, ACC, PREC)
            if DROPOUT:
                keep = _keep(seed, n, offs_i, offs_j, q_len, k_len, p_drop)
                d_p = tl.where(keep, d_p / (1.0 - p_drop), 0.0)
            d_s = p * (d_p - delta[:, None])
            d_qu += _dot(d_s.to(key.dtype), key, DOT, ACC, PREC)
            d_band = tl.where(back_ok, tl.gather(d_s, back, 1), 0.0).to(band.dtype)  # [BM, BW]
            d_qv += _dot(d_band, band, DOT, ACC, PREC)
            d_rows = _dot(tl.trans(d_band), qv, DOT, ACC, PREC)
            tl.atomic_add(
                D_R + h * width * d_head + offs_c[:, None] * d_head + offs_d[None, :],
                d_rows * scale,
                mask=c_ok[:, None] & d_ok[None, :],
            )
        tl.store(D_QU + rows, (d_qu * scale).to(D_QU.dtype.element_ty), mask=row_ok)
        tl.store(D_QV + rows, (d_qv * scale).to(D_QV.dtype.element_ty), mask=row_ok)

    @triton.jit(do_not_specialize=["seed"])
    def _keep_kernel(KEEP, seed, p_drop, q_len, k_len, BM: tl.constexpr, BN: tl.constexpr):
        n = tl.program_id(1).to(tl.int64)
        offs_i = tl.program_id(0) * BM + tl.arange(0, BM)
        for j0 in range(0, k_len, BN):
            offs_j = j0 + tl.arange(0, BN)
            keep = _keep(seed, n, offs_i, offs_j, q_len, k_len, p_drop)
            where = (n * q_len + offs_i[:, None]) * k_len + offs_j[None, :]
            ok = (offs_i[:, None] < q_len) & (offs_j[None, :] < k_len)
            tl.store(KEEP + where, keep.to(tl.int8), mask=ok)


def fp64_unavailable_reason(device: torch.device) -> str | None:
    """Why float64 operands cannot go through the kernel on ``device`` (None: they can)."""
    if triton is None or device.type != "cuda" or interpreting():
        return None
    version = tuple(int(part) for part in triton.__version__.split(".")[:2])
    if version >= FP64_ON_CUDA_FROM:
        return None
    wanted = ".".join(map(str, FP64_ON_CUDA_FROM))
    return (
        f"triton {triton.__version__} cannot compile the fused kernel in float64 on CUDA "
        f"(a float64 tl.dot needs triton >= {wanted}); use float32 or "
        "model.attention_kernel=core"
    )


def _check(device: torch.device, dtype: torch.dtype) -> None:
    reason = unavailable_reason(device)
    if reason is not None:
        raise ConfigError(reason)
    if dtype not in _DTYPES:
        raise ConfigError(f"the fused relative-attention kernel takes {_DTYPES}, not {dtype}")
    if dtype == torch.float64 and (reason := fp64_unavailable_reason(device)) is not None:
        raise ConfigError(reason)


def dropout_keep(
    seed: int, shape: tuple[int, int, int], p: float, device: torch.device | str = "cuda"
) -> Tensor:
    """The fused kernel's dropout keep mask for ``seed`` and ``shape = (H·B, L, K)``, boolean
    (True: kept), as its forward and backward regenerate it: feed ``keep / (1 - p)`` to the
    core's ``_RelativeAttention`` to compare."""
    device = torch.device(device)
    _check(device, torch.float32)
    n_mat, q_len, k_len = shape
    keep = torch.empty(shape, dtype=torch.int8, device=device)
    block = INTERPRETER_BLOCK if interpreting() else GPU_BLOCKS[torch.float32]
    grid = (triton.cdiv(q_len, block), n_mat)
    _keep_kernel[grid](keep, seed, float(p), q_len, k_len, BM=block, BN=block)
    return keep.bool()


def draw_seed() -> int:
    """A dropout seed from torch's global (CPU) generator: ``torch.manual_seed`` repeats it."""
    return int(torch.randint(0, 2**31 - 1, (1,)))


def _meta(q_u: Tensor, d_head: int) -> dict:
    """The kernels' compile-time settings for operands like ``q_u``."""
    block = INTERPRETER_BLOCK if interpreting() else GPU_BLOCKS[q_u.dtype]
    dtype = getattr(tl, str(q_u.dtype).removeprefix("torch."))
    exact = q_u.dtype in (torch.float32, torch.float64)
    # The interpreter's bf16 dot is wrong: float32 operands there (see _dot).
    dot = tl.float32 if interpreting() and q_u.dtype == torch.bfloat16 else dtype
    return {
        "BM": block,
        "BN": block,
        "BW": triton.next_power_of_2(2 * block - 1),  # the band: BM + BN - 1 rows
        "BD": max(16, triton.next_power_of_2(d_head)),
        "ACC": tl.float64 if q_u.dtype == torch.float64 else tl.float32,
        "DOT": dot,
        "PREC": "ieee" if exact else "tf32",  # fp32 products in fp32 (no TF32), as the core
    }


class _FusedRelativeAttention(torch.autograd.Function):
    @staticmethod
    def forward(  # noqa: PLR0913 - the formula's operands
        ctx: torch.autograd.function.FunctionCtx,
        q_u: Tensor,
        q_v: Tensor,
        key: Tensor,
        value: Tensor,
        r_rows: Tensor,
        mask: Tensor | None,
        scale: float,
        dropout: float,
        seed: int,
    ) -> Tensor:
        n_mat, q_len, d_head = q_u.shape
        n_heads, k_len, width = r_rows.shape[0], key.shape[1], r_rows.shape[1]
        q_u, key, value, r_rows = (t.contiguous() for t in (q_u, key, value, r_rows))
        q_v = q_v.reshape(n_mat, q_len, d_head).contiguous()
        mask_u8 = None if mask is None else mask.to(torch.uint8).contiguous()
        out = torch.empty_like(q_u)
        acc = torch.float64 if q_u.dtype == torch.float64 else torch.float32
        lse = torch.empty(n_mat, q_len, dtype=acc, device=q_u.device)
        meta = _meta(q_u, d_head)
        grid = (triton.cdiv(q_len, meta["BM"]), n_mat)
        _forward_kernel[grid](
            q_u, q_v, key, value, r_rows, q_u if mask_u8 is None else mask_u8, out, lse,
            seed, scale * _LOG2E, float(dropout), n_mat // n_heads, q_len, k_len, width,
            d_head, HAS_MASK=mask_u8 is not None, DROPOUT=dropout > 0.0, **meta,
        )  # fmt: skip
        ctx.save_for_backward(q_u, q_v, key, value, r_rows, mask_u8, out, lse)
        ctx.scale, ctx.dropout, ctx.seed, ctx.n_heads = scale, dropout, seed, n_heads
        ctx.q_v_shape = (n_heads, n_mat // n_heads * q_len, d_head)
        return out

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, d_out: Tensor) -> tuple:
        q_u, q_v, key, value, r_rows, mask_u8, out, lse = ctx.saved_tensors
        n_mat, q_len, d_head = q_u.shape
        k_len, width = key.shape[1], r_rows.shape[1]
        d_out = d_out.contiguous()
        delta = (d_out.to(lse.dtype) * out.to(lse.dtype)).sum(-1)  # [H·B, L]
        d_q_u, d_q_v = torch.empty_like(q_u), torch.empty_like(q_v)
        d_key, d_value = torch.empty_like(key), torch.empty_like(value)
        d_r = torch.zeros(r_rows.shape, dtype=lse.dtype, device=r_rows.device)
        meta = _meta(q_u, d_head)
        common = (
            ctx.seed, ctx.scale * _LOG2E, ctx.scale, float(ctx.dropout), n_mat // ctx.n_heads,
            q_len, k_len, width, d_head,
        )  # fmt: skip
        flags = {"HAS_MASK": mask_u8 is not None, "DROPOUT": ctx.dropout > 0.0, **meta}
        operands = (q_u, q_v, key, value, r_rows, q_u if mask_u8 is None else mask_u8, d_out)
        _backward_keys_kernel[(triton.cdiv(k_len, meta["BN"]), n_mat)](
            *operands, lse, delta, d_key, d_value, *common, **flags
        )
        _backward_queries_kernel[(triton.cdiv(q_len, meta["BM"]), n_mat)](
            *operands, lse, delta, d_q_u, d_q_v, d_r, *common, **flags
        )
        d_q_v = d_q_v.view(ctx.q_v_shape)
        return d_q_u, d_q_v, d_key, d_value, d_r.to(r_rows.dtype), None, None, None, None


@torch.compiler.disable  # under torch.compile: run as is, between compiled graphs
def relative_attention(
    q_u: Tensor,
    q_v: Tensor,
    key: Tensor,
    value: Tensor,
    r_rows: Tensor,
    mask: Tensor | None,
    scale: float,
    dropout: float = 0.0,
) -> Tensor:
    """Attention output ``[H·B, L, dh]``: :func:`.relative_core.relative_attention` by the
    fused kernel (same operands; future keys always hidden). A
    :class:`~highway_transformer.errors.ConfigError` where it cannot run."""
    _check(q_u.device, q_u.dtype)
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")
    seed = draw_seed() if dropout > 0.0 else 0
    with torch.autocast(q_u.device.type, enabled=False):
        return _FusedRelativeAttention.apply(
            q_u, q_v, key, value, r_rows, mask, scale, dropout, seed
        )


__all__ = [
    "available",
    "dropout_keep",
    "draw_seed",
    "interpreting",
    "relative_attention",
    "unavailable_reason",
]
