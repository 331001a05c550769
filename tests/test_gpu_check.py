"""``benchmarks/gpu_check.sh``, the one prepared GPU check: valid bash, every benchmark it
calls accepts the options it passes, it refuses to start without CUDA, its summary computes
the headline ratios from the steps' records, and the Transformer-XL reference benchmark runs
on the CPU at a tiny shape (where the reference code is present)."""

from __future__ import annotations

import argparse
import json
import os
import re
import runpy
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_train_step as step_bench  # noqa: E402
import gpu_check_summary as summary  # noqa: E402
import gpu_rehearsal_check as rehearsal  # noqa: E402

from highway_transformer.presets import get_preset  # noqa: E402
from highway_transformer.validation import build_config  # noqa: E402


def _env(**extra: str) -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    src = str(ROOT / "src") + (os.pathsep + path if path else "")
    return {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": src, **extra}


def test_the_script_is_valid_bash() -> None:
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_it_refuses_to_start_without_cuda(tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(SCRIPT)],
        env=_env(CUDA_VISIBLE_DEVICES="", OUT=str(tmp_path)),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stdout == "" and len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith("gpu_check: torch sees no CUDA device here")
    assert not any(tmp_path.iterdir())  # nothing written


def test_it_refuses_an_interpreter_without_torch(tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(SCRIPT)], env=_env(PYTHON="/bin/false", OUT=str(tmp_path)),
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert "PYTHON=/bin/false cannot import torch" in done.stderr
    assert not any(tmp_path.iterdir())


def test_the_plan_puts_the_headline_first_within_the_budget() -> None:
    """``GPU_CHECK_PLAN=1``: every step with its limit, runs nothing; the headline steps come
    first, and their limits with the preamble and reserve fit the budget, which with the
    install and copy fits the device command's limit."""
    budget, steps = rehearsal.read_plan(ROOT)
    assert rehearsal.check_limits(budget, steps) == []
    roles = [role for _, _, role in steps]
    assert roles == sorted(roles, key=lambda role: role != "headline")  # headline first
    names = [name for name, _, _ in steps]
    assert names[0] == "kernel_tests" and "device_compiled_tests" in names
    assert rehearsal.check_limits({**budget, "budget": 300}, steps)  # too small: said so


def test_no_module_on_the_checks_paths_needs_what_the_gpu_image_lacks() -> None:
    """The GPU machine has no platformdirs, submitit, x-transformers, lm-eval or mkdocs:
    the check's modules import with those refused (each is imported where it is used)."""
    code = f"""
import importlib.abc, sys
ABSENT = {{"platformdirs", "submitit", "x_transformers", "lm_eval", "mkdocs"}}
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ABSENT:
            raise ModuleNotFoundError(f"No module named {{name!r}}")
sys.meta_path.insert(0, Refuse())
sys.path[:0] = [{str(ROOT / "benchmarks")!r}, {str(ROOT / "tests")!r}]
import conftest, highway_transformer.training.trainer, highway_transformer.cli
import bench_train_step, bench_fused_relative, bench_xl_reference, bench_vs_xtransformers
import gpu_check_summary
"""
    done = subprocess.run(
        [sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]


def benchmark_calls(dest: str) -> list[list[str]]:
    """Each ``"$PYTHON" benchmarks/NAME.py ARGS`` the script runs, as an argv, with
    ``$DEST`` as ``dest`` and ``${TRAIN[@]}`` expanded."""
    text = SCRIPT.read_text(encoding="utf-8").replace("\\\n", " ")
    arrays = dict(re.findall(r"^(\w+)=\((.*?)\)", text, re.S | re.M))
    assert "TRAIN" in arrays
    calls = []
    for line in text.splitlines():
        line = line.split(" > ", 1)[0]
        for name, words in arrays.items():
            line = line.replace(f'"${{{name}[@]}}"', " ".join(words.split()))
        found = re.search(r'"\$PYTHON" (benchmarks/\S+\.py.*)$', line)
        if found:
            calls.append(shlex.split(found.group(1).replace("$DEST", dest)))
    return calls


class _Parsed(Exception):
    pass


def test_every_benchmark_it_calls_accepts_its_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = benchmark_calls(str(tmp_path))
    names = {Path(argv[0]).name for argv in calls}
    assert {"bench_train_step.py", "bench_xl_reference.py", "bench_vs_xtransformers.py",
            "gpu_check_summary.py"} <= names  # fmt: skip
    original = argparse.ArgumentParser.parse_args

    def parse_only(self: argparse.ArgumentParser, args=None, namespace=None):  # noqa: ANN001, ANN202
        raise _Parsed(original(self, args, namespace))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_only)
    checked = 0
    for argv in calls:
        path = ROOT / argv[0]
        if path.name == "gpu_check_summary.py":
            assert summary.main(argv[1:]) == 0  # an empty folder: every figure missing
            continue
        if not path.is_file():  # bench_fused_relative.py: the script skips it when absent
            continue
        monkeypatch.setattr(sys, "argv", [str(path), *argv[1:]])
        with pytest.raises(_Parsed) as parsed:
            runpy.run_path(str(path), run_name="__main__")
        checked += 1
        if path.name == "bench_train_step.py":  # each preset's config as the child builds it
            args = parsed.value.args[0]
            (args.precision,) = args.precision  # one precision a run, as the child gets it
            for preset in args.presets:  # a refused setting (fused SGD) fails here
                settings = step_bench.overrides(args, 3 * args.window, args.window)
                build_config(get_preset(preset), overrides=settings)
    assert checked >= 8
    written = json.loads((tmp_path / "gpu_check.json").read_text(encoding="utf-8"))
    assert written["headline"]["xl_eval_peak_memory"]["value"] is None


def _train_record(runs: list[tuple[str, float, float]], peak: float = 1e12) -> dict:
    """A bench_train_step.py record: (preset, tokens/s, FLOPs per token) per preset."""
    return {
        "machine": {"device": "cuda", "gpu": "test"},
        "results": {
            "matmul_peak_flops": {"bf16": peak},
            "runs": [
                [p, "bf16", [{"rates": [r, r], "flops_per_token": f, "peak_mib": 1.0}]]
                for p, r, f in runs
            ],
        },
    }


def test_the_summary_computes_the_headline_ratios(tmp_path: Path) -> None:
    def write(stem: str, record: dict) -> None:
        (tmp_path / f"{stem}.json").write_text(json.dumps(record), encoding="utf-8")

    xl, sigma = "ht-table5/l6-xl", "ht-table5/l6-xl+sigmoid"
    write("train_eager_l6-xl", _train_record([(xl, 100.0, 1e9), (sigma, 80.0, 1.25e9)]))
    write("train_compiled_l6-xl", _train_record([(xl, 150.0, 1e9)]))
    write("train_compiled_l6-xl_sigmoid", _train_record([(sigma, 120.0, 1.25e9)]))
    write("train_eager_t-l3", _train_record([("ht-table1/t-l3", 1000.0, 1e8)]))
    rates = {"ours": 900.0, "x-transformers": 600.0, "x-transformers flash": 1800.0}
    write("vs_xtransformers", {"results": {"tokens_per_second": rates, "mfu": {"ours": 0.05}}})
    write("xl_reference", {"results": {
        "tokens_per_second": {"ours": 100.0, "reference MemTransformerLM": 50.0},
        "ours_over_reference": 2.0, "peak_mib": {"ours": 10.0}, "flops_per_token": 1e9,
        "matmul_peak_flops": 1e12,
    }})  # fmt: skip
    write("fused_relative", {"results": {"eval_peak_mib": {"fused": 300.0, "core": 600.0}}})
    (tmp_path / "steps.tsv").write_text(
        "device_tests\t0\t30\t55\t\nxl_reference\tskipped\t0\t0\tabsent\n"
    )
    (tmp_path / "device_tests.log").write_text("12 passed in 30.0s\n")
    head = json.loads(summary.summarise(tmp_path).read_text(encoding="utf-8"))["headline"]
    l6 = head["l6_xl"]["plain"]
    assert l6["eager"]["mfu"] == pytest.approx(0.1) and l6["compiled"]["mfu"] == pytest.approx(0.15)
    assert l6["compiled_over_eager"] == pytest.approx(1.5)
    cost = head["sigma_sdu"]["l6-xl eager"]
    assert cost["measured_cost"] == pytest.approx(0.2) and cost["flop_bound"] == pytest.approx(0.2)
    assert cost["cost_over_bound"] == pytest.approx(1.0)
    assert head["sigma_sdu"]["l6-xl compiled"]["measured_cost"] == pytest.approx(0.2)
    assert head["t_l3"]["trainer_eager_mfu"] == pytest.approx(0.1)
    assert head["t_l3"]["ours_over_xtransformers_flash"] == pytest.approx(0.5)
    assert head["t_l3"]["ours_over_xtransformers"] == pytest.approx(1.5)
    assert head["xl_reference"]["ours_over_reference_tokens_per_second"] == 2.0
    assert head["xl_reference"]["mfu"]["ours"] == pytest.approx(0.1)
    assert head["xl_eval_peak_memory"]["fused_over_core"] == pytest.approx(0.5)
    written = json.loads((tmp_path / "gpu_check.json").read_text(encoding="utf-8"))
    assert written["machine"]["gpu"] == "test"
    assert [s["status"] for s in written["steps"]] == ["0", "skipped"]
    assert written["steps"][0]["log_tail"] == ["12 passed in 30.0s"]


def test_the_summary_counts_a_cut_pytest_step_from_its_log(tmp_path: Path) -> None:
    """A step stopped before pytest wrote its JUnit file keeps its ``-v`` lines: counted,
    and never taken as the kernel's verification (that needs the whole run's file)."""
    (tmp_path / "kernel_tests.log").write_text(
        "tests/nn/t.py::a PASSED [ 10%]\ntests/nn/t.py::b FAILED [ 20%]\n"
        "tests/nn/t.py::c SKIPPED (no fp64) [ 30%]\n", encoding="utf-8",
    )  # fmt: skip
    counts = summary.pytest_counts(tmp_path, "kernel_tests")
    assert counts is not None and counts["from"].startswith("log")
    assert (counts["tests"], counts["failures"], counts["skipped"]) == (3, 1, 1)
    assert not summary.kernel_verified(counts)
    junit = '<testsuites><testsuite tests="5" failures="0" errors="0" skipped="2"/></testsuites>'
    (tmp_path / "kernel_tests.xml").write_text(junit, encoding="utf-8")
    assert summary.kernel_verified(summary.pytest_counts(tmp_path, "kernel_tests"))
    (tmp_path / "kernel_tests.xml").write_text(junit.replace('failures="0"', 'failures="1"'))
    assert not summary.kernel_verified(summary.pytest_counts(tmp_path, "kernel_tests"))


def test_the_wide_batch_is_the_one_the_script_trains() -> None:
    assert f"--batch {summary.WIDE_BATCH} " in SCRIPT.read_text(encoding="utf-8")


def test_the_summary_sets_each_target_against_its_figure() -> None:
    head = {
        "l6_xl": {"plain": {"compiled": {"mfu": 0.2}}},
        "l6_xl_wide": {"mfu": 0.5},
        "t_l3": {"trainer_mfu": 0.46, "ours_over_xtransformers_flash": None},
        "xl_reference": {"ours_over_reference_tokens_per_second": 3.5},
        "sigma_sdu": {"l6-xl compiled": {"cost_over_bound": 1.2}},
        "xl_eval_peak_memory": {"fused_over_core": 0.4},
    }
    met = {name: target["met"] for name, target in summary.targets(head).items()}
    assert met == {
        "l6_xl_compiled_mfu": False, "l6_xl_wide_compiled_mfu": True, "t_l3_mfu": True,
        "t_l3_over_xtransformers_flash": None, "l6_xl_over_reference": True,
        "sigma_sdu_cost_over_flop_bound": False, "xl_eval_peak_fused_over_core": True,
    }  # fmt: skip


def test_the_rehearsal_refuses_what_would_not_come_back(tmp_path: Path) -> None:
    for i in range(9):
        (tmp_path / f"record{i}.json").write_text("{}")
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "a" / "b" / "c" / "deep.log").write_text("")
    problems, names = rehearsal.check_returned_files(tmp_path)
    said = " ".join(problems)
    assert "10 files in OUT: only 8 come back" in said
    assert "more than 2 folders down" in said and "gpu_check.json is not among" in said
    assert len(names) == 10


@pytest.mark.parametrize(
    ("log", "why"),
    [
        ("Traceback\nModuleNotFoundError: No module named 'platformdirs'\n", "never reached"),
        ("usage: bench\nbench: error: unrecognized arguments: --x\n", "never reached"),
        ("ImportError: x\nRuntimeError: cuda-stub: the first CUDA call was reached\n",
         "an error before CUDA"),
        ("RuntimeError: cuda-stub: the first CUDA call was reached\n", None),
        ("RuntimeError: Found no NVIDIA driver on your system\n", None),
    ],
)  # fmt: skip
def test_the_rehearsal_tells_a_step_that_reached_cuda(log: str, why: str | None) -> None:
    found = rehearsal.check_log("train_eager_t-l3", log, Path("absent.xml"))
    assert (found is None) if why is None else (found is not None and found.startswith(why))


def test_the_rehearsal_reads_each_pytest_failure(tmp_path: Path) -> None:
    junit = tmp_path / "device_tests.xml"
    case = '<testcase name="{}"><failure message="{}"/></testcase>'
    cuda = case.format("a", "RuntimeError: cuda-stub: the first CUDA call was reached")
    junit.write_text(f"<testsuites><testsuite>{cuda}</testsuite></testsuites>")
    log = "collected 3 items / 1 deselected / 2 selected\n"
    assert rehearsal.check_log("device_tests", log, junit) is None
    other = case.format("b", "AssertionError: 1 != 2")
    junit.write_text(f"<testsuites><testsuite>{cuda}{other}</testsuite></testsuites>")
    assert "b failed for another reason" in rehearsal.check_log("device_tests", log, junit)
    assert rehearsal.check_log("device_tests", "collected 0 items\n", junit) == (
        "pytest collected no tests"
    )


REFERENCE = ROOT / ".reference" / "transformer-xl" / "pytorch"


@pytest.mark.skipif(
    not (REFERENCE / "mem_transformer.py").is_file(),
    reason="the Transformer-XL reference code is not in .reference/transformer-xl/pytorch/",
)
def test_the_xl_reference_benchmark_runs_on_the_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import bench_xl_reference as bench

    monkeypatch.setattr(bench, "matmul_peak_flops", lambda dtype, device: 1e9)
    out = tmp_path / "xl.json"
    argv = ["--device", "cpu", "--precision", "fp32", "--batch", "2", "--seq-len", "8",
            "--mem-len", "8", "--set", "model.d_model=16", "model.n_heads=2",
            "model.d_head=8", "model.d_inner=32", "model.n_layers=2", "--steps", "2",
            "--warmup", "1", "--rounds", "1", "--json", str(out)]  # fmt: skip
    assert bench.main(argv) == 0
    results = json.loads(out.read_text(encoding="utf-8"))["results"]
    runs = results["runs"]
    # the same shape: as many parameters (the output layer tied to the embedding in both)
    assert runs["ours"][0]["parameters"] == runs["reference MemTransformerLM"][0]["parameters"]
    for rs in runs.values():
        assert 4.0 < rs[0]["first_loss"] < 6.5  # about ln 204 at the start: both train sanely
    assert results["ours_over_reference"] > 0
    assert "reference MemTransformerLM" in capsys.readouterr().out


def test_the_xl_reference_benchmark_skips_without_the_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import bench_xl_reference as bench

    assert bench.main(["--reference", str(tmp_path), "--device", "cpu"]) == 0
    assert capsys.readouterr().out.startswith("skipped: the Transformer-XL reference code")


def test_the_xl_reference_benchmark_refuses_altered_code(tmp_path: Path) -> None:
    """Reference files are imported (run) only when each is the pinned commit's, byte for byte."""
    import bench_xl_reference as bench

    for name in bench.REFERENCE_FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("import os  # not the reference\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="SHA-256 differs"):
        bench.main(["--device", "cpu", "--reference", str(tmp_path)])


def test_the_wheel_list_pins_every_wheel_by_sha256() -> None:
    lines = [
        line for line in (ROOT / "benchmarks" / "gpu_wheels.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]  # fmt: skip
    assert {line.split("==")[0] for line in lines} >= {"platformdirs", "x-transformers"}
    assert all(re.fullmatch(r"[\w-]+==[\w.]+ --hash=sha256:[0-9a-f]{64}", x) for x in lines)


def test_fetch_reference_keeps_nothing_whose_sha256_differs(tmp_path: Path) -> None:
    """A clone whose files are not the pinned commit's: one line, exit 2, nothing kept."""
    checkout = tmp_path / "checkout"
    (checkout / "benchmarks").mkdir(parents=True)
    script = checkout / "benchmarks" / "fetch_reference.sh"
    script.write_text((ROOT / "benchmarks" / "fetch_reference.sh").read_text())
    clone = tmp_path / "clone"
    (clone / "pytorch" / "utils").mkdir(parents=True)
    for name in ("mem_transformer.py", "utils/proj_adaptive_softmax.py",
                 "utils/log_uniform_sampler.py"):  # fmt: skip
        (clone / "pytorch" / name).write_text("import os  # not the reference\n")
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True)
    text = script.read_text().replace(
        "COMMIT=44781ed21dbaec88b280f74d9ae2877f52b492a5", f"COMMIT={head.stdout.strip()}"
    )
    script.write_text(text)
    done = subprocess.run(
        ["bash", str(script), "--from", str(clone)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "SHA-256 differs" in done.stderr
    assert not (checkout / ".reference").exists()
