"""``highway analyze``: the attention sink, gate scores, massive activations and gate biases
read by hooks, against direct computations; the hooks leave the forward unchanged."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from highway_transformer.api import analyze_checkpoint
from highway_transformer.config import Config, GateConfig, ModelConfig
from highway_transformer.errors import ConfigError
from highway_transformer.models.analysis import SPARSE_BELOW, probing
from highway_transformer.models.lm import LanguageModel
from highway_transformer.nn.attention import MultiHeadAttention
from highway_transformer.nn.connections import COMBINERS
from highway_transformer.nn.output_gate import AttentionOutputGate
from highway_transformer.report.analysis import analysis_markdown, headline, read_analysis
from highway_transformer.training.trainer import train

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _modern(tiny_model_config: Callable[..., ModelConfig], **overrides) -> LanguageModel:
    torch.manual_seed(0)
    config = tiny_model_config(
        vocab_size=11, norm="pre", final_norm="true", layer_norm="rmsnorm", positional="rope",
        ffn="swiglu", bias=False, attn_output_gate="headwise",
        gate=GateConfig(kind="sdu", activation="sigmoid"), **overrides,
    )  # fmt: skip
    return LanguageModel(config).eval()


def test_attention_weights_are_the_forward_softmax() -> None:
    """``attention_weights`` times ``v`` is what the forward's fused attention computes."""
    torch.manual_seed(1)
    attention = MultiHeadAttention(16, 4, rope_theta=10_000.0).eval()
    h = torch.randn(2, 9, 16)
    q, k, v = attention._project(h, 0)
    weights = attention.attention_weights(h)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(weights @ v, expected, rtol=1e-5, atol=1e-5)
    assert torch.all(weights.triu(1) == 0)  # causal


def test_sink_share_is_the_first_key_attention_of_queries_past_it(tiny_model_config) -> None:
    model = _modern(tiny_model_config)
    tokens = torch.randint(0, 11, (3, 12))
    captured: list[torch.Tensor] = []
    first = model.blocks[0]
    attention = next(m for m in first.modules() if isinstance(m, MultiHeadAttention))
    handle = attention.register_forward_hook(
        lambda m, inputs, _out: captured.append(m.attention_weights(inputs[0]))
    )
    with probing(model) as probe:
        model(tokens)
    handle.remove()
    summary = probe.summary()["attention_sink"]["layer1"]
    expected = captured[0][:, :, 1:, 0].mean(dim=(0, 2))
    torch.testing.assert_close(
        torch.tensor(summary["heads"], dtype=torch.float64),
        expected.double(),
        rtol=1e-6,
        atol=1e-9,
    )
    # uniform attention: a query at position t sees t + 1 keys
    uniform = sum(1 / (t + 1) for t in range(1, 12)) / 11
    assert summary["uniform"] == pytest.approx(uniform)


def test_headwise_gate_sparsity_is_the_share_of_scores_below_a_tenth(tiny_model_config) -> None:
    model = _modern(tiny_model_config)
    tokens = torch.randint(0, 11, (2, 10))
    scores: list[torch.Tensor] = []
    gate = next(m for m in model.blocks[1].modules() if isinstance(m, AttentionOutputGate))
    with torch.no_grad():  # a bias that pushes some heads shut, so the fraction is not 0
        gate.proj.weight.mul_(8.0)
    handle = gate.register_forward_hook(
        lambda m, inputs, _out: scores.append(m.gate_scores(inputs[0]))
    )
    with probing(model) as probe:
        model(tokens)
    handle.remove()
    summary = probe.summary()["gates"]["layer2.attn-output"]
    assert scores[0].shape == (2, 10, 2)  # one score a head
    assert summary["fraction_below_0.1"] == pytest.approx(
        float((scores[0] < SPARSE_BELOW).float().mean())
    )
    assert 0.0 < summary["fraction_below_0.1"] < 1.0
    assert summary["mean"] == pytest.approx(float(scores[0].detach().double().mean()))
    assert sum(summary["histogram"]["counts"]) == scores[0].numel()


@pytest.mark.parametrize("kind", [k for k in COMBINERS if k != "none"])
def test_each_gate_scores_what_its_forward_applies(kind: str) -> None:
    """The score each combiner reports is the gate its forward multiplies by."""
    torch.manual_seed(2)
    gate = COMBINERS[kind].build(8, "sigmoid", None)
    x, y = torch.randn(3, 8), torch.randn(3, 8)
    g = gate.gate_scores(x, y)
    out = gate(x, y)
    relu_y = F.relu(y)
    if kind == "sdu":
        _, transform = gate.gate_and_transform(x)
        expected = x + y + g * transform
    elif kind == "highway":
        _, transform = gate.gate_and_transform(x)
        expected = (1 - g) * x + y + g * transform
    elif kind == "gated":
        _, transform = gate.gate_and_transform(x)
        expected = x + (1 - g) * y + g * transform
    elif kind == "gtrxl-input":
        expected = g * x + relu_y
    elif kind == "gtrxl-output":
        expected = x + g * relu_y
    elif kind == "gtrxl-highway":
        expected = g * x + (1 - g) * relu_y
    elif kind == "gtrxl-sigmoid-tanh":
        expected = x + g * torch.tanh(gate.wu_y(relu_y).chunk(2, dim=-1)[1])
    else:  # gtrxl-gru: (1 - z) x + z ĥ with ĥ = tanh(W_g y' + U_g (r ⊙ x))
        wr_y, _, wg_y = gate.w_y(relu_y).chunk(3, dim=-1)
        r = torch.sigmoid(wr_y + gate.u_x(x).chunk(2, dim=-1)[0])
        expected = (1 - g) * x + g * torch.tanh(wg_y + gate.u_g(r * x))
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)


def test_probing_leaves_the_forward_bit_identical(tiny_model_config) -> None:
    model = _modern(tiny_model_config)
    tokens = torch.randint(0, 11, (2, 10))
    before = model(tokens)[0]
    with probing(model) as probe:
        during = model(tokens)[0]
    after = model(tokens)[0]
    assert torch.equal(before, during) and torch.equal(before, after)
    assert not any(m._forward_hooks for m in model.modules())  # every hook removed
    summary = probe.summary()
    assert set(summary["activations"]) == {"layer1", "layer2"}
    assert (
        summary["activations"]["layer1"]["max_abs"]
        >= summary["activations"]["layer1"]["median_abs"]
    )
    assert set(summary["gates"]) == {"layer1.attn", "layer1.ffn", "layer1.attn-output",
                                     "layer2.attn", "layer2.ffn", "layer2.attn-output"}  # fmt: skip
    # SDU's b1 is learned (model.bias=false drops the projections' biases, not the gate's)
    assert set(summary["gate_biases"]) == {"layer1.attn", "layer1.ffn", "layer2.attn", "layer2.ffn"}


def _trained(root: Path, text_file: Path, tiny_lm_config, **overrides) -> Path:
    config: Config = tiny_lm_config(text_file, **{"train.max_steps": 4, **overrides})
    train(config, root, progress=False)
    return root


def test_analyze_checkpoint_and_the_report_section(tmp_path, text_file, tiny_lm_config) -> None:
    run = _trained(
        tmp_path / "run", text_file, tiny_lm_config, **{"model.attn_output_gate": "elementwise"}
    )
    analysis = analyze_checkpoint(run, "valid", max_tokens=200)
    assert analysis["weights"].endswith("checkpoint")
    assert set(analysis["gates"]) == {"layer1.attn", "layer1.ffn", "layer1.attn-output"}
    assert analysis["metrics"]["loss"] > 0
    (run / "analysis.json").write_text(json.dumps(analysis), encoding="utf-8")
    head = headline(read_analysis(run))
    assert head["sink"] == pytest.approx(sum(analysis["attention_sink"]["layer1"]["heads"]) / 2)

    lines = analysis_markdown({"tiny": {"seeds": {1: head}, "mean": head, "without": []}})
    assert any(line.startswith("| tiny | 1 | L1 ") for line in lines)


def test_the_cli_writes_analysis_and_figures(tmp_path, text_file, tiny_lm_config) -> None:
    run = _trained(tmp_path / "run", text_file, tiny_lm_config)
    done = subprocess.run(
        [sys.executable, "-m", "highway_transformer.cli", "analyze", str(run), "--max-tokens",
         "200"],
        capture_output=True, text=True, env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "first-token attention L1" in done.stdout and "below 0.1" in done.stdout
    assert read_analysis(run)["weights"] == "checkpoint"  # relative: the folder can move
    assert {p.name for p in run.glob("analysis_*.svg")} == {
        "analysis_sink.svg",
        "analysis_gates.svg",
        "analysis_activations.svg",
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["analyze", "no-such-run"], "no checkpoint at no-such-run"),
        (["analyze", ".", "--max-tokens", "0"], "--max-tokens must be at least 1"),
    ],
)
def test_bad_analyze_arguments_are_one_line(args: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "highway_transformer.cli", *args],
        capture_output=True, text=True, env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def test_a_model_with_nothing_to_analyse_is_refused(tmp_path, text_file, tiny_lm_config) -> None:
    run = _trained(tmp_path / "run", text_file, tiny_lm_config,
                   **{"model.gate.kind": "none", "model.family": "transformer",
                      "model.attention": "shaw"})  # fmt: skip
    with pytest.raises(ConfigError, match="no dot-product attention and no gate"):
        analyze_checkpoint(run, "valid", max_tokens=100)


def test_a_damaged_analysis_file_is_refused(tmp_path) -> None:
    (tmp_path / "analysis.json").write_text("{", encoding="utf-8")
    with pytest.raises(ConfigError, match="run `highway analyze` again"):
        read_analysis(tmp_path)


def test_a_report_draws_each_analysed_rows_figures(tmp_path, text_file, tiny_lm_config) -> None:
    from types import SimpleNamespace

    from highway_transformer.report.analysis import analysis_rows

    run = _trained(tmp_path / "run", text_file, tiny_lm_config)
    analysis = analyze_checkpoint(run, "valid", max_tokens=200)
    (run / "analysis.json").write_text(json.dumps(analysis), encoding="utf-8")
    other = tmp_path / "other"  # a seed never analysed
    other.mkdir()
    groups = {
        "t/sdu": [SimpleNamespace(run_dir=run, seed=1), SimpleNamespace(run_dir=other, seed=2)]
    }
    out = tmp_path / "report"
    out.mkdir()
    rows = analysis_rows(groups, out)
    assert rows["t/sdu"]["without"] == [2]
    assert sorted(rows["t/sdu"]["figures"]) == [
        "analysis_sdu_activations.svg",
        "analysis_sdu_gates.svg",
        "analysis_sdu_sink.svg",
    ]
    assert all((out / f).is_file() for f in rows["t/sdu"]["figures"])
    text = "\n".join(analysis_markdown(rows))
    assert "![t/sdu: sink](analysis_sdu_sink.svg)" in text and "t/sdu seed 2" in text
