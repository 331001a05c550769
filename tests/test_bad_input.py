"""Every bad input is a one-line answer: CLI exit 2 with ``error: ...``, our error types in the
API, never a traceback. Each parametrized case is one distinct bad input."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from highway_transformer import cli
from highway_transformer.api import build_model
from highway_transformer.config import Config, ModelConfig
from highway_transformer.config.keys import key_ranges
from highway_transformer.config.sampling import check_sampling
from highway_transformer.data.vocab import Vocabulary
from highway_transformer.errors import CheckpointError, ConfigError, DataError, HighwayError
from highway_transformer.files import make_folder
from highway_transformer.report.report import write_report
from highway_transformer.report.runs import group_runs, load_run
from highway_transformer.report.tables import mean_curve, paper_rows
from highway_transformer.validation import build_config


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the CLI, assert exit 2 and a single ``error:`` line; return that line."""
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    return err


# ------------------------------------------------------------------ config values

BAD_OVERRIDES = [
    ("model.d_head=0", "model.d_head"),
    ("model.d_head=-4", "model.d_head"),
    ("model.dropout_emb=2", "model.dropout_emb"),
    ("model.dropout=-0.1", "model.dropout"),
    ("model.dropout_attn=1", "model.dropout_attn"),
    ("model.n_heads=0", "model.n_heads"),
    ("model.d_model=-8", "model.d_model"),
    ("model.init_range=0", "model.init_range"),
    ("model.local_rnn.window=0", "model.local_rnn.window"),
    ("model.memory.mem_len=-1", "model.memory.mem_len"),
    ("model.gate.layers=", "model.gate.layers"),
    ("model.gate.bias=.nan", "model.gate.bias"),
    ("data.batch_size=0", "data.batch_size"),
    ("data.eval_seq_len=-5", "data.eval_seq_len"),
    ("data.max_eval_tokens=1", "data.max_eval_tokens"),
    ("train.log_interval=0", "train.log_interval"),
    ("train.threads=-1", "train.threads"),
    ("train.warmup_steps=-10", "train.warmup_steps"),
    ("train.lr=.nan", "train.lr"),
    ("train.lr=.inf", "train.lr"),
    ("train.momentum=1.5", "train.momentum"),
    ("train.betas=[0.9,1.2]", "train.betas"),
    ("train.anneal_factor=0", "train.anneal_factor"),
    ("train.seed=-1", "train.seed"),
    ("task.beam_size=0", "task.beam_size"),
    ("model.d_model=abc", "model.d_model"),
    ("model.d_model=2.5", "model.d_model"),
    ("model.d_model.x=3", "model.d_model"),
    ("model=3", "model"),
    ("model.nonsense=1", "nonsense"),
    ("just-a-word", "key=value"),
]


@pytest.mark.parametrize(("override", "named"), BAD_OVERRIDES)
def test_bad_override_is_one_line_naming_the_field(
    override: str, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = run_cli(["train", override, "--no-progress"], capsys)
    assert named in err


MODERN_MISFITS = [
    (
        ["model.family=xl", "model.positional=rope"],
        "use model.positional=none with attention=relative",
    ),
    (
        ["model.attention=shaw", "model.positional=rope"],
        "use model.positional=none with attention=shaw",
    ),
    (
        ["model.positional=rope", "model.n_heads=4", "model.d_head=3"],
        "set model.d_head (or n_heads)",
    ),
    (["model.rope_theta=500"], "remove it or set model.positional=rope"),
    (["model.gate.kind=attn-output"], "set model.attn_output_gate=elementwise or headwise"),
    (["model.attn_output_gate=channel"], "choose one of: elementwise, headwise, none"),
    (["model.ffn=geglu"], "choose one of: relu, swiglu"),
    (["--task", "seq2seq", "model.attn_output_gate=headwise"], "scored attention; remove it"),
    (["model.gate.kind=headwise"], "no granularity; headwise is the attention-output gate's"),
    (["model.gate.kind=elementwise"], "set model.attn_output_gate=elementwise"),
    (["model.attn_output_gate=headwise", "model.gate.layers=1"], "not model.attn_output_gate"),
    (["model.attn_output_gate=elementwise", "model.gate.sublayers=[attn]"], "gtrxl-...)"),
    (
        ["--task", "rl", "task.rl.policy=lstm", "model.attn_output_gate=headwise"],
        "gates attention heads, and task.rl.policy=lstm has none; remove it",
    ),
    (["--task", "rl", "task.rl.policy=mlp", "model.attn_output_gate=elementwise"], "has none"),
    (["--task", "rl", "model.attn_output_gate=headwise"], "builds its own attention and FFN"),
    (["--task", "rl", "model.ffn=swiglu"], "builds its own attention and FFN"),
    (["--task", "rl", "model.positional=rope"], "builds its own attention and FFN"),
    (["model.ffn=swiglu", "model.d_inner=14"], "set model.d_inner=12 (hidden 8, exactly 2/3)"),
]


@pytest.mark.parametrize(("overrides", "fix"), MODERN_MISFITS)
def test_a_modern_option_where_it_does_not_apply_names_the_fix(
    overrides: list[str], fix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fix in run_cli(["train", *overrides, "--no-progress"], capsys)


def test_every_range_names_its_field_and_bound() -> None:
    for name, allowed in key_ranges().items():
        if allowed.low is None:
            continue
        value = allowed.low - (1 if allowed.low == int(allowed.low) else 0.5)
        is_tuple = name == "train.betas" or name == "model.adaptive_cutoffs"
        override = f"[{value}, {value}]" if is_tuple else str(value)
        if name == "model.adaptive_cutoffs":
            override = f"[{value}]"
        with pytest.raises(ConfigError, match=name.replace(".", r"\.")):
            build_config(Config(), None, [f"{name}={override}"])


def test_overrides_may_follow_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = run_cli(["train", "model.d_model=8", "--no-progress", "model.d_head=0"], capsys)
    assert "model.d_head" in err  # the override after --no-progress was read


# ------------------------------------------------------------------ config files

CONFIG_FILES = [
    ("binary.yaml", b"\x7fELF\x00\x01\x02", "binary"),
    ("latin1.yaml", "model:\n  norm: pr\xe9\n".encode("latin-1"), "UTF-8"),
    ("scalar.yaml", b"model: 3\n", "mapping"),
    ("deep.yaml", b"model:\n  d_model:\n    x: 3\n", "single value"),
    ("list.yaml", b"- a\n- b\n", "mapping"),
    ("empty.yaml", b"", "mapping"),
    ("broken.yaml", b"model: [1, 2\n", "cannot parse"),
    ("broken.toml", b"[model\n", "cannot parse"),
    ("unknown.yaml", b"modle:\n  d_model: 3\n", "Did you mean"),
]


@pytest.mark.parametrize(("name", "content", "says"), CONFIG_FILES)
def test_bad_config_file(
    name: str, content: bytes, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    err = run_cli(["train", "--config", str(path)], capsys)
    assert says in err


def test_missing_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "does not exist" in run_cli(["train", "--config", str(tmp_path / "no.yaml")], capsys)


def test_a_config_folder_is_not_a_config_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = run_cli(["train", "--config", str(tmp_path)], capsys)
    assert "is a folder; give a YAML or TOML file" in err and "does not exist" not in err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-restarts", "2"], "--max-restarts restarts the processes of --nproc N"),
        (["--nproc", "1", "--max-restarts", "-1"], "--max-restarts must be >= 0, got -1"),
        (["--trust-unverified"], "--trust-unverified lets --resume read a checkpoint"),
    ],
)
def test_launch_flags_that_do_not_apply(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["train", *flags, "--out", str(tmp_path / "run"), "train.max_steps=1"]
    assert message in run_cli(argv, capsys)
    assert not (tmp_path / "run").exists()


def test_a_music_data_path_that_is_a_file_asks_for_its_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    given = tmp_path / "Piano_midi.mat"
    given.write_bytes(b"")
    out = tmp_path / "run"
    argv = ["train", "--preset", "rt-table2/transformer", "task.dataset=piano-midi"]
    err = run_cli([*argv, "--data-path", str(given), "--out", str(out), "--no-progress"], capsys)
    assert "must be a folder holding Piano_midi.mat" in err and "File exists" not in err
    assert not any(out.rglob("*"))  # no record, checkpoint or lock left behind


# ------------------------------------------------------------------ output places


def test_out_onto_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert "is a file" in run_cli(["train", "--out", str(blocker), "train.max_steps=1"], capsys)


def test_out_under_a_file(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match="cannot be used"):
        make_folder(blocker / "run", "--out")


def test_impossible_allocation_fails_fast_with_the_estimate(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = tmp_path / "text.txt"
    text.write_text("a small corpus of a few words. " * 2000, encoding="utf-8")
    corpus = ["data.corpus=file", f"data.path={text}", "--no-progress"]
    argv = ["train", "data.seq_len=100000000", "--out", str(tmp_path / "r"), *corpus]
    err = run_cli(argv, capsys)
    assert "GiB" in err and "data.seq_len" in err
    huge = ["train", "model.d_model=400000", "model.d_inner=400000", "model.n_heads=1"]
    err = run_cli([*huge, "--out", str(tmp_path / "h"), *corpus], capsys)
    assert "weights" in err and "GiB" in err


@pytest.mark.parametrize(
    "sizes",
    [
        ["model.d_model=1000000000"],  # a weight torch cannot even describe (> 2^63 bytes)
        ["model.n_layers=1000000000"],  # building a billion layers would never finish
        ["--task", "copy", "model.d_model=1000000000"],  # every task, not only lm
        ["--task", "seq2seq", "model.n_layers=100000000", "model.gate.kind=sdu"],
    ],
)
def test_an_impossible_model_is_refused_before_it_is_built(
    sizes: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path, text_file: Path
) -> None:
    corpus = [] if "--task" in sizes else ["data.corpus=file", f"data.path={text_file}"]
    err = run_cli(["train", *sizes, *corpus, "--out", str(tmp_path / "r"), "--no-progress"], capsys)
    assert "GiB" in err and "parameters" in err and "lower model." in err
    with pytest.raises(ConfigError, match="GiB"):
        build_model(ModelConfig(vocab_size=10, d_model=10**9, n_heads=1, d_inner=8))


# ------------------------------------------------------------------ API


@pytest.mark.parametrize(
    "fields",
    [
        {"family": "lstm"},
        {"d_model": -16},
        {"n_layers": 0},
        {"d_model": 16.5},
        {"n_heads": "2"},
        {"dropout": 1.5},
        {"vocab_size": -3},
    ],
)
def test_build_model_refuses_bad_sizes(fields: dict) -> None:
    config = ModelConfig(vocab_size=10, d_model=16, n_heads=2, d_inner=32, n_layers=1)
    for key, value in fields.items():
        setattr(config, key, value)
    with pytest.raises(ConfigError):
        build_model(config)


VOCAB_FILES = [
    b"\x00\x01\x02binary",
    '{"symbols": ["\xe9"]}'.encode("latin-1"),
    b"{not json",
    b"[1, 2]",
    b'{"symbols": [1, 2], "level": "char"}',
    b'{"symbols": ["a"], "level": "klingon"}',
    b'{"symbols": ["a", "a"], "level": "char"}',
    b'{"symbols": ["a"], "level": "char", "unk": "<unk>"}',
]


@pytest.mark.parametrize("content", VOCAB_FILES)
def test_vocabulary_load_of_bad_files(content: bytes, tmp_path: Path) -> None:
    path = tmp_path / "vocab.json"
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match="vocab"):
        Vocabulary.load(path)


# ------------------------------------------------------------------ generation

BAD_SAMPLING = [
    {"temperature": math.nan},
    {"temperature": -1.0},
    {"temperature": math.inf},
    {"top_k": -3},
    {"top_p": 0.0},
    {"top_p": 2.0},
    {"top_p": -1.0},
    {"top_p": math.nan},
    {"n_tokens": -1},
    {"seed": -5},
]


@pytest.mark.parametrize("bad", BAD_SAMPLING)
def test_sampling_arguments(bad: dict) -> None:
    args = {"n_tokens": 10, "temperature": 1.0, "top_k": 0, "top_p": 1.0, "seed": None, **bad}
    with pytest.raises(ConfigError):
        check_sampling(**args)


@pytest.mark.parametrize("option", [["--temperature", "nan"], ["--top-p", "-1"], ["--top-k", "-3"]])
def test_generate_arguments_on_the_cli(
    option: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_cli(["generate", str(tmp_path), "--prompt", "a", *option], capsys)


# ------------------------------------------------------------------ report readers


def _run_folder(root: Path, **files: bytes) -> Path:
    run = root / "run"
    run.mkdir(parents=True)
    experiment = {"name": "ht-table1/t-l3", "table": "ht-table1", "scale": "tiny", "seed": 1}
    (run / "experiment.json").write_text(json.dumps(experiment))
    for name, content in files.items():
        (run / name.replace("_", ".", 1)).write_bytes(content)
    return run


REPORT_FILES = [
    {"config_yaml": b"model: [unclosed"},
    {"config_yaml": b"model: 3\n"},
    {"config_yaml": b"\xff\xfe\x00binary"},
    {"results_json": b'{"valid": "oops", "test": {"loss": "x"}}'},
    {"results_json": b'{"parameters": "many"}'},
    {"results_json": b"[1, 2, 3]"},
    {"results_json": b"\xff\xfe"},
    {"metrics_jsonl": b'{"step": "abc", "split": "valid"}\n{"step": 1}\n[]\n\xff\n'},
    {"metrics_jsonl": b'{"step": 2, "split": "valid", "loss": "NaNish"}\n'},
    {"metrics_jsonl": b"garbage\n" + b'{"step": 2, "split": "valid", "loss": 1.0}\n'},
]


@pytest.mark.parametrize("files", REPORT_FILES)
def test_report_refuses_malformed_run_files_naming_them(
    files: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_folder(tmp_path, **files)
    (name,) = (key.replace("_", ".", 1) for key in files)
    with pytest.raises(ConfigError, match=f"{name} is malformed"):
        load_run(run)
    argv = ["report", str(run), "--out", str(tmp_path / "report"), "--allow-mixed-code"]
    assert f"{name} is malformed" in run_cli(argv, capsys)  # exit 2, one line
    assert not (tmp_path / "report").exists()  # no report of a damaged run


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("results.json", b'{"parameters": "many"}'),
        ("metrics.jsonl", b'{"step": 2, "split": "valid", "loss": 1.0}\ngarbage\n'),
    ],
)
def test_compare_refuses_malformed_run_files_naming_them(
    name: str, content: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = []
    for label in ("a", "b"):
        run = tmp_path / label
        run.mkdir()
        (run / "metrics.jsonl").write_text('{"step": 2, "split": "valid", "loss": 1.0}\n')
        runs.append(str(run))
    (tmp_path / "b" / name).write_bytes(content)
    err = run_cli(["compare", *runs, "--out", str(tmp_path / "out")], capsys)
    assert f"{tmp_path / 'b' / name} is malformed" in err


def _compare_pair(root: Path) -> list[str]:
    """Two finished runs ``a`` and ``b`` that compare."""
    for label in ("a", "b"):
        run = root / label
        run.mkdir()
        (run / "metrics.jsonl").write_text('{"step": 2, "split": "valid", "loss": 1.0}\n')
        (run / "results.json").write_text('{"valid": {"loss": 1.0, "loss_se": 0.0443}}')
    return [str(root / "a"), str(root / "b")]


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("results.json", b'{"valid": {"loss": NaN, "loss_se": 0.0443}}', "valid.loss is NaN"),
        (
            "metrics.jsonl",
            b'{"step": 2, "split": "valid", "loss": 1.0}\n{"step": 4, "split": "va',
            "its last line is cut short, though results.json says the run finished",
        ),
        (
            "metrics.jsonl",
            b'{"step": 2, "split": "valid", "loss": Infinity}\n',
            "loss is Infinity at step 2 (valid)",
        ),
    ],
)
def test_compare_refuses_runs_with_nan_or_cut_records(
    name: str, content: bytes, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = _compare_pair(tmp_path)
    (tmp_path / "b" / name).write_bytes(content)
    err = run_cli(["compare", *runs, "--out", str(tmp_path / "out")], capsys)
    assert err.startswith(f"error: {tmp_path / 'b' / name}: {says}") and "not usable" in err
    assert not (tmp_path / "out").exists()


def test_report_flags_a_nan_run_first_and_says_something_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make_run: Callable[..., Path]
) -> None:
    good = make_run(tmp_path / "runs", "ht-table1/t-l3", [2.0, 1.5, 1.2, 1.1], 1.6, 1.5, 1.0)
    bad = make_run(tmp_path / "runs", "ht-table1/t-l3", [2.0, 1.5, 1.2, 1.1], 1.6, 1.5, 1.0, 2)
    results = json.loads((bad / "results.json").read_text())
    results["valid"]["loss"] = math.nan
    (bad / "results.json").write_text(json.dumps(results))
    out = tmp_path / "report"
    assert cli.main(["report", str(tmp_path / "runs"), "--out", str(out)]) == 0
    printed = capsys.readouterr()
    warning = f"ht-table1/t-l3 seed 2 is not usable, left out of every number: {bad}/results.json"
    assert printed.err.startswith(f"warning: {warning}: valid.loss is NaN")
    assert "(1 runs)" in printed.out and "1 missing or incomplete item(s)" in printed.out
    index = (out / "index.md").read_text(encoding="utf-8")
    assert "Nothing is missing" not in index
    assert str(good) not in index.split("## Runs")[0]  # the good run is not flagged


def test_report_notes_a_metrics_line_being_written(tmp_path: Path) -> None:
    line = b'{"step": 2, "split": "valid", "loss": 1.0}\n'
    record = load_run(_run_folder(tmp_path, metrics_jsonl=line + b'{"step": 4, "spl'))
    assert "metrics.jsonl: its last line is cut short (a run writing it?)" in record.problems
    assert [r["step"] for r in record.records] == [2]
    paper_rows(group_runs([record]), "bpc")
    mean_curve([record], "valid", "loss")
    report = write_report([record.run_dir], tmp_path / "report", allow_mixed_code=True)
    assert report["missing"] and (tmp_path / "report" / "index.md").is_file()


@pytest.mark.parametrize(
    "experiment", [b"{}", b'{"name": 3}', b'{"name": "x", "seed": "one"}', b"\x00"]
)
def test_report_refuses_a_malformed_experiment_file(experiment: bytes, tmp_path: Path) -> None:
    run = _run_folder(tmp_path)
    (run / "experiment.json").write_bytes(experiment)
    with pytest.raises(ConfigError, match="experiment.json"):
        load_run(run)


def test_report_out_onto_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run_folder(tmp_path)
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    argv = ["report", str(run), "--out", str(blocker), "--allow-mixed-code"]  # code not recorded
    assert "is a file" in run_cli(argv, capsys)


def test_errors_are_our_types() -> None:
    assert issubclass(ConfigError, HighwayError) and issubclass(CheckpointError, HighwayError)


@pytest.mark.parametrize("empty", [np.empty((1, 0), dtype=object), np.zeros((0,))])
def test_an_empty_music_split(empty: np.ndarray, tmp_path: Path) -> None:
    from scipy.io import savemat

    from highway_transformer.data.music import load_music

    roll = np.zeros((4, 88))
    roll[:, 40] = 1
    cells = np.empty((1, 1), dtype=object)
    cells[0, 0] = roll
    path = tmp_path / "music.mat"
    savemat(path, {"traindata": cells, "validdata": empty, "testdata": cells})
    with pytest.raises(DataError, match="validdata.*empty split"):
        load_music(str(path))
