"""Our PPO-TrXL against CleanRL's ``ppo_trxl.py`` on ProofofMemory-v0, in one run.

Both sides train the same environment (ours: ``task.rl.env=proof-of-memory``, a seeded port
of CleanRL's ``pom_env.py``), at the same sizes and PPO settings (ours: the
``rl/proof-of-memory`` preset; CleanRL: the command of its documentation,
``docs/rl-algorithms/ppo-trxl.md``) and for the same environment steps (``--total-steps``,
whole rollouts of 16 x 128), on one thread each (``OMP_NUM_THREADS=1``,
``torch.set_num_threads(1)``), one process a run, seeds ``1 .. --seeds`` taking turns
(CleanRL seed 1, ours seed 1, CleanRL seed 2, ...) so that a change of the machine's load
falls on both.

Measured per run: environment steps per CPU-second of the whole process (start-up, imports
and the end of run included; the children's rusage) and per wall second; the success rate of
the last 100 training episodes (sampled actions; an episode succeeds when it ends on the
rewarding goal, which is when its return is positive); ours also reports its greedy valid
success (CleanRL evaluates nothing). Across seeds: the mean of each with its 95% t-interval,
and ours / CleanRL: the geometric mean of the per-seed ratios (seed ``s`` against seed ``s``)
with its t-interval.

CleanRL's script runs unmodified from ``--anchor`` (the folder holding ``ppo_trxl.py`` and
``pom_env.py``), with ``--no-cuda`` (it would take a GPU where there is one); its Python
(``--anchor-python``, default this one) must see its dependencies (gymnasium 0.29, tyro,
einops, memory-gym, minigrid, tensorboard: ``--anchor-path`` puts a folder of them first on
its ``PYTHONPATH``). To count episodes it runs under this script's observer, which wraps
gymnasium's ``RecordEpisodeStatistics`` (the wrapper the script already puts on every
environment) to write down each episode's return and length; nothing else is changed.
Without ``--anchor`` only ours runs, and the record says that the anchor is absent.

    python benchmarks/rl_anchor.py --anchor path/to/cleanrl/ppo_trxl \
        --anchor-path path/to/its/packages --json docs/benchmarks/rl_anchor.json
    python benchmarks/rl_anchor.py --seeds 1 --total-steps 2048   # ours only, a smoke run
"""

from __future__ import annotations

import sys

#: CleanRL's documented ProofofMemory-v0 command (docs/rl-algorithms/ppo-trxl.md), less its
#: --total_timesteps and --seed, which this script sets; --no-cuda is the one addition.
ANCHOR_ARGS = [
    "--env_id", "ProofofMemory-v0", "--num_envs", "16", "--num_steps", "128",
    "--num_minibatches", "8", "--update_epochs", "4", "--trxl_num_layers", "4",
    "--trxl_num_heads", "1", "--trxl_dim", "64", "--trxl_memory_length", "16",
    "--trxl_positional_encoding", "none", "--vf_coef", "0.1", "--max_grad_norm", "0.5",
    "--init_lr", "3.0e-4", "--init_ent_coef", "0.001", "--clip_coef", "0.2", "--no-cuda",
]  # fmt: skip
#: Our side: the preset that mirrors those settings (presets/rl.py).
OURS_PRESET = "rl/proof-of-memory"
#: Training episodes the success rate is read over (CleanRL's own statistics window too).
LAST_EPISODES = 100
#: A rollout of both sides: 16 environments x 128 steps.
ROLLOUT = 16 * 128
CHILD_FLAG = "--anchor-child"


def observe_anchor(episodes_path: str, script: str, argv: list[str]) -> None:
    """Run CleanRL's ``script`` as ``__main__`` with ``argv``, writing each finished episode's
    (return, length) to ``episodes_path`` as JSON when it exits. Stdlib and the anchor's own
    packages only: this runs in the anchor's Python."""
    import atexit
    import json
    import os
    import runpy

    import gymnasium
    import torch

    torch.set_num_threads(1)
    episodes: list[tuple[float, int]] = []
    base = gymnasium.wrappers.RecordEpisodeStatistics

    class Observed(base):  # type: ignore[misc, valid-type]
        def reset(self, **kwargs):  # noqa: ANN003, ANN202 - gymnasium's signature
            self.observed = (0.0, 0)
            return super().reset(**kwargs)

        def step(self, action):  # noqa: ANN001, ANN202
            out = super().step(action)
            total, length = self.observed
            self.observed = (total + float(out[1]), length + 1)
            if out[2] or out[3]:
                episodes.append(self.observed)
            return out

    def dump() -> None:
        with open(episodes_path, "w", encoding="utf-8") as f:
            json.dump(episodes, f)

    gymnasium.wrappers.RecordEpisodeStatistics = Observed
    atexit.register(dump)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    sys.argv = [script, *argv]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == CHILD_FLAG:
    observe_anchor(sys.argv[2], sys.argv[3], sys.argv[4:])
    raise SystemExit(0)

# The benchmark itself (the code above runs in the anchor's Python, which lacks this project).
import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402


def one_thread_env(extra_path: list[str]) -> dict[str, str]:
    """This environment with one BLAS/OpenMP thread and ``extra_path`` first on PYTHONPATH."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([*extra_path, *kept])
    return env


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[str, float, float]:
    """(output, CPU seconds, wall seconds) of ``command`` run to its end; the CPU time is
    what the children used (runs go one at a time, so the delta is this one's)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        raise SystemExit(f"{command[:3]} failed ({done.returncode}): " + " | ".join(tail))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done.stdout + done.stderr, cpu, wall


def success_of(episodes: list[tuple[float, int]]) -> float:
    """Success rate of the last :data:`LAST_EPISODES` episodes: a positive return is the
    rewarding goal (a punishing goal or the time limit leaves it below 0)."""
    last = episodes[-LAST_EPISODES:]
    return sum(r > 0 for r, _ in last) / max(len(last), 1)


def run_anchor(anchor: Path, python: str, path: list[str], seed: int, steps: int, work: Path):
    """One seed of CleanRL's ppo_trxl.py: its steps/s, success and its own last SPS line."""
    episodes = work / f"anchor-{seed}.json"
    command = [python, str(Path(__file__).resolve()), CHILD_FLAG, str(episodes),
               str(anchor / "ppo_trxl.py"), *ANCHOR_ARGS, "--seed", str(seed),
               "--total_timesteps", str(steps)]  # fmt: skip
    out, cpu, wall = timed(command, work, one_thread_env([*path, str(anchor)]))
    found = json.loads(episodes.read_text(encoding="utf-8"))
    sps = re.findall(r"SPS=\s*(\d+)", out)
    iterations = len(sps)
    return {
        "seed": seed, "env_steps": iterations * ROLLOUT, "cpu_s": cpu, "wall_s": wall,
        "success": success_of(found), "episodes": len(found),
        "reported_sps": int(sps[-1]) if sps else None,
    }  # fmt: skip


def run_ours(seed: int, steps: int, work: Path) -> dict:
    """One seed of ``highway train --preset rl/proof-of-memory`` at ``steps`` environment
    steps: its steps/s, training success (the last record) and greedy valid success."""
    out_dir = work / f"ours-{seed}"
    command = [sys.executable, "-c", "from highway_transformer.cli import main; main()",
               "train", "--preset", OURS_PRESET, f"train.seed={seed}", "train.threads=1",
               f"task.rl.total_steps={steps}", f"task.rl.stats_episodes={LAST_EPISODES}",
               "--out", str(out_dir)]  # fmt: skip
    _, cpu, wall = timed(command, work, one_thread_env([]))
    records = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["split"] == "train"][-1]
    results = json.loads((out_dir / "results.json").read_text(encoding="utf-8"))
    return {
        "seed": seed, "env_steps": int(train["env_steps"]), "cpu_s": cpu, "wall_s": wall,
        "success": float(train["success_rate"]), "train_loop_s": float(train["time"]),
        "greedy_valid_success": _greedy(results),
    }  # fmt: skip


def _greedy(results: dict) -> float | None:
    """The greedy valid success at the last step (results.json's ``final``)."""
    value = results.get("final", results).get("valid", {}).get("success")
    return None if value is None else float(value)


def spread(values: list[float]) -> tuple[float, tuple[float, float] | None]:
    from highway_transformer.report.stats import t_interval

    return sum(values) / len(values), t_interval(values)


def ratio_spread(ours: list[float], anchor: list[float]) -> tuple[float, tuple | None]:
    """Geometric mean of the per-seed ratios and its t-interval (on their logarithms)."""
    logs = [math.log(o / a) for o, a in zip(ours, anchor, strict=True)]
    centre, interval = spread(logs)
    return math.exp(centre), None if interval is None else tuple(map(math.exp, interval))


def cell(centre: float, interval: tuple | None, digits: int = 0) -> str:
    if interval is None:
        return f"{centre:.{digits}f}"
    low, high = interval
    return f"{centre:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def parse(argv: list[str] | None) -> argparse.Namespace:
    from common import add_json_argument

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--anchor", type=Path, help="folder of CleanRL's ppo_trxl.py")
    parser.add_argument("--anchor-python", default=sys.executable)
    parser.add_argument("--anchor-path", action="append", default=[],
                        help="a folder first on the anchor's PYTHONPATH (repeatable)")  # fmt: skip
    parser.add_argument("--anchor-commit", help="the CleanRL commit --anchor was exported from")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--total-steps", type=int, default=12 * ROLLOUT)
    add_json_argument(parser)
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.total_steps < ROLLOUT:
        parser.error(f"--seeds must be at least 1 and --total-steps at least {ROLLOUT}")
    if args.anchor and not (args.anchor / "ppo_trxl.py").is_file():
        parser.error(
            f"--anchor {args.anchor} holds no ppo_trxl.py; give CleanRL's cleanrl/ppo_trxl"
        )
    args.total_steps -= args.total_steps % ROLLOUT  # whole rollouts on both sides
    return args


def main(argv: list[str] | None = None) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import Record, print_machine

    args = parse(argv)
    print_machine()
    record = Record()
    runs: dict[str, list[dict]] = {"anchor": [], "ours": []}
    with tempfile.TemporaryDirectory(prefix="rl-anchor-") as tmp:
        work = Path(tmp)
        for seed in range(1, args.seeds + 1):
            if args.anchor:
                anchor = args.anchor.resolve()
                found = run_anchor(anchor, args.anchor_python, args.anchor_path, seed,
                                   args.total_steps, work)  # fmt: skip
                runs["anchor"].append(found)
                print(f"anchor seed {seed}: {found}", flush=True)
            runs["ours"].append(run_ours(seed, args.total_steps, work))
            print(f"ours seed {seed}: {runs['ours'][-1]}", flush=True)
    summary = summarise(runs, record)
    record.write(args.json, {"runs": runs, "summary": summary, "anchor": _anchor_facts(args)})
    return {"runs": runs, "summary": summary}


def rate(run: dict, clock: str) -> float:
    """Environment steps per second of ``clock`` (``cpu_s`` or ``wall_s``) of one run."""
    return run["env_steps"] / run[clock]


def loop_rate(run: dict) -> float:
    """Steps per wall second of the training loop alone, by each side's own clock (CleanRL's
    last printed SPS; ours: the trainer's training time), start-up left out."""
    if "reported_sps" in run:
        return float(run["reported_sps"])
    return run["env_steps"] / run["train_loop_s"]


def summarise(runs: dict[str, list[dict]], record: Any) -> dict:
    """The table of both sides, ours' greedy success and the ratios; returns the figures."""
    rows, figures = [], {}
    for side, name in (("anchor", "CleanRL ppo_trxl.py"), ("ours", f"ours ({OURS_PRESET})")):
        found = runs[side]
        if not found:
            continue
        figures[side] = {
            "steps_per_cpu_s": spread([rate(r, "cpu_s") for r in found]),
            "steps_per_wall_s": spread([rate(r, "wall_s") for r in found]),
            "success_pct": spread([100 * r["success"] for r in found]),
            "loop_steps_per_wall_s": spread([loop_rate(r) for r in found]),
        }
        cpu, wall, success, loop = figures[side].values()
        rows.append([name, len(found), found[0]["env_steps"], cell(*cpu), cell(*wall),
                     cell(*loop), cell(*success, 1)])  # fmt: skip
    record.table(
        ["side", "seeds", "env steps", "steps / CPU-s", "steps / wall-s",
         "training loop, steps / wall-s", f"success, last {LAST_EPISODES} training episodes (%)"],
        rows,
        caption="ProofofMemory-v0, one thread a run; mean [95% t-interval] over seeds",
    )  # fmt: skip
    greedy = [100 * r["greedy_valid_success"] for r in runs["ours"]
              if r["greedy_valid_success"] is not None]  # fmt: skip
    if greedy:
        figures["ours"]["greedy_valid_success_pct"] = spread(greedy)
        record.note(f"ours, greedy valid success (64 episodes): {cell(*spread(greedy), 1)} %")
    if not runs["anchor"]:
        record.note("the anchor is absent (no --anchor): ours only")
        return figures
    figures["ratio"] = {
        clock: ratio_spread([rate(r, clock) for r in runs["ours"]],
                            [rate(r, clock) for r in runs["anchor"]])
        for clock in ("cpu_s", "wall_s")
    }  # fmt: skip
    record.note(
        f"ours / CleanRL, steps per CPU-second: {cell(*figures['ratio']['cpu_s'], 2)}; per "
        f"wall second: {cell(*figures['ratio']['wall_s'], 2)} (geometric mean of the "
        "per-seed ratios [95% t-interval])"
    )
    interval = figures["anchor"]["success_pct"][1]
    ours = figures["ours"]["success_pct"][0]
    inside = interval is not None and interval[0] <= ours <= interval[1]
    figures["success_inside_anchor_interval"] = inside
    where = "inside" if inside else "outside"
    record.note(f"ours' mean training success {ours:.1f}% is {where} CleanRL's interval")
    return figures


def _anchor_facts(args: argparse.Namespace) -> dict | None:
    """Where the anchor came from: its folder, commit (``--anchor-commit``, else the folder's
    git HEAD) and arguments."""
    if not args.anchor:
        return None
    head = subprocess.run(["git", "-C", str(args.anchor), "rev-parse", "HEAD"],
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    return {"path": str(args.anchor), "commit": args.anchor_commit or head or None,
            "arguments": ANCHOR_ARGS, "patch": "none: --no-cuda on its command line; "
            "episodes counted by wrapping RecordEpisodeStatistics"}  # fmt: skip


if __name__ == "__main__":
    main()
