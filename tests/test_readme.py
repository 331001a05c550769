"""The README's examples run as written, with tiny budgets, so they cannot rot.

* Every ```python block is executed verbatim in a fresh folder (they are sized to run in
  seconds on the embedded corpus).
* The command-line block of "The command line" is executed line by line through
  ``highway_transformer.cli.main``; training commands get tiny-budget overrides appended,
  ``path/to/ptb`` is the real character PTB when ``HIGHWAY_PTB`` (or the shared data folder)
  holds it — the commands that need it are skipped otherwise — and only ``download``
  (network) and ``demo`` (minutes; tested with a tiny model in test_cli.py) are not run.
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
PTB = Path(os.environ.get("HIGHWAY_PTB", "/work/shared/data/ptb"))
HAS_PTB = (PTB / "ptb.char.train.txt").is_file()

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
NOT_RUN = ("highway download", "highway demo")


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", TEXT, re.S)


def cli_commands() -> list[str]:
    section = TEXT[TEXT.index("## The command line") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    lines = [re.split(r"\s#\s", line)[0].strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line.startswith("highway ")]


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_python_block_runs_as_written(index: int, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    code = python_blocks()[index]
    exec(compile(code, f"README.md python block {index + 1}", "exec"), {"__name__": "readme"})


def command_argv(line: str) -> list[str]:
    """The README line as arguments, with tiny budgets and the real data where needed."""
    argv = shlex.split(line)[1:]
    argv = [str(PTB) if a == "path/to/ptb" else a for a in argv]
    if argv[0] == "train":  # overrides go first: argparse takes them before the options
        more = ["train.max_steps=4"] if "--resume" in argv else []
        argv = ["train", *TINY_TRAIN, *more, *argv[1:], "--no-progress"]
    if argv[0] == "eval" and "--split" in argv:
        argv.insert(2, "data.max_eval_tokens=600")
    return argv


def test_command_line_block_runs(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_text.txt").write_text("the cat sat on the mat.\nthe dog.\n", encoding="utf-8")
    commands = cli_commands()
    assert any(c.startswith("highway compare") for c in commands)
    ran = 0
    for line in commands:
        if line.startswith(NOT_RUN) or ("path/to/ptb" in line and not HAS_PTB):
            continue
        if "runs/" in line and line.split()[1] in ("eval", "generate", "compare"):
            needed = [a for a in shlex.split(line) if a.startswith("runs/")]
            if not all(Path(a).is_dir() for a in needed):
                continue  # its training line needs the real data
        code = cli.main(command_argv(line))
        output = capsys.readouterr()
        assert code == 0, f"{line}\n{output.err}"
        ran += 1
    assert ran >= 3
    if HAS_PTB:
        assert (tmp_path / "reports/t-l3/compare.md").is_file()
