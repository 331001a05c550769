"""The ``highway`` command line, end to end on a tiny corpus, and its one-line errors."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from highway_transformer import cli
from highway_transformer.config import Config
from highway_transformer.experiments import named
from highway_transformer.experiments.named import DEMO
from highway_transformer.storage.runfolder import read_metrics

PATTERN = "the cat sat on the mat. the dog sat on the log. " * 25

TINY_YAML = """\
name: tiny-cli
model:
  d_model: 16
  n_layers: 1
  n_heads: 2
  d_inner: 32
  dropout: 0.1
  gate:
    kind: sdu
    activation: tanh
data:
  corpus: file
  level: char
  batch_size: 4
  seq_len: 16
  context: 4
  eval_batch_size: 4
train:
  optimizer: adam
  lr: 0.01
  schedule: cosine
  max_steps: 100
  eval_interval: 3
  log_interval: 1
"""

TINY_TOML = """\
name = "tiny-toml"

[model]
d_model = 16
n_layers = 2
n_heads = 2
d_inner = 32
norm = "pre"

[model.gate]
kind = "highway"
layers = "1"

[data]
corpus = "file"
level = "word"
batch_size = 2
seq_len = 8
eval_batch_size = 2

[train]
optimizer = "adam"
lr = 0.01
max_steps = 2
eval_interval = 2
log_interval = 1
"""


@pytest.fixture
def text_file(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text(PATTERN, encoding="utf-8")
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_train_then_eval_json(
    tmp_path: Path, text_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_file = tmp_path / "tiny.yaml"
    config_file.write_text(TINY_YAML, encoding="utf-8")
    out = tmp_path / "run"
    code, stdout, _ = _run(
        capsys,
        "train",
        "--config",
        str(config_file),
        f"data.path={text_file}",
        "train.max_steps=3",
        "model.gate.layers=all",
        "--out",
        str(out),
        "--no-progress",
    )
    assert code == 0
    assert "valid: loss" in stdout and "test: loss" in stdout and str(out) in stdout
    saved = yaml.safe_load((out / "config.yaml").read_text(encoding="utf-8"))
    assert saved["train"]["max_steps"] == 3  # the override beat the file
    assert saved["model"]["gate"] == {
        "kind": "sdu",
        "activation": "tanh",
        "layers": "all",
        "sublayers": ["attn", "ffn"],
        "bias": None,
    }
    assert saved["name"] == "tiny-cli"
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["steps"] == 3 and results["best_step"] == 3
    assert [r["step"] for r in read_metrics(out) if r["split"] == "train"] == [1, 2, 3]

    code, stdout, _ = _run(capsys, "eval", str(out), "--split", "test", "--json")
    assert code == 0
    report = json.loads(stdout)
    assert set(report) == {"test"}
    assert set(report["test"]) == {"loss", "bpc", "ppl", "tokens", "loss_se"}
    # one evaluation, at the last step: the last checkpoint is the best one
    assert report["test"]["loss"] == pytest.approx(results["test"]["loss"], rel=1e-6)
    assert report["test"]["tokens"] == results["test"]["tokens"]

    code, stdout, _ = _run(capsys, "eval", str(out / "best"), "--split", "both")
    assert code == 0
    lines = stdout.strip().splitlines()
    assert lines[0].startswith("valid: loss") and lines[1].startswith("test: loss")

    # the same command again refuses to overwrite; --resume continues to a later step
    code, _, err = _run(
        capsys, "train", "--config", str(config_file), f"data.path={text_file}",
        "train.max_steps=3", "--out", str(out), "--no-progress",
    )  # fmt: skip
    assert code == 2 and "--resume" in err
    code, _, _ = _run(
        capsys, "train", "--config", str(config_file), f"data.path={text_file}",
        "train.max_steps=4", "--out", str(out), "--no-progress", "--resume",
    )  # fmt: skip
    assert code == 0
    assert json.loads((out / "results.json").read_text())["steps"] == 4


def test_toml_config(tmp_path: Path, text_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config_file = tmp_path / "tiny.toml"
    config_file.write_text(TINY_TOML, encoding="utf-8")
    out = tmp_path / "toml-run"
    code, stdout, _ = _run(
        capsys, "train", "--config", str(config_file), f"data.path={text_file}",
        "--out", str(out), "--no-progress",
    )  # fmt: skip
    assert code == 0 and "valid: loss" in stdout
    saved = yaml.safe_load((out / "config.yaml").read_text(encoding="utf-8"))
    assert saved["name"] == "tiny-toml"
    assert saved["model"]["norm"] == "pre" and saved["model"]["n_layers"] == 2
    assert saved["model"]["gate"]["kind"] == "highway" and saved["model"]["gate"]["layers"] == "1"
    assert saved["data"]["level"] == "word"
    assert json.loads((out / "results.json").read_text())["steps"] == 2


def test_presets_list_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, _ = _run(capsys, "presets")
    assert code == 0
    names = [line.split()[0] for line in stdout.strip().splitlines()]
    assert "ht-table1/t-l3" in names and "ht-table1/t-l3+sigmoid" in names
    code, stdout, _ = _run(capsys, "presets", "ht-table1/t-l3")
    assert code == 0
    assert stdout.startswith("# ")
    shown = yaml.safe_load(stdout)
    assert shown["name"] == "ht-table1_t-l3"
    assert shown["model"]["n_layers"] == 3 and shown["model"]["gate"]["kind"] == "none"
    assert shown["model"]["d_model"] == 512 and shown["data"]["corpus"] == "ptb-char"


def _assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    for needle in needles:
        assert needle in lines[0]


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["train", "--preset", "ht-table9/nope"], ["unknown preset", "ht-table1/t-l3"]),
        (["presets", "nope"], ["unknown preset"]),
        (["train", "model.gate.kind=sdv"], ["unknown gate", "Did you mean 'sdu'"]),
        (["train", "model.gate.layers=1-9"], ["outside 1..3"]),
        (["train", "model.gate.layers=abc"], ["cannot read gate layer spec"]),
        (["train", "train.lr"], ["key=value"]),
        (["train", "model.d_modl=16"], ["d_modl", "d_model"]),
        (["train", "modle.d_model=16"], ["modle"]),
        (["train", "train.max_steps=many"], ["train.max_steps must be an integer"]),
        (["train", "--preset", "ht-table1/t-l3", "--scale", "tyni"], ["unknown scale", "'tiny'"]),
        (["train", "--scale", "none"], ["unknown scale", "cpu-adamw"]),
    ],
)
def test_config_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], needles: list[str]
) -> None:
    code, _, err = _run(capsys, *argv)
    _assert_one_line_error(code, err, *needles)


def test_config_file_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad_key = tmp_path / "bad.yaml"
    bad_key.write_text("model:\n  d_modle: 8\n", encoding="utf-8")
    code, _, err = _run(capsys, "train", "--config", str(bad_key))
    _assert_one_line_error(code, err, "d_modle")
    code, _, err = _run(capsys, "train", "--config", str(tmp_path / "absent.yaml"))
    _assert_one_line_error(code, err, "does not exist")
    broken = tmp_path / "broken.toml"
    broken.write_text("[model\n", encoding="utf-8")
    code, _, err = _run(capsys, "train", "--config", str(broken))
    _assert_one_line_error(code, err, "cannot parse")


def test_missing_data_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(
        capsys, "train", "data.corpus=file", f"data.path={tmp_path / 'absent.txt'}",
        "model.d_model=16", "model.n_heads=2", "--out", str(tmp_path / "run"), "--no-progress",
    )  # fmt: skip
    _assert_one_line_error(code, err, "absent.txt", "does not exist")
    assert not (tmp_path / "run" / "checkpoint").exists()


def test_eval_without_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, stdout, err = _run(capsys, "eval", str(empty), "--json")
    _assert_one_line_error(code, err, "no checkpoint")
    assert stdout == ""


# ------------------------------------------------------------------ demo


@pytest.fixture
def tiny_demo_config(
    text_file: Path, tiny_file_config: Callable[..., Config]
) -> Callable[..., Config]:
    """The demo's ``row_config(DEMO, variant, steps=400)`` on the tiny model of
    :func:`text_file`."""

    def build(ab: named.NamedAB, variant: str, steps: int = 400) -> Config:
        gate = dataclasses.asdict(Config().replace(**ab.rows[variant]).model.gate)
        return tiny_file_config(
            text_file,
            name=f"demo-{variant}",
            **{f"model.gate.{key}": value for key, value in gate.items()},
            **{"train.max_steps": steps, "train.eval_interval": 2, "train.log_interval": 2},
        )

    return build


def test_demo_command_with_a_tiny_model(
    tmp_path: Path,
    text_file: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tiny_demo_config: Callable[..., Config],
) -> None:
    assert named.row_config(DEMO, "sdu-tanh", 600).model.gate.activation == "tanh"  # the real one
    monkeypatch.setattr(named, "row_config", tiny_demo_config)
    out = tmp_path / "demo"
    argv = ["demo", "--out", str(out), "--steps", "4", "--seeds", "2", "--jobs", "1"]
    code, stdout, err = _run(capsys, *argv, "--no-progress")
    assert code == 0
    runs = out / "ab" / "none"
    for variant in DEMO.rows:
        assert {p.name for p in (runs / variant).iterdir()} == {"seed1", "seed2"}
        assert (runs / variant / "seed2" / "results.json").is_file()
    assert (out / "report" / "convergence_steps.svg").stat().st_size > 0
    summary = json.loads((out / "demo.json").read_text(encoding="utf-8"))
    rows = summary["primary"]["rows"]
    assert [(r["row"], r["against"]) for r in rows] == [
        ("ab/sdu-sigmoid", "ab/plain"), ("ab/sdu-tanh", "ab/plain")
    ]  # fmt: skip
    assert all(r["paired"]["n"] == 2 and len(r["paired"]["interval"]) == 2 for r in rows)
    assert summary["primary"]["status"] == "pre-registered"
    assert stdout.count("(2 seeds): ") == 2  # a verdict line a gate
    assert "lines to beat (valid bpc of trivial models): unigram" in stdout
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "| seed | plain | sdu-sigmoid | sdu-tanh |" in report and "## Samples" in report
    assert all(f"**{variant}**" in report for variant in DEMO.rows)
    assert "one seed" not in report
    # a second run reuses the trained runs
    code, _, err = _run(capsys, *argv, "--no-progress")
    assert code == 0 and err.count("finished, skipped") == 6
    # ... and one seed of them says it gives no interval
    code, stdout, err = _run(capsys, *argv[:-4], "--seeds", "1", "--no-progress")
    assert code == 0 and "one seed: no interval and no verdict" in stdout
    assert "(1 seed): no verdict (fewer than two paired seeds)" in stdout
    # ... but never runs trained with another budget
    code, _, err = _run(capsys, *argv[:3], "--steps", "6", "--no-progress")
    assert code == 2 and "train.max_steps=4 (asked 6)" in err and "another --out" in err


def test_train_and_eval_a_task_from_the_cli(tmp_path, capsys) -> None:
    from highway_transformer import cli

    out = tmp_path / "digits"
    args = ["train", "--preset", "digits/transformer", "train.max_steps=3", "--out", str(out)]
    assert cli.main([*args, "--no-progress"]) == 0
    capsys.readouterr()
    assert cli.main(["eval", str(out), "--split", "both", "--device", "cpu", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"valid", "test"} and 0.0 <= report["test"]["accuracy"] <= 1.0
    assert cli.main(["train", "--task", "pixels", "task.pooling=max"]) == 2


def test_task_checkpoint_from_another_config_is_a_clear_error(tmp_path, capsys) -> None:
    from highway_transformer import cli

    out = tmp_path / "s2s"
    args = ["train", "--preset", "seq2seq/toy", "train.max_steps=2", "--out", str(out)]
    assert cli.main([*args, "--no-progress"]) == 0
    config_file = out / "best" / "config.json"
    config = json.loads(config_file.read_text())
    config["model"]["d_model"] *= 2  # the weights no longer fit the described model
    config_file.write_text(json.dumps(config))
    (out / "best" / "manifest.json").unlink()  # hand-edited: no longer verifiable
    capsys.readouterr()
    assert cli.main(["eval", str(out / "best"), "--device", "cpu", "--trust-unverified"]) == 2
    weights, note, err = capsys.readouterr().err.splitlines()  # which weights, then the error
    assert weights == f"weights: {out / 'best'}" and "read unchecked" in note
    assert err.startswith("error:") and "do not fit" in err and "Traceback" not in err


def test_task_choices_are_the_task_registry() -> None:
    from highway_transformer.tasks import TASKS

    assert set(cli.TASK_NAMES) == set(TASKS)


def test_task_flag_starts_from_the_task_preset(tmp_path, capsys) -> None:
    out = tmp_path / "adding"
    small = ["train.max_steps=2", "train.eval_interval=2", "model.n_layers=1", "--no-progress"]
    assert cli.main(["train", "--task", "adding", "--out", str(out), *small]) == 0
    saved = yaml.safe_load((out / "config.yaml").read_text())
    preset = json.loads(_preset_json("adding/transformer"))
    assert saved["model"]["d_model"] == preset["model"]["d_model"] != 512
    assert saved["train"]["optimizer"] == preset["train"]["optimizer"]
    assert saved["task"]["name"] == "adding"
    capsys.readouterr()
    # resumable like any run; a finished run resumes to its end without training more
    assert cli.main(["train", "--task", "adding", "--out", str(out), "--resume", *small]) == 0
    assert "mse" in capsys.readouterr().out
    assert cli.main(["train", "--task", "adding", "--out", str(out), *small]) == 2
    assert "--resume" in capsys.readouterr().err


def test_generate_refuses_a_task_checkpoint(tmp_path, capsys) -> None:
    out = tmp_path / "copy"
    args = ["train", "--task", "copy", "--out", str(out), "--no-progress", "train.max_steps=1"]
    assert cli.main([*args, "model.n_layers=1", "task.length=5"]) == 0
    capsys.readouterr()
    assert cli.main(["generate", str(out), "--prompt", "ab", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error:") and "copy checkpoint" in last and "Traceback" not in err


def _preset_json(name: str) -> str:
    from highway_transformer.presets import get_preset

    return get_preset(name).to_json()


def test_train_scale_is_the_scale_of_highway_run(tmp_path: Path, capsys) -> None:
    """``highway train --preset ROW --scale tiny`` trains the configuration ``highway run ROW
    --scale tiny`` plans (the same rules, then the overrides, which win), under its own name."""
    from highway_transformer.experiments.plan import plan_runs

    overrides = ["data.corpus=pydoc", "train.max_steps=3"]  # embedded corpus; fewer steps
    out = tmp_path / "t-l3-tiny"
    argv = ["train", "--preset", "ht-table1/t-l3", "--scale", "tiny", *overrides]
    code, _, err = _run(capsys, *argv, "--out", str(out), "--no-progress")
    assert code == 0, err
    assert "scale tiny: width x0.0625, heads x0.25, lengths x0.125" in err
    saved = yaml.safe_load((out / "config.yaml").read_text(encoding="utf-8"))
    (spec,) = plan_runs(["ht-table1/t-l3"], tmp_path / "runs", "tiny", overrides=overrides)
    planned = json.loads(spec.config.to_json())
    assert (saved.pop("name"), planned.pop("name")) == ("ht-table1_t-l3_tiny", spec.config.name)
    planned["model"]["vocab_size"] = saved["model"]["vocab_size"]  # the trainer's, from the data
    assert saved == planned
    assert saved["model"]["d_model"] == 32 and saved["data"]["batch_size"] == 4  # the scale's
    assert saved["train"]["max_steps"] == 3  # the override's, not the scale's 20
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["steps"] == 3 and results["test"]["tokens"] <= 2000


def test_train_scale_shrinks_the_config_file_before_the_overrides(
    tmp_path: Path, text_file: Path, capsys
) -> None:
    config_file = tmp_path / "tiny.yaml"
    config_file.write_text(TINY_YAML, encoding="utf-8")
    out = tmp_path / "run"
    argv = ["train", "--config", str(config_file), "--scale", "small", "train.max_steps=2"]
    code, _, err = _run(capsys, *argv, "--data-path", str(text_file), "--out", str(out))
    assert code == 0, err
    saved = yaml.safe_load((out / "config.yaml").read_text(encoding="utf-8"))
    assert saved["name"] == "tiny-cli_small"
    assert (saved["model"]["d_model"], saved["data"]["seq_len"]) == (4, 4)  # the file's, x1/4
    assert saved["train"]["max_steps"] == 2  # the override's, not small's minimum of 100
    assert saved["data"]["path"] == str(text_file)


def test_progress_of_training_and_scoring(
    tmp_path: Path,
    text_file: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a terminal, training shows its learning rate; the final scoring and ``highway
    eval`` show a bar of each split's scoring, which ``--no-progress`` hides, the metrics the
    same either way (piped: test_a_piped_train_says_its_budget_and_draws_no_bar)."""
    for module in ("training.writers", "tasks.progress"):
        monkeypatch.setattr(f"highway_transformer.{module}.on_terminal", lambda: True)
    config_file = tmp_path / "tiny.yaml"
    config_file.write_text(TINY_YAML, encoding="utf-8")
    out = tmp_path / "run"
    args = ["train", "--config", str(config_file), f"data.path={text_file}", "--out", str(out)]
    code, _, err = _run(capsys, *args, "train.max_steps=3")
    assert code == 0
    assert "lr=" in err and "scoring valid" in err and "scoring test" in err
    eval_args = ["eval", str(out), "--split", "both", "--json"]
    code, shown, err = _run(capsys, *eval_args)
    assert code == 0 and "scoring valid" in err and "scoring test" in err and "token" in err
    code, hidden, err = _run(capsys, *eval_args, "--no-progress")
    assert code == 0 and "scoring" not in err and "%|" not in err
    assert json.loads(shown) == json.loads(hidden)


def test_task_scoring_reports_all_its_examples(tmp_path: Path, capsys) -> None:
    """A task's evaluation reports every example it scores, and its metrics do not depend
    on the report."""
    from highway_transformer.api import evaluate_checkpoint

    out = tmp_path / "adding"
    small = ["train.max_steps=1", "model.n_layers=1", "task.length=5", "--no-progress"]
    assert cli.main(["train", "--task", "adding", "--out", str(out), *small]) == 0
    capsys.readouterr()
    quiet = evaluate_checkpoint(out / "best")
    assert capsys.readouterr().err == ""
    shown = evaluate_checkpoint(out / "best", progress=True)
    err = capsys.readouterr().err
    assert "scoring valid" in err and "scoring test" in err and "example" in err
    assert "\r" not in err and "\x1b[" not in err  # no terminal: plain lines, no cursor codes
    assert shown == quiet
