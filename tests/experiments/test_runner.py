"""Experiments: the registry of paper rows, scaled budgets, the resumable runner, the CLI."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import socket
from pathlib import Path

import pytest

from highway_transformer.cli_experiments import add_commands, parse_run_targets, split_targets
from highway_transformer.errors import ConfigError
from highway_transformer.experiments import (
    get_experiment,
    list_experiments,
    plan_runs,
    resolve_experiments,
    run_experiments,
    scale_config,
    table_experiments,
)
from highway_transformer.experiments.runner import launch_order
from highway_transformer.presets import PRESETS
from highway_transformer.storage.runfolder import read_metrics
from highway_transformer.training.runlock import LOCK_FILE

WORDS = ("the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away", "home")


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(300)]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def file_overrides(path: Path, level: str = "char") -> list[str]:
    return ["data.corpus=file", f"data.path={path}", f"data.level={level}"]


# --------------------------------------------------------------------------- registry


def test_every_table_has_its_rows() -> None:
    counts = {
        "ht-table1": 4, "ht-table2": 4, "ht-table3": 4, "ht-table4": 4, "ht-table5": 12,
        "ht-table6": 17, "ht-table7": 5, "rt-table1": 2, "rt-table2": 2, "rt-table3": 2,
        "rt-table4": 2,
    }  # fmt: skip
    for table, count in counts.items():
        assert len(table_experiments(table)) == count, table
    assert len(list_experiments()) == 53
    for e in list_experiments():
        assert e.preset in PRESETS
        assert get_experiment(e.baseline).table == e.table
        assert e.metric in (
            ("accuracy", "nll") if e.table in ("rt-table1", "rt-table2") else ("bpc", "ppl")
        )


def test_char_ptb_rows_carry_appendix_a1() -> None:
    for e in table_experiments("ht-table1") + table_experiments("ht-table2"):
        c = e.config()
        assert (c.model.d_model, c.model.n_layers, c.model.n_heads) == (512, 3, 8)
        assert (c.data.seq_len, c.data.context, c.data.batch_size) == (400, 80, 16)
        assert (c.train.optimizer, c.train.lr, c.train.clip) == ("sgd", 2.0, 0.15)
        assert c.model.dropout == 0.15 and c.model.init_range == 0.1
    assert get_experiment("ht-table2/rt-l3+tanh").config().model.family == "rtransformer"
    gate = get_experiment("ht-table1/t-l3+sigmoid").config().model.gate
    assert (gate.kind, gate.activation) == ("sdu", "sigmoid")


def test_word_ptb_and_xl_rows() -> None:
    c = get_experiment("ht-table3/t-l3+tanh").config()
    assert (c.model.d_model, c.model.dropout, c.model.dropout_emb) == (128, 0.35, 0.15)
    assert (c.model.init, c.model.init_range, c.train.clip) == ("uniform", 0.01, 0.35)
    assert (c.data.seq_len, c.data.context) == (80, 40)
    rt = get_experiment("rt-table4/rtransformer").config()
    assert rt.model.family == "rtransformer" and rt.model.local_rnn.cell == "lstm"
    assert rt.model.local_rnn.window == 9
    xl = get_experiment("ht-table5/l6-xl+sigmoid-l1-3").config()
    assert (xl.model.n_layers, xl.model.memory.mem_len, xl.model.memory.eval_clamp_len) == (
        6,
        512,
        820,
    )
    assert (xl.train.optimizer, xl.train.lr, xl.train.max_steps) == ("adam", 2.5e-4, 40_000)
    assert (xl.model.gate.activation, xl.model.gate.layers) == ("sigmoid", "1-3")
    assert get_experiment("ht-table6/l12-xl+tanh-l1-12").config().model.n_layers == 12


def test_published_numbers() -> None:
    assert get_experiment("ht-table1/t-l3+sigmoid").published == {
        "eval_bpc": 1.410,
        "test_bpc": 1.371,
    }
    assert get_experiment("ht-table4/rt-l3+tanh").published["test_ppl"] == 84.92
    assert get_experiment("ht-table3/t-l3").metric == "ppl"
    assert get_experiment("ht-table5/l6-xl+gated").published["train_hours"] == 21.10
    assert get_experiment("ht-table5/l6-xl+tanh-l3-6").published == {
        "eval_bpc": 1.277,
        "test_bpc": 1.24420,
    }
    assert get_experiment("ht-table6/l12-xl+tanh-l1-12").published == {
        "eval_bpc": 1.143,
        "test_bpc": 1.12797,
    }
    assert get_experiment("rt-table3/rtransformer").published == {"test_bpc": 1.24}
    assert get_experiment("rt-table4/transformer").published == {"test_ppl": 122.37}
    assert get_experiment("rt-table3/rtransformer").baseline == "rt-table3/transformer"
    hours = [e.published["train_hours"] for e in table_experiments("ht-table7")]
    assert hours == [21.16, 21.45, 21.87, 21.93, 21.10]


def test_unknown_names_suggest_the_closest() -> None:
    with pytest.raises(ConfigError, match="Did you mean 'ht-table1/t-l3\\+sigmoid'"):
        get_experiment("ht-table1/t-l3+sigmod")
    with pytest.raises(ConfigError, match="Did you mean 'ht-table5'"):
        table_experiments("ht-tabel5")
    with pytest.raises(ConfigError, match="unknown table or experiment"):
        resolve_experiments(["ht-table1", "nonsense"])
    names = [e.name for e in resolve_experiments(["ht-table1/t-l3", "ht-table1"])]
    assert names == [
        "ht-table1/t-l3",
        "ht-table1/t-l3+sigmoid",
        "ht-table1/t-l3+tanh",
        "ht-table1/t-l3+param-matched",
    ]


# --------------------------------------------------------------------------- scale


def test_small_scale_is_uniform_across_a_table() -> None:
    configs = [scale_config(e.config(), "small") for e in table_experiments("ht-table1")]
    for c in configs:
        assert (c.model.d_model, c.model.d_inner, c.model.n_layers) == (128, 512, 3)
        assert (c.data.seq_len, c.data.context) == (100, 20)
        assert (c.train.max_steps, c.train.lr, c.train.seed) == (989, 2.0, 1111)
        assert c.data.max_train_tokens == 2_000_000
        assert (c.data, c.train) == (configs[0].data, configs[0].train)
    xl = scale_config(get_experiment("ht-table5/l6-xl+tanh-l1-3").config(), "tiny")
    m = xl.model
    assert m.n_heads * m.d_head == m.d_model == 32
    assert (m.memory.mem_len, m.memory.eval_clamp_len, xl.data.seq_len) == (64, 102, 64)
    assert (m.n_layers, m.gate.layers, xl.data.batch_size) == (6, "1-3", 4)
    paper = get_experiment("ht-table1/t-l3").config()
    assert scale_config(paper, "paper").to_dict() == paper.to_dict()
    with pytest.raises(ConfigError, match="Did you mean 'small'"):
        scale_config(paper, "smal")


# --------------------------------------------------------------------------- runner


def test_plan_layout_and_seeds(tmp_path: Path, corpus: Path) -> None:
    specs = plan_runs("ht-table1/t-l3+tanh", tmp_path, "tiny", seeds=2, data_path=corpus)
    assert [s.run_dir for s in specs] == [
        tmp_path / "ht-table1" / "tiny" / "t-l3+tanh" / "seed1",
        tmp_path / "ht-table1" / "tiny" / "t-l3+tanh" / "seed2",
    ]
    assert [s.config.train.seed for s in specs] == [1111, 1112]
    assert specs[0].config.data.path == str(corpus)
    with pytest.raises(ConfigError):
        plan_runs("ht-table1", tmp_path, "tiny", seeds=0)


def test_plan_orders_runs_seed_by_seed(tmp_path: Path, corpus: Path) -> None:
    """Every row's first seed before any second seed: a table stopped part-way compares rows."""
    rows = ["ht-table1/t-l3", "ht-table1/t-l3+sigmoid"]
    specs = plan_runs(rows, tmp_path, "tiny", seeds=2, data_path=corpus)
    assert [(s.experiment.name, s.seed) for s in specs] == [
        ("ht-table1/t-l3", 1),
        ("ht-table1/t-l3+sigmoid", 1),
        ("ht-table1/t-l3", 2),
        ("ht-table1/t-l3+sigmoid", 2),
    ]


class Interrupt(Exception):
    pass


def test_runner_refuses_a_folder_trained_with_another_config(tmp_path: Path, corpus: Path) -> None:
    """A finished folder whose config is not the planned one (the scale or a preset changed
    since) is never skipped into the table; where it trained (path, threads) may differ."""
    import yaml

    row = "ht-table1/t-l3"
    overrides = [*file_overrides(corpus), "train.max_steps=4", "train.eval_interval=2"]
    (run,) = run_experiments(row, tmp_path, "tiny", overrides=overrides)
    saved = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))
    saved["train"]["threads"], saved["data"]["path"] = 7, "/elsewhere"
    (run / "config.yaml").write_text(yaml.safe_dump(saved), encoding="utf-8")
    messages: list[str] = []
    run_experiments(row, tmp_path, "tiny", overrides=overrides, log=messages.append)
    assert messages == [f"{row} seed 1: finished, skipped"]
    saved["model"]["d_model"] += 4
    (run / "config.yaml").write_text(yaml.safe_dump(saved), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"another configuration \(model.d_model=.* there"):
        run_experiments(row, tmp_path, "tiny", overrides=overrides)


def test_a_setting_added_after_a_run_reads_as_its_default(tmp_path: Path) -> None:
    """A run folder written before a setting existed computed what the setting's default
    computes: it matches a plan at the default, and differs from one that sets it."""
    import yaml

    from highway_transformer.config import Config, save_config
    from highway_transformer.storage.runfolder import CONFIG_FILE, config_differences

    planned = Config()
    save_config(planned, tmp_path / CONFIG_FILE)
    saved = yaml.safe_load((tmp_path / CONFIG_FILE).read_text(encoding="utf-8"))
    del saved["train"]["lr_step"]  # as a folder trained before the step schedule
    (tmp_path / CONFIG_FILE).write_text(yaml.safe_dump(saved), encoding="utf-8")
    assert config_differences(tmp_path, planned) == []
    planned.train.lr_step = 5
    assert config_differences(tmp_path, planned) == [("train.lr_step", 0, 5)]


def test_runner_trains_skips_and_resumes(tmp_path: Path, corpus: Path) -> None:
    rows = ["ht-table1/t-l3", "ht-table1/t-l3+sigmoid"]
    overrides = [*file_overrides(corpus), "train.max_steps=8", "train.eval_interval=4"]
    messages: list[str] = []
    plan = plan_lines(rows, tmp_path, overrides)
    assert plan[-2] == "0 finished, 0 to resume, 2 to start: 16 steps to train"
    assert plan[-1].endswith("no time estimate")  # nothing has trained here yet
    slurm = plan_lines([*rows, "--launcher", "slurm"], tmp_path, overrides)
    assert slurm[-1] == "submitted with --launcher slurm: no time estimate from here"
    assert not tmp_path.joinpath("ht-table1").exists()  # a plan writes nothing
    dirs = run_experiments(rows, tmp_path, "tiny", overrides=overrides, log=messages.append)
    assert [d.name for d in dirs] == ["seed1", "seed1"]
    for d, row in zip(dirs, rows, strict=True):
        info = json.loads((d / "experiment.json").read_text(encoding="utf-8"))
        assert (info["name"], info["table"]) == (row, "ht-table1")
        assert (info["scale"], info["seed"], info["metric"]) == ("tiny", 1, "bpc")
        assert info["published"] == get_experiment(row).published
        assert json.loads((d / "results.json").read_text())["steps"] == 8
    stamps = [(d / "results.json").stat().st_mtime_ns for d in dirs]

    messages.clear()
    where = ["train.threads=1", "train.device=cpu"]  # where a run trains is not what it computes
    run_experiments(rows, tmp_path, "tiny", overrides=[*overrides, *where], log=messages.append)
    assert messages == [f"{row} seed 1: finished, skipped" for row in rows]
    assert [(d / "results.json").stat().st_mtime_ns for d in dirs] == stamps
    info = json.loads((dirs[0] / "experiment.json").read_text(encoding="utf-8"))
    assert info["overrides"] == [o for o in overrides if not o.startswith("data.path=")]
    with pytest.raises(ConfigError, match="was trained with overrides .* pass another --out"):
        run_experiments(rows, tmp_path, "tiny", overrides=[*overrides, "train.max_steps=9"])
    assert [(d / "results.json").stat().st_mtime_ns for d in dirs] == stamps

    def crash_at_step_8(message: str) -> None:
        if message.startswith("step 8:"):
            raise Interrupt

    tanh = "ht-table1/t-l3+tanh"
    with pytest.raises(Interrupt):
        run_experiments(tanh, tmp_path, "tiny", overrides=overrides, log=crash_at_step_8)
    run_dir = tmp_path / "ht-table1" / "tiny" / "t-l3+tanh" / "seed1"
    assert (run_dir / "checkpoint").is_dir() and not (run_dir / "results.json").exists()
    lines = plan_lines([*rows, tanh], tmp_path, overrides)
    assert lines[0] == f"ht-table1/t-l3 seed 1 ({dirs[0]}): finished"
    assert lines[2] == f"{tanh} seed 1 ({run_dir}): resumes from its checkpoint at step 4 of 8"
    assert lines[3] == "2 finished, 1 to resume, 0 to start: 4 steps to train"
    fresh = "ht-table1/t-l3+param-matched"
    specs = plan_runs([fresh, *rows, tanh], tmp_path, "tiny", overrides=overrides)
    # the interrupted run resumes before a run listed ahead of it starts afresh
    assert [s.experiment.name for s in launch_order(specs)] == [tanh, fresh]
    # the tanh run's first 4 steps trained here: its rate prices the 4 left
    assert lines[4].startswith("at the rates measured on this kind of machine (")
    assert "of training" in lines[4] and "not counted" not in lines[4]
    (run_dir / LOCK_FILE).write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))
    assert f"training now: PID {os.getpid()} on " in plan_lines([tanh], tmp_path, overrides)[0]
    (run_dir / LOCK_FILE).unlink()
    with pytest.raises(ConfigError, match="was trained with overrides"):  # the run's own checks
        plan_lines([tanh], tmp_path, [*overrides, "train.max_steps=9"])
    messages.clear()
    run_experiments(tanh, tmp_path, "tiny", overrides=overrides, log=messages.append)
    assert any("resumed from" in m and "step 4" in m for m in messages)
    assert json.loads((run_dir / "results.json").read_text())["steps"] == 8
    valid_steps = [r["step"] for r in read_metrics(run_dir) if r["split"] == "valid"]
    assert valid_steps == [4, 8]


def plan_lines(rows: list[str], out: Path, overrides: list[str]) -> list[str]:
    """``highway run ROWS --scale tiny --plan``'s output lines, through the CLI."""
    args = _parse(["run", *rows, "--scale", "tiny", "--out", str(out), "--plan", *overrides])
    with contextlib.redirect_stdout(io.StringIO()) as out_text:
        assert args.func(args) == 0
    return out_text.getvalue().splitlines()


def test_parallel_jobs_as_processes(tmp_path: Path, corpus: Path) -> None:
    rows = ["ht-table3/t-l3", "ht-table3/t-l3+sigmoid"]
    overrides = [*file_overrides(corpus, "word"), "train.max_steps=4", "train.eval_interval=2"]
    dirs = run_experiments(rows, tmp_path, "tiny", jobs=2, overrides=overrides)
    for d in dirs:
        results = json.loads((d / "results.json").read_text(encoding="utf-8"))
        assert results["steps"] == 4 and results["valid"]["ppl"] > 1
        assert (d / "train.log").is_file()


# --------------------------------------------------------------------------- CLI


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="highway")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_cli_lists_rows_and_splits_overrides(capsys: pytest.CaptureFixture[str]) -> None:
    args = _parse(["experiments", "ht-table7"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "ht-table5/l6-xl+sigmoid" in out and "21.87 h" in out and "(baseline)" in out
    names, overrides = split_targets(["ht-table1", "train.lr=0.5", "ht-table2/rt-l3"])
    assert (names, overrides) == (["ht-table1", "ht-table2/rt-l3"], ["train.lr=0.5"])
    with pytest.raises(ConfigError):
        split_targets(["train.lr=0.5"])
    argv = ["run", "ht-table1", "data.path=x", "--scale", "tiny", "train.lr=1", "--seeds", "2"]
    args = parse_run_targets(_parse(argv))
    assert (args.targets, args.scale, args.seeds, args.jobs) == (
        ["ht-table1", "data.path=x", "train.lr=1"],
        "tiny",
        2,
        1,
    )
    args = parse_run_targets(_parse(["run", "--jobs", "2", "ht-table2"]))
    assert (args.targets, args.jobs, args.scale) == (["ht-table2"], 2, "small")
    with pytest.raises(ConfigError, match="unrecognized arguments: --bogus"):
        parse_run_targets(_parse(["run", "ht-table1", "--bogus"]))


def test_task_tables_are_listed_with_the_rt_paper_figures() -> None:
    mnist = {e.row: e for e in table_experiments("rt-table1")}
    assert mnist["rtransformer"].published == {"test_accuracy": 99.1}
    assert mnist["rtransformer"].config().task.name == "pixels"
    nottingham = {e.row: e for e in table_experiments("rt-table2")}
    assert nottingham["transformer"].published == {"test_nll": 3.34}
    assert nottingham["rtransformer"].config().model.local_rnn.window == 6
