"""Reading run folders for the report (``report/runs.py``): what a folder holds and what it
lacks noted as problems, a malformed file refused naming it, runs found beneath a root,
grouped in registry order, one table per report, and the facts of each run."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from highway_transformer.errors import ConfigError, DataError
from highway_transformer.report.runs import (
    check_one_table,
    find_run_dirs,
    group_runs,
    load_compared,
    load_run,
    load_run_set,
    number,
    portable_path,
    run_facts,
)

MakeRun = Callable[..., Path]
CURVE = [2.0, 1.5, 1.2, 1.1]


def test_a_finished_run_reads_whole_with_its_registry_facts(
    tmp_path: Path, make_run: MakeRun
) -> None:
    run = load_run(make_run(tmp_path, "ht-table1/t-l3+tanh", CURVE, 1.6, 1.5, 100.0, seed=2))
    assert (run.name, run.seed, run.problems, run.progress) == ("ht-table1/t-l3+tanh", 2, [], None)
    assert run.experiment["baseline"] == "ht-table1/t-l3"  # filled from the registry
    assert run.experiment["overrides"] == [] and not run.gated  # its config.yaml: gate none
    assert run.results["valid"]["bpc"] == 1.6 and len(run.records) == 8


def test_what_a_folder_lacks_is_noted_not_fatal(tmp_path: Path, make_run: MakeRun) -> None:
    folder = make_run(tmp_path, "ht-table1/t-l3", CURVE, 1.6, 1.5, 100.0)
    results = json.loads((folder / "results.json").read_text())
    del results["test"]
    (folder / "results.json").write_text(json.dumps(results))
    with (folder / "metrics.jsonl").open("a") as handle:
        handle.write('{"step": 50, "spl')  # a run writing its last line now
    (folder / "config.yaml").unlink()
    run = load_run(folder)
    assert run.problems == [
        "config.yaml missing",
        "results.json has no test figures",
        "metrics.jsonl: its last line is cut short (a run writing it?)",
    ]
    assert run.results["valid"]["bpc"] == 1.6 and run.config == {}


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("config.yaml", "model: 3\n", "config.yaml is malformed (model is not a mapping)"),
        ("config.yaml", "model: [1, 2\n", "config.yaml is malformed (not YAML)"),
        ("results.json", '{"valid": {"bpc": "n/a"}}', "valid must be an object of numbers"),
        ("results.json", '{"parameters": "many"}', 'parameters must be a number, got "many"'),
        ("results.json", '{"steps": true}', "steps must be a whole number"),
        ("results.json", '{"stretches": [{"host": [1]}]}', "stretches must be a list of objects"),
        ("results.json", '{"learned": {"loss": "low"}}', "learned must be an object"),
        ("results.json", "[1, 2]", "results.json is malformed (a JSON list, not an object)"),
        ("results.json", '{"valid": ', "results.json is malformed (not JSON, or truncated)"),
        ("protocol_eval.json", "\x00\x01", "protocol_eval.json is malformed (a binary file"),
        ("protocol_eval.json", '{"valid": {"bpc": [1]}}', "valid must be an object of numbers"),
        ("metrics.jsonl", '{"step": 1, "split": "valid"}\n[1, 2]\n', "(line 2: a JSON list"),
        ("metrics.jsonl", '{"step": 1, "spl\n{"step": 2, "split": "x"}\n', "(line 1: not JSON)"),
        ("metrics.jsonl", '{"step": "one", "split": "valid"}\n', "line 1: step must be a whole"),
        ("metrics.jsonl", '{"step": 1, "split": "valid", "loss": "x"}\n', "loss must be a number"),
    ],
)
def test_a_malformed_run_file_is_refused_naming_it(
    tmp_path: Path, make_run: MakeRun, name: str, content: str, says: str
) -> None:
    folder = make_run(tmp_path, "ht-table1/t-l3", CURVE, 1.6, 1.5, 100.0)
    (folder / name).write_text(content, encoding="latin-1")
    with pytest.raises(ConfigError) as info:
        load_run(folder)
    message = str(info.value)
    assert message.startswith(str(folder / name)) and says in message and "\n" not in message
    assert message.endswith(f"or leave {folder} out")


@pytest.mark.parametrize(
    ("name", "edit", "says"),
    [
        ("results.json", '"valid": {"loss": NaN}', "valid.loss is NaN"),
        ("results.json", '"final": {"step": 40, "test": {"bpc": -Infinity}}', "final.test.bpc"),
        ("protocol_eval.json", '"valid": {"bpc": NaN}', "valid.bpc is NaN"),
        ("metrics.jsonl", '{"step": 50, "split": "valid", "loss": NaN}', "loss is NaN at step 50"),
        ("metrics.jsonl", '{"step": 50, "spl', "its last line is cut short, though results"),
    ],
)
def test_non_finite_or_cut_records_make_a_run_unusable(
    tmp_path: Path, make_run: MakeRun, name: str, edit: str, says: str
) -> None:
    folder = make_run(tmp_path, "ht-table1/t-l3", CURVE, 1.6, 1.5, 100.0)
    path = folder / name
    if name == "metrics.jsonl":
        with path.open("a", encoding="utf-8") as handle:
            handle.write(edit)
    else:
        data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        path.write_text(json.dumps({**data, **json.loads("{" + edit + "}")}), encoding="utf-8")
    run = load_run(folder)
    assert run.unusable is not None and run.unusable.startswith(f"{path}: ")
    assert says in run.unusable and run.progress is None


def test_a_cut_line_of_a_run_still_writing_is_not_a_defect(
    tmp_path: Path, make_run: MakeRun
) -> None:
    folder = make_run(tmp_path, "ht-table1/t-l3", CURVE, 1.6, 1.5, 100.0)
    (folder / "results.json").unlink()
    with (folder / "metrics.jsonl").open("a", encoding="utf-8") as handle:
        handle.write('{"step": 50, "spl')
    assert load_run(folder).unusable is None


def test_a_run_still_training_has_progress_instead_of_results(
    tmp_path: Path, make_run: MakeRun
) -> None:
    folder = make_run(tmp_path, "ht-table1/t-l3", CURVE, 1.6, 1.5, 100.0)
    (folder / "results.json").unlink()
    lines = (folder / "metrics.jsonl").read_text().splitlines()[:4]  # up to step 20 of 40
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    run = load_run(folder)
    assert run.progress == (20, 40) and run.results is None


def test_an_experiment_file_must_name_its_row(tmp_path: Path) -> None:
    (tmp_path / "experiment.json").write_text(json.dumps({"seed": 1}))
    with pytest.raises(ConfigError, match="is missing, unreadable or has no name"):
        load_run(tmp_path)
    (tmp_path / "experiment.json").write_text(json.dumps({"name": "x", "seed": "one"}))
    with pytest.raises(ConfigError, match="seed must be a int, got 'one'"):
        load_run(tmp_path)


def test_run_folders_are_found_beneath_a_root_once(tmp_path: Path, make_run: MakeRun) -> None:
    a = make_run(tmp_path / "runs", "ht-table1/t-l3", CURVE, 1.6, 1.5, 100.0)
    b = make_run(tmp_path / "runs", "ht-table1/t-l3+tanh", CURVE, 1.6, 1.5, 100.0)
    assert find_run_dirs([tmp_path / "runs", a]) == sorted([a.resolve(), b.resolve()])
    with pytest.raises(ConfigError, match="does not exist"):
        find_run_dirs([tmp_path / "nowhere"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="holds no experiment.json"):
        find_run_dirs([tmp_path / "empty"])
    with pytest.raises(ConfigError, match="give at least one run folder"):
        find_run_dirs([])


def test_runs_group_in_registry_order_and_one_table_per_report(
    tmp_path: Path, make_run: MakeRun
) -> None:
    names = ["ht-table1/t-l3+tanh", "ht-table1/t-l3", "ht-table1/t-l3+sigmoid"]
    runs = [load_run(make_run(tmp_path, n, CURVE, 1.6, 1.5, 1.0, seed=s))
            for s in (2, 1) for n in names]  # fmt: skip
    groups = group_runs(runs)
    assert list(groups) == ["ht-table1/t-l3", "ht-table1/t-l3+sigmoid", "ht-table1/t-l3+tanh"]
    assert [r.seed for r in groups["ht-table1/t-l3"]] == [1, 2]
    assert check_one_table(runs) == ("ht-table1", "small")
    other = load_run(make_run(tmp_path, "ht-table1/t-l3", CURVE, 1.6, 1.5, 1.0, scale="tiny"))
    with pytest.raises(ConfigError, match=r"the runs mix scales: small \(6 runs\), tiny \(1 run\)"):
        check_one_table([*runs, other])


def test_run_facts_come_from_the_recorded_metadata(tmp_path: Path, make_run: MakeRun) -> None:
    folder = make_run(tmp_path, "ht-table1/t-l3", CURVE, 1.6, 1.5, 100.0)
    assert run_facts(load_run(folder)) == {
        "threads": None, "device": None, "precision": None, "torch": None,
        "train_seconds": 100.0, "stretches": None, "rate_changes": None,
    }  # fmt: skip
    results = json.loads((folder / "results.json").read_text())
    results["metadata"] = {"threads": 4, "device": "cpu", "precision": "bf16", "torch": "2.13.0"}
    (folder / "results.json").write_text(json.dumps(results))
    facts = run_facts(load_run(folder))
    assert (facts["threads"], facts["precision"], facts["torch"]) == (4, "bf16", "2.13.0")


def test_numbers_and_portable_paths() -> None:
    assert (number(3), number(2.5), number(float("inf"))) == (3.0, 2.5, float("inf"))
    assert (number(True), number("1"), number(None)) == (None, None, None)
    assert portable_path(Path.cwd().resolve() / "results" / "x") == str(Path("results/x"))
    assert portable_path(Path("/elsewhere/x")) == "/elsewhere/x"


def _train_folder(folder: Path, metrics: str, results: str | None = None) -> Path:
    """A ``highway train`` folder: no experiment.json, a config naming its data."""
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text("task:\n  name: lm\ndata:\n  corpus: ptb-word\n")
    (folder / "metrics.jsonl").write_text(metrics, encoding="utf-8")
    if results is not None:
        (folder / "results.json").write_text(results, encoding="utf-8")
    return folder


VALID = '{"step": 2, "split": "valid", "loss": 1.0}\n'


def test_a_train_folder_reads_through_the_same_reader_labelled(tmp_path: Path) -> None:
    """``highway compare``'s folders: no experiment, named by their label, the same record."""
    folder = _train_folder(tmp_path / "a", VALID, '{"valid": {"loss": 1.0}, "level": "char"}')
    run = load_compared(folder, "a")
    assert (run.name, run.label, run.experiment, run.unusable) == ("a", "a", {}, None)
    assert run.flat == {"task.name": "lm", "data.corpus": "ptb-word"} and run.task == "lm"
    assert run.level == "char"  # results.json's level first, then the corpus's (word)
    run.results = None
    assert run.level == "word"
    with pytest.raises(ConfigError, match="experiment.json is missing"):
        load_run(folder)  # a run of an experiment must say which


def test_a_comparison_refuses_what_a_report_leaves_out(tmp_path: Path) -> None:
    """One reader flags a cut or non-finite record; a comparison refuses the run whole."""
    cut = _train_folder(tmp_path / "cut", VALID + '{"step": 4, "spl')
    assert load_run(cut, "cut").unusable is None  # being written: a problem, not a defect
    with pytest.raises(DataError, match=r"cut short \(a run writing it\? compare once"):
        load_compared(cut, "cut")
    nan = _train_folder(tmp_path / "nan", VALID, '{"valid": {"loss": NaN}}')
    reason = f"{nan / 'results.json'}: valid.loss is NaN"
    assert load_run(nan, "nan").unusable == reason
    with pytest.raises(DataError, match=f"^{reason}; its numbers are not usable"):
        load_compared(nan, "nan")
    damaged = _train_folder(tmp_path / "damaged", VALID)
    (damaged / "config.yaml").write_text("model: [unclosed")
    with pytest.raises(ConfigError, match="config.yaml is malformed \\(not YAML\\)"):
        load_compared(damaged, "damaged")  # refused as the report refuses it


def test_a_run_set_splits_finished_runs_from_the_rest(tmp_path: Path, make_run: MakeRun) -> None:
    make_run(tmp_path, "ht-table1/t-l3", CURVE, 1.6, 1.5, 100.0)
    training = make_run(tmp_path, "ht-table1/t-l3", CURVE, 1.6, 1.5, 100.0, seed=2)
    (training / "results.json").unlink()
    lines = (training / "metrics.jsonl").read_text().splitlines()[:2]
    (training / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    diverged = make_run(tmp_path, "ht-table1/t-l3", CURVE, 1.6, 1.5, 100.0, seed=3)
    (diverged / "results.json").write_text('{"valid": {"loss": Infinity}}')
    run_set = load_run_set([tmp_path])
    assert [r.seed for r in run_set.loaded] == [1, 2, 3]
    assert [r.seed for r in run_set.runs] == [1]
    assert run_set.in_progress == [
        {"name": "ht-table1/t-l3", "seed": 2, "step": 10, "max_steps": 40}
    ]
    assert run_set.unusable == [
        {"name": "ht-table1/t-l3", "seed": 3,
         "reason": f"{diverged / 'results.json'}: valid.loss is Infinity"}
    ]  # fmt: skip
