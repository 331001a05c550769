"""The last step of ``benchmarks/gpu_check.sh``: one results file from the check's folder.

Reads what the steps left in ``FOLDER`` (``steps.tsv``: each step's exit status, seconds and
budget; each step's log; the ``--json`` records of the benchmarks; the pytest steps' JUnit
files, or their ``-v`` logs where a step was cut before pytest wrote one) and writes
``FOLDER/gpu_check.json``: the machine, every step's outcome and the tail of
its log, every benchmark record whole, and the headline figures, each computed from the
records of this one run (``null``, with the reason, where its step failed or was skipped):

- ``l6_xl``: the L6-XL's (and σ-SDU L6-XL's) tokens/s and MFU eager and compiled, and the
  compiled/eager speed-up;
- ``t_l3``: the T-L3's MFU through the trainer, and in the x-transformers benchmark its
  tokens/s against x-transformers with and without ``attn_flash``;
- ``xl_reference``: our L6-XL step's tokens/s over the Transformer-XL code's
  ``MemTransformerLM`` at the same shape, batch and precision, and both peaks;
- ``sigma_sdu``: per model and mode, the measured cost of σ-SDU on every sublayer
  (``1 - rate_σ / rate_plain``) against its FLOP bound, the share of the σ step's FLOPs its
  gate's extra products make (``1 - flops_plain / flops_σ``, from the same count the MFU
  uses): what the gate would cost if time followed the products;
- ``xl_eval_peak_memory``: the fused relative attention's evaluation peak over the current
  core's, from ``bench_fused_relative.py``'s record (its ``results.eval_peak_mib`` with
  ``fused`` and ``core``, or the first such pair found under a key naming a peak);
- ``kernel_verified``: whether the fused kernel's tests ran on CUDA and none failed (what
  ``relative_triton.VERIFIED_ON_GPU`` waits for);
- ``targets``: each target of docs/benchmarks.md with its figure, threshold and whether it
  was met (``null`` where the figure is missing).

    python benchmarks/gpu_check_summary.py build/gpu_check
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

#: The trainer-benchmark records of the check: (model, mode) -> their file stems.
TRAIN_RECORDS = {
    ("t-l3", "eager"): ("train_eager_t-l3",),
    ("rt-l3", "eager"): ("train_eager_rt-l3",),
    ("l6-xl", "eager"): ("train_eager_l6-xl",),
    ("l6-xl", "compiled"): ("train_compiled_l6-xl", "train_compiled_l6-xl_sigmoid"),
    ("l6-xl", "compiled wide"): ("train_compiled_l6-xl_wide",),
    ("t-l3", "compiled"): ("train_compiled_t-l3",),
    ("rt-l3", "compiled"): ("train_compiled_rt-l3",),
}
#: Each model's plain and σ-SDU presets.
PRESETS = {
    "t-l3": ("ht-table1/t-l3", "ht-table1/t-l3+sigmoid"),
    "rt-l3": ("ht-table4/rt-l3", "ht-table4/rt-l3+sigmoid"),
    "l6-xl": ("ht-table5/l6-xl", "ht-table5/l6-xl+sigmoid"),
}
LOG_TAIL = 8
#: The check's pytest steps (each writes NAME.xml and NAME.log).
PYTEST_STEPS = ("kernel_tests", "device_tests", "device_compiled_tests")
#: The batch of train_compiled_l6-xl_wide (gpu_check.sh's --batch): one that fills the GPU.
WIDE_BATCH = 128
_VERBOSE_LINE = re.compile(r"::\S+ (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def read_steps(folder: Path) -> list[dict[str, Any]]:
    """``steps.tsv``: name, status (an exit status, ``skipped``), seconds, budget, note."""
    steps = []
    path = folder / "steps.tsv"
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    for line in lines:
        name, status, seconds, budget, *note = [*line.split("\t"), ""][:5]
        log = folder / f"{name}.log"
        tail = (
            log.read_text(encoding="utf-8", errors="replace").splitlines()[-LOG_TAIL:]
            if (log.is_file())
            else []
        )
        steps.append({
            "step": name, "status": status, "seconds": int(seconds or 0),
            "budget_seconds": int(budget or 0), "note": note[0], "log_tail": tail,
        })  # fmt: skip
    return steps


def pytest_counts(folder: Path, name: str) -> dict[str, Any] | None:
    """Counts of a pytest step (tests, failures, errors, skipped): from its JUnit file, else
    from the ``-v`` lines of its log (a step cut before pytest wrote the file)."""
    try:
        root = ET.parse(folder / f"{name}.xml").getroot()
    except (OSError, ET.ParseError):
        return _counts_from_log(folder / f"{name}.log")
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        return None
    counts: dict[str, Any] = {
        key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")
    }
    return {**counts, "from": "junit"}


def _counts_from_log(log: Path) -> dict[str, Any] | None:
    if not log.is_file():
        return None
    outcomes = _VERBOSE_LINE.findall(log.read_text(encoding="utf-8", errors="replace"))
    if not outcomes:
        return None
    return {
        "tests": len(outcomes),
        "failures": outcomes.count("FAILED") + outcomes.count("XPASS"),
        "errors": outcomes.count("ERROR"),
        "skipped": outcomes.count("SKIPPED") + outcomes.count("XFAIL"),
        "from": "log (cut before pytest wrote its JUnit file)",
    }


def kernel_verified(counts: dict[str, Any] | None) -> bool:
    """The fused kernel's tests ran whole on CUDA (a JUnit file), some passed, none failed."""
    if not counts or counts.get("from") != "junit":
        return False
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return passed > 0 and counts["failures"] == 0 and counts["errors"] == 0


def train_figures(record: dict[str, Any] | None) -> dict[str, dict[str, float]]:
    """Per preset of a ``bench_train_step.py`` record: median tokens/s, MFU against the
    record's own matmul peak, FLOPs per token, peak MiB."""
    if not record or not isinstance(record.get("results"), dict):
        return {}
    results = record["results"]
    peaks = results.get("matmul_peak_flops") or {}
    figures = {}
    for preset, precision, runs in results.get("runs") or []:
        rates = [r for run in runs for r in run.get("rates", [])]
        if not rates or not peaks.get(precision):
            continue
        rate, flops = statistics.median(rates), runs[-1]["flops_per_token"]
        figures[preset] = {
            "tokens_per_second": rate,
            "mfu": rate * flops / peaks[precision],
            "flops_per_token": flops,
            "peak_mib": max(run.get("peak_mib", 0.0) for run in runs),
        }
    return figures


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _missing(what: str) -> dict[str, Any]:
    return {"value": None, "reason": f"no {what} in this run (see its step's outcome)"}


def sigma_cost(plain: dict[str, float], sigma: dict[str, float]) -> dict[str, float]:
    cost = 1 - sigma["tokens_per_second"] / plain["tokens_per_second"]
    bound = 1 - plain["flops_per_token"] / sigma["flops_per_token"]
    return {
        "measured_cost": cost,
        "flop_bound": bound,
        "cost_over_bound": cost / bound if bound else None,
        "sigma_over_plain_tokens_per_second": 1 - cost,
    }


def _find_pair(value: Any, inside_peak: bool = False) -> tuple[float, float] | None:
    """The first ``{"fused": x, "core": y}`` found under a key naming a peak."""
    if isinstance(value, dict):
        if (
            inside_peak
            and isinstance(value.get("fused"), int | float)
            and isinstance(value.get("core"), int | float)
        ):
            return float(value["fused"]), float(value["core"])
        for key, item in value.items():
            found = _find_pair(item, inside_peak or "peak" in str(key).lower())
            if found:
                return found
    elif isinstance(value, list):
        for item in value:
            found = _find_pair(item, inside_peak)
            if found:
                return found
    return None


def headline(records: dict[str, dict[str, Any] | None]) -> dict[str, Any]:
    train = {
        key: {k: v for stem in stems for k, v in train_figures(records.get(stem)).items()}
        for key, stems in TRAIN_RECORDS.items()
    }
    out: dict[str, Any] = {}

    l6 = {}
    for which, preset in zip(("plain", "sigma"), PRESETS["l6-xl"], strict=True):
        eager = train[("l6-xl", "eager")].get(preset)
        compiled = train[("l6-xl", "compiled")].get(preset)
        l6[which] = {
            "eager": eager or _missing("eager L6-XL figure"),
            "compiled": compiled or _missing("compiled L6-XL figure"),
            "compiled_over_eager": _ratio(
                compiled and compiled["tokens_per_second"], eager and eager["tokens_per_second"]
            ),
        }
    out["l6_xl"] = l6
    out["l6_xl_wide"] = train[("l6-xl", "compiled wide")].get(PRESETS["l6-xl"][0]) or _missing(
        f"compiled L6-XL figure at batch {WIDE_BATCH}"
    )

    xt = (records.get("vs_xtransformers") or {}).get("results") or {}
    rates = xt.get("tokens_per_second") or {}
    t_l3 = train[("t-l3", "eager")].get(PRESETS["t-l3"][0])
    t_l3_compiled = train[("t-l3", "compiled")].get(PRESETS["t-l3"][0])
    best = t_l3_compiled or t_l3
    out["t_l3"] = {
        "trainer_eager_mfu": t_l3["mfu"] if t_l3 else None,
        "trainer_mfu": best["mfu"] if best else None,
        "trainer_mfu_mode": None if best is None else "compiled" if t_l3_compiled else "eager",
        "xtransformers_bench_ours_mfu": (xt.get("mfu") or {}).get("ours"),
        "ours_over_xtransformers": _ratio(rates.get("ours"), rates.get("x-transformers")),
        "ours_over_xtransformers_flash": _ratio(
            rates.get("ours"), rates.get("x-transformers flash")
        ),
    }

    ref = (records.get("xl_reference") or {}).get("results") or {}
    out["xl_reference"] = {
        "ours_over_reference_tokens_per_second": ref.get("ours_over_reference"),
        "tokens_per_second": ref.get("tokens_per_second"),
        "peak_mib": ref.get("peak_mib"),
        "mfu": {
            name: rate * ref["flops_per_token"] / ref["matmul_peak_flops"]
            for name, rate in (ref.get("tokens_per_second") or {}).items()
        }
        if ref.get("flops_per_token") and ref.get("matmul_peak_flops")
        else None,
    }

    sigma: dict[str, Any] = {}
    for (model, mode), figures in train.items():
        plain, gated = (figures.get(p) for p in PRESETS[model])
        if plain and gated:
            sigma[f"{model} {mode}"] = sigma_cost(plain, gated)
    out["sigma_sdu"] = sigma or _missing("plain and σ-SDU pair")

    fused = (records.get("fused_relative") or {}).get("results")
    pair = _find_pair(fused) if fused is not None else None
    out["xl_eval_peak_memory"] = (
        {"fused_mib": pair[0], "core_mib": pair[1], "fused_over_core": _ratio(*pair)}
        if pair
        else _missing("fused/core evaluation peak pair")
    )
    return out


def _target(figure: float | None, threshold: float, at_least: bool, what: str) -> dict:
    met = None if figure is None else (figure >= threshold if at_least else figure <= threshold)
    return {"what": what, "figure": figure, "threshold": threshold,
            "at_least": at_least, "met": met}  # fmt: skip


def _get(tree: Any, *keys: str) -> float | None:
    for key in keys:
        tree = tree.get(key) if isinstance(tree, dict) else None
    return tree if isinstance(tree, int | float) else None


def targets(head: dict[str, Any]) -> dict[str, dict]:
    """docs/benchmarks.md's targets (one H200, bf16), each from this run's figures."""
    wide = head.get("l6_xl_wide") or {}
    return {
        "l6_xl_compiled_mfu": _target(
            _get(head, "l6_xl", "plain", "compiled", "mfu"),
            0.35,
            True,
            "L6-XL compiled, paper's batch (22 x 512): MFU",
        ),
        "l6_xl_wide_compiled_mfu": _target(
            _get(wide, "mfu"),
            0.45,
            True,
            f"L6-XL compiled at batch {WIDE_BATCH} x 512: MFU",
        ),
        "t_l3_mfu": _target(
            _get(head, "t_l3", "trainer_mfu"), 0.45, True, "T-L3 through the trainer: MFU"
        ),
        "t_l3_over_xtransformers_flash": _target(
            _get(head, "t_l3", "ours_over_xtransformers_flash"),
            1.0,
            True,
            "T-L3 tokens/s over x-transformers with attn_flash, same size",
        ),
        "l6_xl_over_reference": _target(
            _get(head, "xl_reference", "ours_over_reference_tokens_per_second"),
            3.0,
            True,
            "L6-XL tokens/s over the Transformer-XL code's MemTransformerLM",
        ),
        "sigma_sdu_cost_over_flop_bound": _target(
            _get(head, "sigma_sdu", "l6-xl compiled", "cost_over_bound"),
            1.0,
            False,
            "sigma-SDU's throughput cost over its FLOP bound (L6-XL compiled)",
        ),
        "xl_eval_peak_fused_over_core": _target(
            _get(head, "xl_eval_peak_memory", "fused_over_core"),
            0.5,
            False,
            "XL evaluation (target 80, memory 2100) peak memory, fused over core",
        ),
    }


def summarise(folder: Path) -> Path:
    stems = {stem for group in TRAIN_RECORDS.values() for stem in group}
    stems |= {"xl_reference", "vs_xtransformers", "fused_relative"}
    records = {stem: read_json(folder / f"{stem}.json") for stem in sorted(stems)}
    machine = next((r["machine"] for r in records.values() if r and "machine" in r), None)
    head = headline(records)
    head["kernel_verified"] = kernel_verified(pytest_counts(folder, "kernel_tests"))
    head["targets"] = targets(head)
    summary = {
        "check": "benchmarks/gpu_check.sh",
        "machine": machine,
        "steps": read_steps(folder),
        "tests": {name: pytest_counts(folder, name) for name in PYTEST_STEPS},
        "headline": head,
        "records": records,
    }
    path = folder / "gpu_check.json"
    path.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python benchmarks/gpu_check_summary.py FOLDER", file=sys.stderr)
        return 2
    path = summarise(Path(argv[0]))
    print(json.dumps(json.loads(path.read_text(encoding="utf-8"))["headline"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
