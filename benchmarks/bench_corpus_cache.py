"""Load time and peak memory of a large corpus: in memory vs the memory-mapped token cache.

Writes a synthetic corpus file of ``--tokens`` tokens (default 100M) and loads it through
``load_corpus(DataConfig(corpus="file", ...))`` in a fresh process per phase, so each peak
resident memory (ru_maxrss) is that phase's alone:

* ``in-memory``: ``data.cache=false``, the ids encoded into ``int64`` tensors;
* ``first build``: empty cache, the ids encoded and stored as ``uint16`` ``.npy`` files;
* ``cached load``: the same call again, the ids mapped from disk (the source is still hashed
  to find the entry);
* ``cached + 1 pass``: a cached load followed by a pass over every training window the
  trainer would take (``int64`` one window at a time), which pages the whole array in.

    python benchmarks/bench_corpus_cache.py                       # 100M characters
    python benchmarks/bench_corpus_cache.py --tokens 10000000 --level word

Peak memory (VmHWM) is printed as measured and above the import baseline (a process that imports
the library and torch and loads nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Record, add_json_argument, peak_rss_since_exec_mib, print_machine  # noqa: E402

PHASES = ("baseline", "in-memory", "first build", "cached load", "cached + 1 pass")


def write_corpus(path: Path, tokens: int, level: str, seed: int = 0) -> None:
    """``tokens`` characters (char: 60 symbols) or words (word: 10k Zipf-distributed words)."""
    rng = np.random.default_rng(seed)
    with open(path, "wb") as out:
        done, block = 0, 10_000_000
        while done < tokens:
            n = min(block, tokens - done)
            if level == "char":
                alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz" * 2 + b"     ,.\n", np.uint8)
                out.write(alphabet[rng.integers(0, len(alphabet), n)].tobytes())
            else:
                ranks = np.minimum(rng.zipf(1.2, n), 10_000)
                words = [f"w{r}" for r in ranks.tolist()]
                for i in range(0, n, 20):  # 20 words a line; the line end is a token too
                    out.write((" ".join(words[i : i + 19]) + "\n").encode("ascii"))
            done += n


def run_phase(phase: str, path: Path, level: str) -> dict:
    """Load the corpus in this process (called in a child process per phase)."""
    import torch

    from highway_transformer import DataConfig, load_corpus
    from highway_transformer.data.batching import train_rows, window_bounds

    torch.set_num_threads(1)
    if phase == "baseline":
        return {"seconds": 0.0, "peak_mib": peak_rss_since_exec_mib()}
    cache = None if phase != "in-memory" else False
    start = time.perf_counter()
    corpus = load_corpus(DataConfig(corpus="file", path=str(path), level=level, cache=cache))
    seconds = time.perf_counter() - start
    n_ids = sum(corpus.split(name).numel() for name in ("train", "valid", "test"))
    out = {"seconds": seconds, "tokens": n_ids, "dtype": str(corpus.train.dtype)[6:]}
    if phase == "cached + 1 pass":
        start = time.perf_counter()
        inputs, targets = train_rows(corpus.train, 64, 512)
        total = 0
        for a, b, _ in window_bounds(inputs.shape[1], 512, 0):
            total += int(inputs[:, a:b].long().sum()) + int(targets[:, a:b].long().sum())
        out["pass_seconds"] = time.perf_counter() - start
    out["peak_mib"] = peak_rss_since_exec_mib()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=100_000_000)
    parser.add_argument("--level", choices=["char", "word"], default="char")
    parser.add_argument("--workdir", help="where the corpus and cache go (default: a temp dir)")
    parser.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    add_json_argument(parser)
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(run_phase(args.phase, Path(args.path), args.level)))
        return
    print_machine()
    record = Record()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        path = Path(tmp) / "corpus.txt"
        start = time.perf_counter()
        write_corpus(path, args.tokens, args.level)
        record.note(f"synthetic {args.level}-level corpus: {args.tokens:,} tokens, "
                    f"{path.stat().st_size / 2**20:,.0f} MiB, written in "
                    f"{time.perf_counter() - start:.1f} s")  # fmt: skip
        env = {**os.environ, "HIGHWAY_TRANSFORMER_CACHE": str(Path(tmp) / "cache")}
        results = {}
        for phase in PHASES:
            cmd = [sys.executable, __file__, "--phase", phase, "--path", str(path),
                   "--level", args.level]  # fmt: skip
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if done.returncode:
                sys.exit(f"phase {phase} failed:\n{done.stderr[-2000:]}")
            results[phase] = json.loads(done.stdout.strip().splitlines()[-1])
        cache_bytes = sum(p.stat().st_size for p in (Path(tmp) / "cache").rglob("*.npy"))
    base = results["baseline"]["peak_mib"]
    record.note(f"import baseline: peak RSS {base:,.0f} MiB")
    rows = []
    for phase in PHASES[1:]:
        r = results[phase]
        extra = ""
        if "pass_seconds" in r:
            extra = f" (+ a pass over all windows: {r['pass_seconds']:.1f} s)"
        rows.append([phase, f"{r['seconds']:.2f}", f"{r['peak_mib']:,.0f}",
                     f"{r['peak_mib'] - base:,.0f}", f"{r['dtype']}{extra}"])  # fmt: skip
    record.table(["phase", "seconds", "peak RSS MiB", "above baseline", "ids"], rows, align="lrrrl")
    n_ids = results["cached load"]["tokens"]
    record.note(f"cache on disk: {cache_bytes / 2**20:,.0f} MiB for {n_ids:,} ids")
    record.write(args.json, {**results, "cache_bytes": cache_bytes})


if __name__ == "__main__":
    main()
