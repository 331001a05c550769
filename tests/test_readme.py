"""The documentation's examples run as written, with tiny budgets, so they cannot rot.

The pages are ``README.md`` and every page of ``docs/`` (:data:`PAGES`); ``docs/results/``
is left out: its pages are reports of runs that took hours, and their commands are the record
of how each report was made.

* Every ```python block is executed verbatim in a fresh folder (they are sized to run in
  seconds on the embedded corpus). A block that trains (calls ``train(...)``) names its config
  ``cfg`` and its results ``results``, and must end below the bigram model of its own data
  (valid and test): an example that stays on the unigram plateau teaches settings that do
  not learn. The page states the bigram's test bpc, checked here to the digits it gives.
* Every ```bash block is read line by line (``\\`` continuations joined, ``# comments``
  dropped, ``a && b`` as two commands). The ``highway`` commands of all pages run through
  ``highway_transformer.cli.main`` in one folder, page by page in order, with tiny-budget
  overrides appended; a command that an earlier page already ran is not run again (its run
  is reused). ``path/to/ptb`` / ``path/to/music`` are the real character PTB / Nottingham when
  ``HIGHWAY_PTB`` / ``HIGHWAY_MUSIC`` (or the data folder beside the checkout) hold them, and
  the commands that need them (and those reading their runs) are skipped otherwise; MNIST is
  replaced by its offline stand-in ``task.dataset=digits``; ``my_text.txt`` and
  ``my_corpus.txt`` are small files written for the run.
* Every other command (``make``, ``torchrun``, the benchmarks) and the ``highway`` commands
  that are never run are in :data:`NOT_RUN`, each with its reason; a documented command that
  is neither run nor listed there fails the test, and so does a listed one no page has.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
from functools import cache
from pathlib import Path

import pytest
import yaml

from highway_transformer import cli, get_preset

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: Documentation pages whose examples are run, README first (later pages reuse its runs).
PAGES = [ROOT / "README.md"] + sorted(
    p for p in DOCS.rglob("*.md") if p.relative_to(DOCS).parts[0] != "results"
)
DATA = ROOT.parent / "shared" / "data"  # beside the checkout, if there
PTB = Path(os.environ.get("HIGHWAY_PTB", DATA / "ptb"))
MUSIC = Path(os.environ.get("HIGHWAY_MUSIC", DATA / "music"))
#: Placeholder -> (real folder, whether it holds the data).
REAL_DATA = {
    "path/to/ptb": (PTB, (PTB / "ptb.char.train.txt").is_file()),
    "path/to/music": (MUSIC, (MUSIC / "Nottingham.mat").is_file()),
}
HAS_PTB = REAL_DATA["path/to/ptb"][1]
#: Files the examples name, written into the folder they run in.
TEXT_FILES = {
    "my_text.txt": "the cat sat on the mat.\nthe dog.\n",
    "my_corpus.txt": "".join(
        f"line {i}: the quick brown fox jumps over the lazy dog, {i % 7} times.\n"
        for i in range(400)
    ),
}

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
#: Tiny budgets for the other tasks' runs (every task's model takes these keys).
TINY_TASK = [
    "model.n_layers=1",
    "model.d_model=16",
    "model.d_inner=32",
    "train.max_steps=2",
    "train.eval_interval=2",
    "train.eval_max_tokens=400",  # caps the generated evaluation sets (seq2seq)
]
#: Documented commands that are never run here (by prefix), and why.
NOT_RUN = {
    "make demo": "installs the environment and trains for minutes; `highway demo` is tested "
    "with a tiny model in test_cli.py",
    "make test": "runs this test suite",
    "highway download": "needs the network",
    'highway ab --row "plain=rt-table2/rtransformer" --row '
    '"sigmoid=rt-table2/rtransformer+sigmoid" task.dataset=path/to/JSB_heldout.mat': "needs "
    "a re-split JSB file of one's own; the same A/B on the published JSB file runs above",
    "highway demo": "takes minutes; tested with a tiny model in test_cli.py, and "
    "`highway demo --tiny` from an installed wheel in test_wheel.py",
    "highway run ht-table5/": "needs enwik8 (a 100 MB download)",
    "highway train --preset ht-table1/t-l3+sigmoid data.path=DIR --nproc": "starts 4 "
    "processes; test_distributed.py runs `highway train --nproc 2`",
    "highway train --nproc 2 --max-restarts": "starts 2 processes on PTB; "
    "test_distributed.py kills a rank of the same command and checks the restarted run",
    "python -m highway_transformer.hf.lm_eval": "lm-eval's command line: "
    "tests/test_hf.py runs it on a local task",
    "torchrun": "starts several processes, or needs two machines; test_distributed.py runs "
    "the same launcher with 2 processes",
    "highway run ht-table1 --scale paper --seeds 3 --launcher slurm": "needs a Slurm "
    "cluster; test_distributed.py runs the same jobs with --launcher submitit-local",
    "highway run ht-table1 --scale paper --seeds 3 --device cuda": "needs a CUDA device; "
    "tests/experiments/test_packing.py runs its memory check with the CUDA query replaced",
    "bash benchmarks/gpu_check.sh": "needs a GPU and minutes; tests/test_gpu_check.py checks "
    "the script (valid bash, the options it passes, its refusal without CUDA, its summary)",
    "bash benchmarks/gpu_rehearsal.sh": "builds a 5 GB venv of the GPU image's software; "
    "tests/test_gpu_check.py checks its verdict's rules, the plan and the imports",
    "bash benchmarks/gpu_device_command.sh": "the command for the GPU machine (the rehearsal "
    "runs it against a CUDA stub)",
    "bash benchmarks/fetch_wheels.sh": "downloads from PyPI; tests/test_gpu_check.py checks "
    "its pins' form",
    "bash benchmarks/fetch_reference.sh": "downloads from GitHub; tests/test_gpu_check.py "
    "checks that it keeps nothing whose SHA-256 differs",
    ".venv/bin/python benchmarks/": "a benchmark measures for minutes; its figures are the "
    "JSON under docs/benchmarks/, and test_benchmarks.py checks that its variants agree",
    "python benchmarks/": "a benchmark measures for minutes (see .venv/bin/python benchmarks/)",
    "python -m pytest tests/test_device.py": "the accelerator tests themselves; they skip "
    "where torch sees no GPU",
    "python -m pytest tests/nn/kernels/test_relative_triton.py": "a test file of this suite "
    "(through Triton's interpreter where torch sees no GPU)",
    "python -m build": "tested by tests/test_wheel.py (with --no-isolation, on a copy of the "
    "checkout)",
    "pip install dist/highway_transformer-": "tested by tests/test_wheel.py (into a fresh "
    "virtual environment)",
}


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def blocks(page: Path, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", page.read_text(encoding="utf-8"), re.S)


def commands(page: Path) -> list[str]:
    """Every command of the page's bash blocks, in order."""
    found = []
    for block in blocks(page, "bash"):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = re.split(r"(?:^|\s)#\s", line)[0].strip()
            found += [part.strip() for part in line.split("&&") if part.strip()]
    return found


def not_run_reason(line: str) -> str | None:
    return next((why for prefix, why in NOT_RUN.items() if line.startswith(prefix)), None)


@cache
def preset_names() -> tuple[str, ...]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["presets"]) == 0
    return tuple(line.split()[0] for line in out.getvalue().splitlines() if line.strip())


def task_of(name: str) -> set[str]:
    """The tasks of a preset, or of a table's presets (``rt-table1`` -> its rows)."""
    names = [n for n in preset_names() if n == name or n.startswith(f"{name}/")]
    return {get_preset(n).task.name for n in names} or {"lm"}


def tiny_for(argv: list[str]) -> list[str]:
    """The tiny budget for a ``train`` or ``run`` command: the language model's, or the other
    tasks' where every model it trains is another task's."""
    if "--task" in argv:
        tasks = {argv[argv.index("--task") + 1]}
    elif "--preset" in argv:
        tasks = task_of(argv[argv.index("--preset") + 1])
    elif argv[0] == "run":
        names = [a for a in argv[1:] if not a.startswith("-") and "=" not in a]
        tasks = set().union(*(task_of(n) for n in names)) if names else {"lm"}
    elif argv[0] == "ab":  # the preset of each --row NAME=SPEC
        specs = [argv[i + 1].split("=", 1)[1].split() for i, a in enumerate(argv) if a == "--row"]
        tasks = set().union(*(task_of(s[0]) for s in specs if s and "=" not in s[0])) or {"lm"}
    else:
        tasks = {"lm"}
    return TINY_TRAIN if tasks == {"lm"} else TINY_TASK


def run_task(folder: Path) -> str:
    config = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
    return (config.get("task") or {}).get("name", "lm")


def command_argv(line: str) -> list[str]:
    """The documented line as arguments, with tiny budgets and the real data where needed."""
    argv = shlex.split(line)[1:]
    for placeholder, (folder, _) in REAL_DATA.items():
        argv = [str(folder) if a == placeholder else a for a in argv]
    if "path/to/mnist" in argv:  # the offline stand-in: same task, 8x8 images
        argv.remove("path/to/mnist")
        argv.remove("--data-path")
        argv.append("task.dataset=digits")
    tiny = tiny_for(argv) if argv[0] in ("train", "run", "ab") else []
    if argv[0] == "ab":  # the tiny budget for every row; seeds as documented
        argv = [*argv, *tiny, "--no-progress"]
    if argv[0] in ("run", "ab") and "--jobs" in argv:  # runs inline: the tiny runs' process
        argv[argv.index("--jobs") + 1] = "1"  # starts cost more than their training; the
        # parallel runner has its own tests (tests/experiments/test_runner.py)
    if argv[0] == "run":
        argv = [*argv, *tiny, "--no-progress"]
        if any(a.startswith("rt-table1") for a in argv):
            argv.append("task.dataset=digits")
        if "--seeds" in argv:  # one seed is enough to show the command works
            argv[argv.index("--seeds") + 1] = "1"
    if argv[0] == "train":  # overrides go first: argparse takes them before the options
        more = ["train.max_steps=4"] if "--resume" in argv else []
        argv = ["train", *tiny, *more, *argv[1:], "--no-progress"]
    if argv[0] == "eval" and "--split" in argv and run_task(Path(argv[1])) == "lm":
        argv.insert(2, "data.max_eval_tokens=600")
    return argv


def skip_reason(line: str) -> str | None:
    """Why a ``highway`` command is not run here (None: it runs)."""
    if reason := not_run_reason(line):
        return reason
    for placeholder, (_, present) in REAL_DATA.items():
        if placeholder in line and not present:
            return f"no {placeholder} data here (HIGHWAY_PTB / HIGHWAY_MUSIC)"
    if line.split()[1] in ("eval", "generate", "export", "compare", "report", "prune"):
        missing = [a for a in shlex.split(line) if a.startswith("runs/") and not Path(a).is_dir()]
        if missing:
            return f"reads {missing[0]}, whose training was skipped"
    return None


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """Run every page's ``highway`` commands in one folder; each line's outcome: ``"ran"``,
    ``"skipped: why"`` or ``"failed: ..."``."""
    folder = tmp_path_factory.mktemp("docs")
    for name, text in TEXT_FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    done: dict[str, str] = {}
    before = Path.cwd()
    os.chdir(folder)
    try:
        for page in PAGES:
            for line in commands(page):
                if line in done or not line.startswith("highway "):
                    continue
                if reason := skip_reason(line):
                    done[line] = f"skipped: {reason}"
                    continue
                out, err = io.StringIO(), io.StringIO()
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    code = cli.main(command_argv(line))
                tail = " | ".join(err.getvalue().strip().splitlines()[-3:])
                done[line] = "ran" if code == 0 else f"failed: exit {code}: {tail}"
    finally:
        os.chdir(before)
    return folder, done


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_documented_command_runs_or_says_why_not(page: Path, outcomes) -> None:
    _, done = outcomes
    for line in commands(page):
        if line.startswith("highway "):
            assert not done[line].startswith("failed"), f"{_name(page)}: {line}\n{done[line]}"
        else:
            assert not_run_reason(line), f"{_name(page)}: add to NOT_RUN with a reason: {line}"


def test_every_not_run_entry_is_documented() -> None:
    documented = [c for page in PAGES for c in commands(page)]
    for prefix in NOT_RUN:
        assert any(c.startswith(prefix) for c in documented), prefix


def test_the_documented_commands_did_their_work(outcomes) -> None:
    folder, done = outcomes
    ran = [line for line, outcome in done.items() if outcome == "ran"]
    assert "highway experiments" in ran and "highway config train" in ran
    offline = ("--task lm", "digits/", "--task copy", "--task adding", "seq2seq/", "--resume")
    assert all(any(word in line for line in ran) for word in offline)
    assert (folder / "runs/copy/checkpoint").is_dir()
    assert (folder / "report/index.md").is_file()  # run rt-table1 && report
    if REAL_DATA["path/to/music"][1]:  # README's highway ab, on JSB at the quick recipe
        assert (folder / "runs/ab/report/quick/index.md").is_file()
    if HAS_PTB:
        assert (folder / "reports/t-l3/compare.md").is_file()
        assert any(line.endswith("--plan") for line in ran)
        index = (folder / "reports/table1/index.md").read_text(encoding="utf-8")
        assert "## Lines to beat" in index and "| trigram |" in index


PYTHON_BLOCKS = [(page, i) for page in PAGES for i in range(len(blocks(page, "python")))]


@pytest.mark.parametrize(
    ("page", "index"), PYTHON_BLOCKS, ids=[f"{_name(p)}-{i + 1}" for p, i in PYTHON_BLOCKS]
)
def test_python_block_runs_as_written(page: Path, index: int, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    code = blocks(page, "python")[index]
    name = f"{_name(page)} python block {index + 1}"
    namespace = {"__name__": "docs_example"}
    exec(compile(code, name, "exec"), namespace)
    if trains(code):
        assert_beats_the_bigram(page, namespace["cfg"], namespace["results"])


def trains(code: str) -> bool:
    """Whether a Python example calls ``train(...)`` (not a module's ``.train()``)."""
    return re.search(r"(?<![.\w])train\(", code) is not None


def assert_beats_the_bigram(page: Path, config, results: dict) -> None:
    """The example's final valid and test bpc are below the bigram model's on the same splits,
    and the page states the bigram's test bpc."""
    from highway_transformer.tasks import task_baselines

    bigram = task_baselines(config)["bigram"]
    for split in ("valid", "test"):
        assert results[split]["bpc"] < bigram[split]["bpc"], (split, results[split], bigram)
    stated = f"{bigram['test']['bpc']:.3f} bpc"
    assert stated in page.read_text(encoding="utf-8"), f"{_name(page)} should state {stated}"


def test_some_python_example_trains() -> None:
    assert any(trains(blocks(page, "python")[i]) for page, i in PYTHON_BLOCKS)
