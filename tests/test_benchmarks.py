"""The benchmarks compare like with like: their alternative implementations compute our result."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_relative_attention as bench  # noqa: E402

from highway_transformer.nn.relative import RelativeMultiHeadAttention  # noqa: E402


def test_relative_attention_variants_compute_the_module() -> None:
    torch.manual_seed(0)
    m = RelativeMultiHeadAttention(32, 4, 8)
    for bias in (m.r_w_bias, m.r_r_bias):
        torch.nn.init.normal_(bias, std=0.5)
    h, memory = torch.randn(2, 6, 32), torch.randn(2, 5, 32)
    ours = m(h, memory)
    for variant in (bench.sdpa_forward, bench.oracle_forward):
        torch.testing.assert_close(variant(m, h, memory), ours, atol=1e-5, rtol=0)
