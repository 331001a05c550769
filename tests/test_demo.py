"""The demo (``demo.py``): its report from synthetic metrics, the variants and their configs."""

from __future__ import annotations

import json
from pathlib import Path

from highway_transformer import demo
from highway_transformer.validation import validate


def _write_metrics(folder: Path, valid: list[float]) -> None:
    folder.mkdir(parents=True)
    records = []
    for i, loss in enumerate(valid, start=1):
        records.append({"step": 10 * i, "split": "train", "loss": loss + 0.1})
        records.append({"step": 10 * i, "split": "valid", "loss": loss})
    text = "".join(json.dumps(r) + "\n" for r in records)
    (folder / "metrics.jsonl").write_text(text, encoding="utf-8")


def test_write_demo_report_on_synthetic_metrics(tmp_path: Path) -> None:
    curves = {
        "plain": [2.0, 1.5, 1.2, 1.1],
        "sdu-sigmoid": [1.8, 1.1, 1.0, 0.9],
        "sdu-tanh": [2.2, 1.9, 1.7, 1.6],
    }
    for variant, losses in curves.items():
        _write_metrics(tmp_path / variant, losses)
        results = {
            "parameters": 1000,
            "valid": {"bpc": losses[-1] / 0.693},
            "test": {"bpc": losses[-1] / 0.69},
        }
        (tmp_path / variant / "results.json").write_text(json.dumps(results), encoding="utf-8")
    samples = {v: f"The {v} sample" for v in curves}
    summary = demo.write_demo_report(tmp_path, list(curves), samples=samples)
    rows = {r["run"]: r for r in summary["rows"]}
    assert summary["target_valid_loss"] == 1.1
    assert rows["plain"]["steps_to_target"] == 40
    assert rows["sdu-sigmoid"]["steps_to_target"] == 20  # 1.1 <= 1.1 at step 20
    assert rows["sdu-tanh"]["steps_to_target"] is None
    report = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "| sdu-tanh | 1,000 |" in report and "not reached" in report
    assert report.rstrip().endswith("The sdu-tanh sample\n```")
    assert Path(summary["plot"]).is_file()


def test_the_variants_differ_in_their_gate_alone() -> None:
    configs = {variant: demo.demo_config(variant, steps=50) for variant in demo.VARIANTS}
    assert list(configs) == ["plain", "sdu-sigmoid", "sdu-tanh"]
    for variant, config in configs.items():
        validate(config)
        assert config.name == f"demo-{variant}" and config.model.gate == demo.VARIANTS[variant]
        assert config.train.max_steps == 50 and config.train.eval_interval == 5
        plain = configs["plain"].replace(**{"name": config.name})
        assert (
            config.replace(**{"model.gate.kind": "none", "model.gate.activation": "sigmoid"})
            == plain
        )
    assert demo.demo_config("plain", steps=5).train.eval_interval == 1  # at least every step
