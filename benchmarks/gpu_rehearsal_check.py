"""The verdict of ``benchmarks/gpu_rehearsal.sh``: did the device command, run against the
CUDA stub, get every step of the GPU check as far as its first CUDA call, and would what it
wrote come back from the GPU machine?

Checks, each a line when it fails, then one verdict line (exit 0: PASS, 1: FAIL):

- every step the plan lists ran (none skipped) and its log shows it reached CUDA, with no
  import, argument or collection error before that (pytest steps: tests were collected, and
  every failure is a CUDA one);
- what landed in ``--out`` comes back: at most 8 files, 16 MiB each and 64 MiB together, at
  most 2 folders down, plain names, ``gpu_check.json`` among them;
- the tree that travels (the carried paths included) is at most 64 MiB;
- the headline steps' limits, the preamble and the reserve fit the check's budget, and the
  budget plus the install and copy fit the device command's limit (:data:`COMMAND_LIMIT`);
- the rehearsal's interpreter lacks what the GPU image lacks.

Standard library only: it runs under the host's Python.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

#: The device command's time limit (docs/gpus.md): the check's budget plus the wheels'
#: install and the copy back.
COMMAND_LIMIT = 520
#: Seconds kept for installing the carried wheels and writing the archive back.
INSTALL_AND_COPY = 40
MIB = 1 << 20
MAX_FILES, MAX_FILE, MAX_TOTAL, MAX_DEPTH, MAX_TREE = 8, 16 * MIB, 64 * MIB, 2, 64 * MIB
NAME = re.compile(r"^[A-Za-z0-9._-]+$")
PYTEST_STEPS = ("kernel_tests", "device_tests", "device_compiled_tests")


def _stub_mark() -> str:
    """The mark the CUDA stub raises, read from the stub itself (inactive without its
    environment variable, so loading it only defines the mark)."""
    path = Path(__file__).resolve().parent / "cuda_stub" / "sitecustomize.py"
    spec = importlib.util.spec_from_file_location("_cuda_stub", path)
    assert spec is not None and spec.loader is not None
    stub = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stub)
    return stub.MARK


#: What a first CUDA call says here: the stub's mark, or torch's and Triton's own words.
REACHED_CUDA = re.compile(
    re.escape(_stub_mark()) + r"|Found no NVIDIA driver|No CUDA GPUs are available|"
    r"Torch not compiled with CUDA|0 active drivers|no CUDA-capable device"
)
#: What fails a step before CUDA.
BEFORE_CUDA = re.compile(
    r"ModuleNotFoundError|ImportError|No module named|error: (unrecognized )?argument|"
    r"error: the following arguments|ERROR collecting|SyntaxError|can't open file"
)
_COLLECTED = re.compile(r"collected (\d+) items?")


def check_returned_files(out: Path) -> tuple[list[str], list[str]]:
    """Problems with what would come back from ``out``, and the files' names."""
    problems, names, total = [], [], 0
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        relative = path.relative_to(out)
        names.append(str(relative))
        total += path.stat().st_size
        if len(relative.parts) - 1 > MAX_DEPTH:
            problems.append(f"{relative} is more than {MAX_DEPTH} folders down: it stays there")
        if not all(NAME.match(part) for part in relative.parts):
            problems.append(f"{relative}: a name the copy back refuses")
        if path.stat().st_size > MAX_FILE:
            problems.append(f"{relative} is over 16 MiB: it stays there")
    if len(names) > MAX_FILES:
        problems.append(f"{len(names)} files in OUT: only {MAX_FILES} come back")
    if total > MAX_TOTAL:
        problems.append(f"{total / MIB:.1f} MiB in OUT: only 64 MiB come back")
    if "gpu_check.json" not in names:
        problems.append("gpu_check.json is not among the files that come back")
    return problems, names


def tree_size(tree: Path) -> int:
    return sum(p.stat().st_size for p in tree.rglob("*") if p.is_file() and not p.is_symlink())


def read_plan(tree: Path) -> tuple[dict[str, int], list[tuple[str, int, str]]]:
    """``GPU_CHECK_PLAN=1 gpu_check.sh``: the budget's parts and each (step, limit, role)."""
    env = {**os.environ, "GPU_CHECK_PLAN": "1"}
    text = subprocess.run(
        ["bash", str(tree / "benchmarks" / "gpu_check.sh")], env=env, capture_output=True,
        text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    budget, steps = {}, []
    for line in text.splitlines():
        kind, *fields = line.split("\t")
        if kind == "budget":
            budget = dict(zip(("budget", "reserve", "preamble"), map(int, fields), strict=True))
        elif kind == "step":
            steps.append((fields[0], int(fields[1]), fields[2]))
    return budget, steps


def check_limits(budget: dict[str, int], steps: list[tuple[str, int, str]]) -> list[str]:
    problems = []
    headline = sum(limit for _, limit, role in steps if role == "headline")
    needed = headline + budget["preamble"] + budget["reserve"]
    if needed > budget["budget"]:
        problems.append(
            f"the headline steps' limits ({headline} s) with the preamble and reserve "
            f"({needed} s) exceed the {budget['budget']} s budget: some would be cut"
        )
    if budget["budget"] + INSTALL_AND_COPY > COMMAND_LIMIT:
        problems.append(
            f"the {budget['budget']} s budget and {INSTALL_AND_COPY} s of install and copy "
            f"exceed the device command's {COMMAND_LIMIT} s limit"
        )
    return problems


def check_pytest(text: str, junit: Path) -> str | None:
    """Why a pytest step did not reach CUDA cleanly: no tests collected, an import or
    collection error, or a test that failed for another reason than CUDA's absence."""
    collected = _COLLECTED.search(text)
    if not collected or int(collected.group(1)) == 0:
        return "pytest collected no tests"
    if BEFORE_CUDA.search(text):
        return f"an error before CUDA: {BEFORE_CUDA.search(text).group(0)}"
    try:
        cases = ET.parse(junit).getroot().iter("testcase")
    except (OSError, ET.ParseError):
        return "pytest wrote no JUnit file"
    for case in cases:
        for outcome in (*case.iter("failure"), *case.iter("error")):
            said = f"{outcome.get('message', '')} {outcome.text or ''}"
            if not REACHED_CUDA.search(said):
                return f"{case.get('name')} failed for another reason: {said.strip()[:200]}"
    return None


def check_log(name: str, text: str, junit: Path) -> str | None:
    """Why step ``name`` did not reach CUDA cleanly (None: it did)."""
    if name in PYTEST_STEPS:
        return check_pytest(text, junit)
    reached = REACHED_CUDA.search(text)
    if not reached:
        early = BEFORE_CUDA.search(text)
        return f"never reached CUDA{f' ({early.group(0)})' if early else ''}"
    early = BEFORE_CUDA.search(text[: reached.start()])
    return f"an error before CUDA: {early.group(0)}" if early else None


def check_steps(out: Path, plan: list[tuple[str, int, str]]) -> tuple[list[str], int]:
    """Problems with the steps' outcomes and logs, and how many steps reached CUDA."""
    summary = json.loads((out / "gpu_check.json").read_text(encoding="utf-8"))
    outcomes = {step["step"]: step for step in summary["steps"]}
    problems, reached = [], 0
    with tempfile.TemporaryDirectory() as scratch:
        archive = out / "gpu_check_logs.tgz"
        if not archive.is_file():
            return ["gpu_check_logs.tgz did not come back: no step's log can be read"], 0
        with tarfile.open(archive) as tar:
            tar.extractall(scratch, filter="data")
        for name, _, _ in plan:
            outcome = outcomes.get(name)
            if outcome is None or outcome["status"] == "skipped":
                why = outcome["note"] if outcome else "not run"
                problems.append(f"{name}: skipped ({why})")
                continue
            log = Path(scratch) / "gpu_check" / f"{name}.log"
            text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
            why = check_log(name, text, log.with_suffix(".xml"))
            if why:
                problems.append(f"{name}: {why}")
            else:
                reached += 1
    return problems, reached


def check_interpreter(python: str, absent: list[str]) -> list[str]:
    modules = [name.replace("-", "_") for name in absent]
    code = (
        "import importlib.util, sys\n"
        f"found = [m for m in {modules!r} if importlib.util.find_spec(m)]\n"
        "print(','.join(found))"
    )
    found = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    return [f"the rehearsal's Python has {found}, which the GPU image lacks"] if found else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, required=True, help="the copy that travelled")
    parser.add_argument("--out", type=Path, required=True, help="the device command's OUT")
    parser.add_argument("--command-status", type=int, required=True)
    parser.add_argument("--venv-python", required=True)
    parser.add_argument("--absent", nargs="*", default=[])
    parser.add_argument("--carry", nargs="*", default=[])
    args = parser.parse_args(argv)

    problems = []
    if args.command_status not in (0, 1):  # 1: headline steps failed, as they do on a stub
        problems.append(f"the device command exited {args.command_status}: it did not run")
    returned, names = check_returned_files(args.out)
    problems += returned
    size = tree_size(args.tree)
    if size > MAX_TREE:
        problems.append(f"the tree that travels is {size / MIB:.1f} MiB: over 64 MiB")
    budget, plan = read_plan(args.tree)
    problems += check_limits(budget, plan)
    reached = 0
    if "gpu_check.json" in names:
        found, reached = check_steps(args.out, plan)
        problems += found
    problems += check_interpreter(args.venv_python, args.absent)
    for problem in problems:
        print(f"  - {problem}")
    headline = sum(limit for _, limit, role in plan if role == "headline")
    figures = (
        f"{reached} of {len(plan)} steps reached CUDA; {len(names)} file(s) back "
        f"({', '.join(names)}); {size / MIB:.1f} of 64 MiB carried "
        f"({' '.join(args.carry)} included); headline limits {headline} s + "
        f"{budget['preamble'] + budget['reserve']} s of the {budget['budget']} s budget, "
        f"command {budget['budget']} + {INSTALL_AND_COPY} s of {COMMAND_LIMIT} s"
    )
    verdict = "PASS" if not problems else f"FAIL ({len(problems)} problem(s) above)"
    print(f"gpu rehearsal: {verdict}: {figures}")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
