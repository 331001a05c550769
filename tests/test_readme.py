"""The README's examples run as written, with tiny budgets, so they cannot rot.

* Every ```python block is executed verbatim in a fresh folder (they are sized to run in
  seconds on the embedded corpus).
* The command blocks of "The command line", "Tasks" and "Reproducing the papers' tables" are
  executed line by line (``a && b`` as two commands) through ``highway_transformer.cli.main``
  with tiny-budget overrides appended. ``path/to/ptb`` / ``path/to/music`` are the real
  character PTB / Nottingham when ``HIGHWAY_PTB`` / ``HIGHWAY_MUSIC`` (or the data folder
  beside the checkout) hold them, and the commands that need them (and those reading their runs) are
  skipped otherwise; MNIST is replaced by its offline stand-in ``task.dataset=digits``.
  :data:`NOT_RUN` lists the commands never run, each with its reason.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from highway_transformer import cli

README = Path(__file__).resolve().parents[1] / "README.md"
TEXT = README.read_text(encoding="utf-8")
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"  # beside the checkout, if there
PTB = Path(os.environ.get("HIGHWAY_PTB", DATA / "ptb"))
MUSIC = Path(os.environ.get("HIGHWAY_MUSIC", DATA / "music"))
#: README placeholder -> (real folder, whether it holds the data).
REAL_DATA = {
    "path/to/ptb": (PTB, (PTB / "ptb.char.train.txt").is_file()),
    "path/to/music": (MUSIC, (MUSIC / "Nottingham.mat").is_file()),
}
HAS_PTB = REAL_DATA["path/to/ptb"][1]

TINY_TRAIN = [
    "model.d_model=32",
    "model.n_heads=2",
    "model.d_inner=64",
    "data.seq_len=32",
    "data.context=8",
    "data.batch_size=4",
    "data.eval_batch_size=4",
    "data.max_train_tokens=4000",
    "data.max_eval_tokens=600",
    "train.max_steps=2",
    "train.eval_interval=2",
]
#: Tiny budgets for the task runs (every task's model takes these keys).
TINY_TASK = [
    "model.n_layers=1",
    "model.d_model=16",
    "model.d_inner=32",
    "train.max_steps=2",
    "train.eval_interval=2",
    "train.eval_max_tokens=400",  # caps the generated evaluation sets (seq2seq)
]
#: The README sections whose command block is executed.
SECTIONS = ("The command line", "Tasks", "Reproducing the papers' tables")
#: README commands that are never run here, and why.
NOT_RUN = {
    "highway download": "needs the network",
    "highway demo": "takes minutes; tested with a tiny model in test_cli.py",
    "highway run ht-table5/": "needs enwik8 (a 100 MB download)",
}


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", TEXT, re.S)


def section_commands(heading: str) -> list[str]:
    """The ``highway`` commands of the first bash block under ``## heading``."""
    section = TEXT[TEXT.index(f"## {heading}") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None, heading
    lines = [re.split(r"\s#\s", line)[0].strip() for line in block.group(1).splitlines()]
    commands = [part.strip() for line in lines for part in line.split("&&")]
    return [c for c in commands if c.startswith("highway ")]


def cli_commands() -> list[str]:
    return section_commands("The command line")


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_python_block_runs_as_written(index: int, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    code = python_blocks()[index]
    exec(compile(code, f"README.md python block {index + 1}", "exec"), {"__name__": "readme"})


def command_argv(line: str, tiny: list[str]) -> list[str]:
    """The README line as arguments, with ``tiny`` budgets and the real data where needed."""
    argv = shlex.split(line)[1:]
    for placeholder, (folder, _) in REAL_DATA.items():
        argv = [str(folder) if a == placeholder else a for a in argv]
    if "path/to/mnist" in argv:  # the offline stand-in: same task, 8x8 images
        argv.remove("path/to/mnist")
        argv.remove("--data-path")
        argv.append("task.dataset=digits")
    if argv[0] == "run":
        argv = [*argv, *tiny, "--no-progress"]
        if "rt-table1" in argv:
            argv.append("task.dataset=digits")
        if "--seeds" in argv:  # one seed is enough to show the command works
            argv[argv.index("--seeds") + 1] = "1"
    if argv[0] == "train":  # overrides go first: argparse takes them before the options
        more = ["train.max_steps=4"] if "--resume" in argv else []
        argv = ["train", *tiny, *more, *argv[1:], "--no-progress"]
    if argv[0] == "eval" and "--split" in argv and tiny is TINY_TRAIN:
        argv.insert(2, "data.max_eval_tokens=600")
    return argv


def skipped(line: str) -> bool:
    """Never run (:data:`NOT_RUN`), or needs real data this machine lacks."""
    if line.startswith(tuple(NOT_RUN)):
        return True
    if any(p in line and not present for p, (_, present) in REAL_DATA.items()):
        return True
    if line.split()[1] in ("eval", "generate", "compare", "report", "prune"):
        needed = [a for a in shlex.split(line) if a.startswith("runs/")]
        return not all(Path(a).is_dir() for a in needed)  # its training line was skipped
    return False


def run_commands(commands: list[str], tiny: list[str], capsys) -> list[str]:
    """Run each command that is not skipped; the ones that ran."""
    ran = []
    for line in commands:
        if skipped(line):
            continue
        code = cli.main(command_argv(line, tiny))
        output = capsys.readouterr()
        assert code == 0, f"{line}\n{output.err}"
        ran.append(line)
    return ran


def test_every_command_not_run_is_in_the_readme() -> None:
    commands = [c for h in SECTIONS for c in section_commands(h)]
    for prefix in NOT_RUN:
        assert any(c.startswith(prefix) for c in commands), prefix


def test_command_line_block_runs(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_text.txt").write_text("the cat sat on the mat.\nthe dog.\n", encoding="utf-8")
    commands = cli_commands()
    assert any(c.startswith("highway compare") for c in commands)
    assert len(run_commands(commands, TINY_TRAIN, capsys)) >= 3
    if HAS_PTB:
        assert (tmp_path / "reports/t-l3/compare.md").is_file()


def test_tasks_block_runs(tmp_path, monkeypatch, capsys) -> None:
    pytest.importorskip("sklearn")  # the digits data
    monkeypatch.chdir(tmp_path)
    ran = run_commands(section_commands("Tasks"), TINY_TASK, capsys)
    offline = ("digits/", "rt-table1/", "--task copy", "--task adding", "seq2seq/", "--resume")
    assert all(any(word in line for line in ran) for word in offline)
    assert (tmp_path / "runs/copy/checkpoint").is_dir()
    assert (tmp_path / "report/index.md").is_file()  # run rt-table1 && report


def test_experiments_block_runs(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    ran = run_commands(section_commands("Reproducing the papers' tables"), TINY_TRAIN, capsys)
    assert ran[0] == "highway experiments"
    if HAS_PTB:
        assert len(ran) == 6 and ran[-1].startswith("highway baselines")
        assert ran[2].endswith("--plan")
        index = (tmp_path / "reports/table1/index.md").read_text(encoding="utf-8")
        assert "## Lines to beat" in index and "| trigram |" in index
