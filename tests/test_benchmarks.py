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


def test_train_step_bench_times_the_trainer(capsys) -> None:
    """bench_train_step.py: the windows after warm-up are timed, the model really trains, and
    the table prints every preset against the first."""
    import argparse

    import bench_train_step as step_bench

    args = argparse.Namespace(
        device="cpu", precision="fp32", compile=False, fused_optimizer=False, batch=2,
        seq_len=32, window=2, windows=2, rounds=1,
        set=["model.d_model=32", "model.n_heads=2", "model.d_inner=64", "data.context=8"],
    )  # fmt: skip
    run = step_bench.train_child("ht-table1/t-l3", args)
    assert len(run["rates"]) == args.windows and min(run["rates"]) > 0
    assert run["flops_per_token"] > 0 and run["parameters"] > 0
    assert run["batch"] == "2 x 32"
    runs = {("a", "fp32"): [run], ("a", "bf16"): [run]}
    step_bench.print_table(runs, peaks={"fp32": 1e9, "bf16": 2e9}, args=args)
    table = capsys.readouterr().out
    assert "| a | fp32 |" in table and "| a | bf16 |" in table and "| 1.000 |" in table
    args.threads, args.precision = 1, ["fp32", "bf16"]
    argv = step_bench.child_argv(args, "a", "bf16")
    assert argv[:5] == ["a", "--device", "cpu", "--precision", "bf16"]
    assert argv[-5:] == ["--set", *args.set]


def test_attention_dropout_bench_times_the_same_attention() -> None:
    import bench_attention_dropout as dropout_bench

    q, k, v = torch.randn(3, 2, 2, 5, 4).unbind(0)
    undropped = [fn(q, k, v) for fn in dropout_bench.variants(0.0).values()]
    for out in undropped[1:]:
        torch.testing.assert_close(out, undropped[0], atol=1e-6, rtol=0)
    times = dropout_bench.measure((2, 2, 5, 4, 0.1), rounds=1, repeats=1)
    assert all(times[name] > 0 for name in ("ours", "torch sdpa", "no dropout"))
    assert times["ratio"] == times["range"][0] == times["range"][1]
