"""The command line a researcher meets first: which weights eval/generate use, whole-file
scores, ``config``, ``--version``, a torch-free ``--help``, short unknown-name errors and
``compare`` on ``highway train`` folders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from highway_transformer import cli
from highway_transformer.api import load_pretrained
from highway_transformer.models.lm import LanguageModel
from highway_transformer.training.checkpoint import save_checkpoint

PATTERN = "the cat sat on the mat. the dog sat on the log. " * 25
TINY = [
    "corpus.txt",
    "data.corpus=file",
    "data.level=char",
    "data.batch_size=4",
    "data.seq_len=16",
    "data.eval_batch_size=4",
    "model.d_model=16",
    "model.n_layers=1",
    "model.n_heads=2",
    "model.d_inner=32",
    "train.optimizer=adam",
    "train.lr=0.01",
    "train.max_steps=4",
    "train.eval_interval=2",
    "train.log_interval=1",
]


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two tiny `highway train` runs (plain and tanh-SDU) on a small text file."""
    root = tmp_path_factory.mktemp("runs")
    (root / "corpus.txt").write_text(PATTERN, encoding="utf-8")
    settings = [f"data.path={root / 'corpus.txt'}", *TINY[1:]]
    out = {}
    for name, gate in (("plain", "none"), ("sdu", "sdu")):
        argv = ["train", *settings, f"model.gate.kind={gate}", "--out", str(root / name)]
        assert cli.main([*argv, "--no-progress"]) == 0
        out[name] = root / name
    return out


def test_eval_and_generate_use_best_and_say_so(runs, tmp_path, capsys) -> None:
    run = tmp_path / "run"
    import shutil

    shutil.copytree(runs["plain"], run)
    model, config, vocab = load_pretrained(run / "checkpoint")
    with torch.no_grad():  # make the last weights visibly different from the best ones
        for p in model.parameters():
            p.add_(0.5)
    save_checkpoint(run / "checkpoint", model, config, vocab)
    results = json.loads((run / "results.json").read_text())

    code, out, err = _run(capsys, "eval", str(run), "--json", "--no-progress")
    assert code == 0 and err.strip() == f"weights: {run / 'best'}"
    assert json.loads(out)["test"]["loss"] == pytest.approx(results["test"]["loss"], rel=1e-6)

    code, out, err = _run(capsys, "eval", str(run), "--json", "--weights", "last", "--no-progress")
    assert code == 0 and err.strip() == f"weights: {run / 'checkpoint'}"
    assert json.loads(out)["test"]["loss"] != pytest.approx(results["test"]["loss"], rel=1e-3)

    argv = ["generate", str(run), "--prompt", "the ", "--tokens", "5", "--seed", "1"]
    code, out, err = _run(capsys, *argv)
    assert code == 0 and err.strip() == f"weights: {run / 'best'}"
    code, echoed, _ = _run(capsys, *argv, "--echo")  # the same seed: the same continuation
    assert code == 0 and echoed == "the " + out
    argv = ["generate", str(run), "--prompt", "the ", "--tokens", "8", "--beams", "2"]
    code, beam_out, _ = _run(capsys, *argv, "--stop", "t")
    assert code == 0 and len(beam_out.rstrip("\n")) <= 8


def test_eval_file_counts_every_symbol_once_and_oov(runs, tmp_path, capsys) -> None:
    text = "the cat sat on the log. Zed the dog.\nsat on the mat. Z"
    path = tmp_path / "mine.txt"
    path.write_text(text, encoding="utf-8")
    argv = [
        "eval",
        str(runs["sdu"]),
        "data.eval_seq_len=512",
        "data.eval_batch_size=1",
        "--file",
        str(path),
        "--json",
    ]
    code, out, _ = _run(capsys, *argv)
    assert code == 0
    score = json.loads(out)
    # a character vocabulary without a line-end symbol: the first symbol is context only
    assert score["symbols"] == len(text) and score["tokens"] == len(text) - 1
    assert score["oov"] == 3  # two 'Z's and the line end: the training text has neither
    model, _, vocab = load_pretrained(runs["sdu"] / "best")
    ids = torch.tensor(vocab.encode(list(text)))
    with torch.no_grad():
        expected = model(ids[None, :-1], targets=ids[None, 1:]).loss.item()
    assert score["loss"] == pytest.approx(expected, rel=1e-5)
    code, out, err = _run(capsys, "eval", str(runs["sdu"]), "--file", str(path))
    assert code == 0 and "bits per character" in out and "3 out of vocabulary" in out
    assert "reading" in err and "scoring" in err  # progress bars on stderr
    assert "\r" not in err and "\x1b[" not in err  # no terminal: plain lines, no cursor codes
    code, quiet, err = _run(capsys, "eval", str(runs["sdu"]), "--file", str(path), "--no-progress")
    assert code == 0 and quiet == out and "scoring" not in err
    code, _, err = _run(capsys, "eval", str(runs["sdu"]), "--file", str(tmp_path / "nope.txt"))
    assert code == 2 and err.splitlines()[-1].startswith("error: cannot read")


def test_from_pretrained_reads_a_run_folders_best_weights(runs) -> None:
    model, _, _ = load_pretrained(runs["sdu"] / "best")
    loaded = LanguageModel.from_pretrained(runs["sdu"] / "best")
    x = torch.randint(0, model.config.vocab_size, (1, 9))
    assert torch.equal(model(x)[0], loaded(x)[0])


def test_compare_two_train_folders(runs, tmp_path, capsys) -> None:
    out = tmp_path / "cmp"
    code, stdout, _ = _run(
        capsys, "compare", str(runs["plain"]), str(runs["sdu"]), "--out", str(out)
    )
    assert code == 0
    assert (out / "convergence.png").stat().st_size > 0
    summary = json.loads((out / "compare.json").read_text())
    assert summary["baseline"] == "plain" and [r["run"] for r in summary["rows"]] == [
        "plain",
        "sdu",
    ]
    plain = summary["rows"][0]
    assert plain["steps_to_target"] is not None and plain["steps"] == 4
    assert plain["periodic_valid_count"] > 0 and plain["final_test_loss"] > 0
    table = (out / "compare.md").read_text()
    assert "| plain |" in table and "| sdu |" in table and "steps to target" in stdout
    argv = ["compare", str(runs["plain"]), str(runs["sdu"]), "--out", str(out), "--baseline", "x"]
    code, _, err = _run(capsys, *argv)
    assert code == 2 and "--baseline 'x'" in err
    code, _, err = _run(capsys, "compare", str(tmp_path), "--out", str(out))
    assert code == 2 and "no validation records" in err


def test_config_lists_every_key_with_default_and_meaning(capsys) -> None:
    from highway_transformer.config.keys import config_keys

    keys = config_keys()
    assert all(meaning for _, _, meaning in keys), [k for k, _, m in keys if not m]
    code, out, _ = _run(capsys, "config", "train")
    assert code == 0
    line = next(line for line in out.splitlines() if line.startswith("train.lr "))
    assert "2.0" in line and "learning rate" in line
    assert all(line.startswith("train.") for line in out.splitlines())
    code, _, err = _run(capsys, "config", "trian")
    assert code == 2 and "choose one of" in err


def test_version_and_help_without_torch(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.startswith("highway ")
    probe = (
        "import sys\n"
        "from highway_transformer import cli\n"
        "for argv in (['--help'], ['train', '--help'], ['config', 'data']):\n"
        "    try:\n"
        "        cli.main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False"


_PROBE = (
    "import sys\n"
    "from highway_transformer import cli\n"
    "code = cli.main(sys.argv[1:])\n"
    "print(code, 'torch' in sys.modules)\n"
)


def _run_probing_torch(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``highway ARGV`` in a fresh interpreter; its last stdout line is the exit code and
    whether torch was imported."""
    return subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, cwd=cwd
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["model.d_modle=8"], "unknown config key under model: 'd_modle'"),
        (["train.lr=abc"], "train.lr must be a number"),
        (["model.dropout=2"], "model.dropout must be >= 0 and < 1"),
        (["--preset", "nope"], "unknown preset 'nope'"),
        (["--config", "missing.yaml"], "missing.yaml does not exist"),
        (["--scale", "hugee"], "unknown scale 'hugee'"),
        (["--preset", "ht-table1/t-l3+sigmoid", "--scale", "tiny", "data.seq_len=0"], "seq_len"),
        (["model.gate.kind=sdux"], "unknown gate 'sdux'"),
        (["model.family=xll"], "unknown model family 'xll'"),
        (["data.corpus=ptb-wrod"], "unknown corpus (data.corpus) 'ptb-wrod'"),
        (["--task", "pixels", "task.dataset=mnsit"], "unknown pixel data set"),
        (["train.strategy=fsdpp"], "unknown training strategy"),
        (["train.device=gpu"], "train.device gpu: use auto, cpu, cuda, cuda:N or mps"),
    ],
)
def test_train_typos_answer_before_torch(argv: list[str], message: str, tmp_path) -> None:
    """A typo in the options or overrides of ``highway train`` is one line, exit 2, and
    torch is never imported (the answer does not wait for it)."""
    done = _run_probing_torch(["train", *argv], tmp_path)
    assert done.stdout.split() == ["2", "False"], done.stderr
    assert done.stderr.startswith("error: ") and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["eval", "missing-run"], "no checkpoint at"),
        (["generate", "missing-run", "--prompt", "a", "--temperature", "-1"], "temperature"),
        (["export", "missing-run", "--format", "hf", "--out", "x"], "missing-run"),
        (["baselines", "--preset", "nope"], "unknown preset 'nope'"),
        (["baselines", "model.gate.kind=sdux"], "unknown gate 'sdux'"),
        (["presets", "nope"], "unknown preset 'nope'"),
        (["config", "trian"], "choose one of"),
        (["demo", "--steps", "0"], "--steps must be >= 1"),
        (["compare", "missing-run", "--out", "x"], "missing-run has no validation records"),
        (["experiments", "ht-tabel1"], "ht-tabel1"),
        (["run", "ht-tabel1"], "ht-tabel1"),
        (["run", "ht-table1", "--scale", "hugee"], "unknown scale 'hugee'"),
        (
            [
                "ab",
                "--row",
                "a=ht-table1/t-l3",
                "--row",
                "b=ht-table1/t-l3",
                "model.gate.kind=sdux",
            ],
            "unknown gate 'sdux'",
        ),
        (["report", "missing-run", "--out", "x"], "missing-run does not exist"),
        (["prune", "missing-run"], "missing-run does not exist"),
    ],
)
def test_every_command_answers_a_typo_before_torch(
    argv: list[str], message: str, tmp_path: Path
) -> None:
    """Each command's mistyped argument is one line, exit 2, with torch never imported."""
    done = _run_probing_torch(argv, tmp_path)
    assert done.stdout.split()[-2:] == ["2", "False"], done.stderr
    error = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(error) == 1 and message in error[0], done.stderr


def test_every_option_has_help() -> None:
    parser = cli.build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name, sub in commands.items():
        for action in sub._actions:
            assert action.help, f"highway {name} {action.option_strings or action.dest}"


def test_data_dir_is_an_alias_of_data_path() -> None:
    from highway_transformer.cli_experiments import parse_run_targets

    parser = cli.build_parser()
    for command in (["train"], ["eval", "RUN"]):
        assert parser.parse_args([*command, "--data-dir", "D"]).data_path == "D"
        assert parser.parse_args([*command, "--data-path", "D"]).data_path == "D"
    for option in ("--data-dir", "--data-path"):
        args = parse_run_targets(parser.parse_args(["run", "ht-table1", option, "D"]))
        assert args.data_path == "D"


def test_unknown_preset_suggests_without_listing_everything(capsys) -> None:
    code, _, err = _run(capsys, "train", "--preset", "ht-table1/t-l3+sigmiod")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "Did you mean 'ht-table1/t-l3+sigmoid'" in err and "`highway presets`" in err
    assert len(err) < 300
