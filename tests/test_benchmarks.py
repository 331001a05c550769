"""The benchmarks compare like with like: their alternative implementations compute our result."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
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


def test_attention_precision_bench_times_the_same_attention() -> None:
    import bench_attention_precision as precision_bench

    q, k, v = torch.randn(3, 2, 2, 5, 4).bfloat16().unbind(0)
    ours, torchs = (fn(q, k, v).float() for fn in precision_bench.variants().values())
    torch.testing.assert_close(ours, torchs, atol=2e-2, rtol=2e-2)  # bf16 kernel's rounding
    times = precision_bench.measure((2, 2, 5, 4), torch.bfloat16, rounds=1, repeats=1)
    assert all(times[name] > 0 for name in ("ours", "torch sdpa", "fp32"))
    assert times["ratio"] == times["range"][0] == times["range"][1]


def test_linear_cross_entropy_bench_times_the_same_loss() -> None:
    import bench_linear_cross_entropy as ce_bench

    x, w = torch.randn(6, 4), torch.randn(30, 4)
    b, t = torch.randn(30), torch.randint(0, 30, (6,))
    ours, torchs = (fn(x, w, b, t) for fn in ce_bench.variants().values())
    torch.testing.assert_close(ours, torchs, rtol=1e-5, atol=0)
    times = ce_bench.measure((6, 4, 30), rounds=1, repeats=1)
    assert times["ours"] > 0 and times["torch"] > 0
    assert times["ratio"] == times["range"][0] == times["range"][1]
    step = ce_bench.step_measure("ht-table3/t-l3", 1000, rounds=1, repeats=1)
    assert step["ours"] > 0 and step["torch"] > 0


def test_scored_positions_bench_times_the_same_loss() -> None:
    import bench_scored_positions as scored_bench

    torch.manual_seed(0)
    model, tokens, targets = scored_bench.setting("ht-table3/t-l3+sigmoid", vocab=50)
    model.eval()  # no dropout: both ways are the same numbers
    scored, whole = (loss() for loss in scored_bench.losses(model, tokens, targets).values())
    torch.testing.assert_close(scored, whole, rtol=1e-5, atol=0)
    times = scored_bench.measure("ht-table3/t-l3", rounds=1, repeats=1, vocab=50)
    assert times["scored"] > 0 and times["whole"] > 0 and times["scored_positions"] == 40


def test_dropout_mask_bench_times_the_same_mask() -> None:
    """The float draws it compares with are the words' mask bit for bit, from one seed."""
    import bench_dropout_mask as mask_bench

    for p in (0.1, 0.35):
        torch.manual_seed(3)
        ours = mask_bench.variants(1001, p)["ours"]()
        torch.manual_seed(3)
        assert torch.equal(ours, mask_bench.variants(1001, p)["float draws"]())
    times = mask_bench.interleaved_ms(
        mask_bench.variants(100, 0.2), rounds=1, repeats=1, ratio=("float draws", "ours")
    )
    assert all(times[name] > 0 for name in ("ours", "float draws", "torch.rand", "bernoulli_"))
    assert times["cpu_ratio"] == times["cpu_range"][0] == times["cpu_range"][1] >= 0
    cell = mask_bench.ratio_cell({"ratio": 1.5, "range": (1.2, 1.7), "cpu_ratio": 1.25})
    assert cell == "1.50× (1.20–1.70); CPU time 1.25×"


def test_profile_summary_counts_busy_time_once() -> None:
    """profile_train_step.py: overlapping kernels count once in busy time; classes and names
    add up per step."""
    import profile_train_step as profiler

    assert profiler.busy_microseconds([(0, 10), (5, 15), (20, 30), (22, 25)]) == 25
    assert profiler.kernel_class("sm90_xmma_gemm_bf16bf16_bf16f32") == "matrix products"
    assert profiler.kernel_class("pytorch_flash::flash_fwd_kernel") == "attention"
    assert profiler.kernel_class("multi_tensor_apply_kernel<FusedAdam>") == "optimiser"
    assert profiler.kernel_class("vectorized_elementwise_kernel<mul>") == profiler.OTHER
    kernels = [("gemm_a", 0, 4000), ("gemm_a", 5000, 7000), ("mul", 6000, 8000)]
    summary = profiler.summarise_kernels(kernels, steps=2)
    assert summary["busy_ms"] == 3.5 and summary["kernels"] == 1.5
    assert summary["classes"] == {"matrix products": (1.0, 3.0), profiler.OTHER: (0.5, 1.0)}
    assert summary["names"]["gemm_a"] == (1.0, 3.0)


def test_profile_runs_the_trainer_for_warmup_and_active_steps() -> None:
    import argparse

    import profile_train_step as profiler

    args = argparse.Namespace(
        device="cpu", precision="fp32", compile=False, fused_optimizer=False, batch=2,
        seq_len=16, warmup=2, active=2, shapes=False,
        set=["model.d_model=16", "model.n_heads=2", "model.d_inner=32", "data.context=4"],
    )  # fmt: skip
    prof, wall_ms = profiler.profile_preset("ht-table1/t-l3", args)
    steps = [e for e in prof.events() if e.name.startswith("ProfilerStep")]
    assert len(steps) == args.active and wall_ms > 0


def test_row_align_bench_times_both_layouts_of_the_same_core() -> None:
    """bench_row_align.py: aligned and K+1-wide position-score rows agree; both are timed."""
    import argparse

    import bench_row_align

    args = argparse.Namespace(
        device="cpu", precision="fp32", batch=2, q_len=6, mem_len=5, heads=2, d_head=4, reps=1
    )
    pad = bench_row_align.aligned_pad(args.q_len + args.mem_len)
    assert pad == 5  # 11 keys: rows of 16
    times = bench_row_align.compare(args, (1, pad))
    assert set(times) == {1, pad} and min(times.values()) > 0


@pytest.mark.parametrize(
    ("level", "settings"),
    [
        ("char", ["model.family=xl", "model.attention=relative", "model.memory.mem_len=16"]),
        ("word", []),
    ],
)
def test_eval_file_bench_checks_streaming_against_the_text_in_memory(
    tmp_path, level: str, settings: list[str]
) -> None:
    """bench_eval_file.py: the files it writes, and its two scores of a prefix (``eval
    --file`` and the whole text as one tensor) agree to the last bit."""
    import bench_eval_file as eval_bench

    text, part = tmp_path / "text.txt", tmp_path / "part.txt"
    eval_bench.write_text(text, 30_000, level)
    assert text.stat().st_size == 30_000
    eval_bench.prefix(text, part, 12_000)
    head = part.read_bytes()
    assert head.endswith(b"\n") and 11_000 < len(head) <= 12_000
    eval_bench.save_model(tmp_path / "run", text, level, [*settings, "data.seq_len=32"])
    streamed = eval_bench.run_phase("stream", tmp_path / "run", part)
    held = eval_bench.run_phase("in-memory", tmp_path / "run", part)
    assert streamed["tokens"] > 1000 and streamed["seconds"] > 0
    for key in ("loss", "tokens", "loss_se"):
        assert streamed[key] == held[key]


_NO_TRITON = importlib.util.find_spec("triton") is None


@pytest.mark.skipif(_NO_TRITON, reason="the fused kernel needs triton (pip install triton)")
def test_fused_relative_bench_runs_tiny_shapes_through_the_interpreter(tmp_path) -> None:
    """bench_fused_relative.py --device cpu --interpret --tiny: every figure is written, and
    the kernel agrees with the core (float32) at both shapes."""
    out = tmp_path / "fused.json"
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_fused_relative.py"
    argv = ["--device", "cpu", "--interpret", "--tiny", "--precision", "fp32", "--reps", "1"]
    done = subprocess.run(
        [sys.executable, str(script), *argv, "--warmup", "0", "--json", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(out.read_text())["results"]
    assert results["versions"]["interpreter"] is True and results["versions"]["triton"]
    train, evaluation = results["train"], results["eval"]
    assert train["fused fwd+bwd ms"] > 0 and evaluation["core fwd ms"] > 0
    assert len(train["max |fused - core|"]) == 6 and list(evaluation["max |fused - core|"]) == [
        "output"
    ]
    for figures in (train, evaluation):
        assert max(figures["max |fused - core|"].values()) < 1e-5


@pytest.mark.slow
@pytest.mark.skipif(_NO_TRITON, reason="the fused kernel needs triton (pip install triton)")
def test_fused_relative_kernels_compile_for_an_h100_without_one(tmp_path) -> None:
    """--compile-for 90: the bf16 kernels compile for sm_90 here (Triton's own ptxas) and fit
    an H100's shared memory (227 KiB a block)."""
    out = tmp_path / "compiled.json"
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_fused_relative.py"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, str(script), "--compile-for", "90", "--json", str(out)],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    shared = json.loads(out.read_text())["results"]["shared_bytes"]
    assert len(shared) == 3 and all(0 < s <= 227 * 1024 for s in shared.values())


def test_modern_baseline_bench_times_the_same_llama(capsys) -> None:
    """modern_baseline.py: the plain Llama holding our weights has our loss (a weight it
    does not hold is caught before any timing), and a tiny run prints both tables."""
    import argparse

    import modern_baseline

    args = argparse.Namespace(d_model=16, layers=2, heads=2, d_inner=24, seq_len=8)
    torch.manual_seed(0)
    ours = modern_baseline.LanguageModel(modern_baseline.our_config(args)).eval()
    with torch.no_grad():  # norm weights away from 1, so a swapped norm would show
        for name, p in ours.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    plain = modern_baseline.PlainLlama(modern_baseline.our_config(args)).eval()
    x, y = torch.randint(0, modern_baseline.VOCAB, (2, 2, 8))
    with pytest.raises(SystemExit, match="not the same model"):
        modern_baseline.same_loss(ours, plain, x, y)
    modern_baseline.copy_ours_into(ours, plain)
    mine, theirs = modern_baseline.same_loss(ours, plain, x, y)
    assert abs(mine - theirs) <= 1e-5
    modern_baseline.main(
        ["--d-model", "16", "--layers", "1", "--heads", "2", "--d-inner", "24", "--batch", "2",
         "--seq-len", "8", "--rounds", "1", "--steps", "1"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert "same weights, same loss" in out
    for row in ("| ours modern/transformer |", "| nanoGPT-style Llama |", "| elementwise |"):
        assert row in out


def test_gate_bench_times_a_tables_rows_against_their_flop_bound() -> None:
    """bench_gates.py --table: each row as it trains (its own batch, AdamW), and its extra CPU
    time over the first row set against the extra FLOPs at the first row's FLOP rate."""
    import argparse

    import bench_gates

    args = argparse.Namespace(preset="ht-table1/t-l3", table="gates-eras", scale="tiny",
                              batch=2, seq_len=8, steps=1)  # fmt: skip
    plain = bench_gates.child("gates-eras/plain", "fp32", args)
    gated = bench_gates.child("gates-eras/sdu-tanh", "fp32", args)
    assert gated["parameters"] > plain["parameters"]
    assert gated["flops_per_step"] > plain["flops_per_step"]  # the SDU's matmuls counted
    plain_run = {**plain, "cpu_seconds_per_step": 1.0, "flops_per_step": 1e9}
    gated_run = {**gated, "cpu_seconds_per_step": 1.5, "flops_per_step": 1.2e9}
    rows = bench_gates._gate_rows({"plain": [plain_run], "sdu": [gated_run]}, 1e12, table=True)
    assert rows[0][-2:] == ["+0.0", "0.0"]
    assert rows[1][-2:] == ["+500.0", "200.0"]  # 0.2e9 extra FLOPs at 1e9 FLOP/s: 200 ms


FAKE_ANCHOR = """
import gymnasium as gym
from highway_transformer.tasks.rl.proof_of_memory import ProofOfMemoryEnv

env = gym.wrappers.RecordEpisodeStatistics(ProofOfMemoryEnv())
env.reset(seed=0)
for iteration in range(2):
    for _ in range(16):
        *_, terminated, truncated, _ = env.step(iteration)
        if terminated or truncated:
            env.reset()
    print(f"{iteration + 1:9} SPS= 123 return=0.0")
"""


def test_rl_anchor_bench_runs_ours_alone_and_counts_the_anchor_episodes(tmp_path) -> None:
    """rl_anchor.py: without --anchor only ours runs (one rollout) and the record says so; the
    anchor's episodes are counted through its RecordEpisodeStatistics (a stand-in script)."""
    import rl_anchor

    out = tmp_path / "ours.json"
    found = rl_anchor.main(["--seeds", "1", "--total-steps", "2048", "--json", str(out)])
    (ours,) = found["runs"]["ours"]
    assert ours["env_steps"] == 2048 and ours["cpu_s"] > 0 and 0 <= ours["success"] <= 1
    assert found["runs"]["anchor"] == [] and "ratio" not in found["summary"]
    record = json.loads(out.read_text())
    assert "the anchor is absent (no --anchor): ours only" in record["notes"]
    assert record["results"]["anchor"] is None
    (tmp_path / "anchor").mkdir()
    (tmp_path / "anchor" / "ppo_trxl.py").write_text(FAKE_ANCHOR)
    anchor = rl_anchor.run_anchor(tmp_path / "anchor", sys.executable, [], 1, 2048, tmp_path)
    assert anchor["env_steps"] == 2 * rl_anchor.ROLLOUT and anchor["reported_sps"] == 123
    # always left, then always right: the goal layout decides, so some of each
    assert anchor["episodes"] >= 2 and 0 < anchor["success"] < 1
