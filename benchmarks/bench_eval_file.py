"""``highway eval RUN --file TEXT`` on large files: wall time, tokens/s and peak memory.

Writes a synthetic text of each ``--mb`` size (``--level char``: random words of a 26-letter
alphabet with spaces, punctuation and line feeds; ``word``: Zipf-distributed words, a line
end a token; ``bpe``: the char text under a 1,000-token BPE tokenizer trained on its first
200 kB), saves a small language model of that vocabulary (random weights: the cost of scoring
does not depend on them; ``--set`` changes the model or the evaluation settings, e.g.
``model.family=xl model.attention=relative model.memory.mem_len=64``) and runs the command
line's ``eval RUN --file TEXT --json --no-progress`` in a fresh process per size, so that
each peak resident memory (VmHWM) is that run's alone. A process that imports the library
and loads the model gives the baseline the peaks are measured against.

It then checks what streaming must keep: the score of a ``--check-mb`` prefix of the file
(cut after a line end) through ``eval --file`` equals, to the last bit, the evaluation of
the same text tokenised at once into one ``int64`` tensor held in memory.

    python benchmarks/bench_eval_file.py                      # 1 and 20 MB, char level
    python benchmarks/bench_eval_file.py --mb 5 --level word
    python benchmarks/bench_eval_file.py --mb 1 20 --set model.family=xl \\
        model.attention=relative model.memory.mem_len=64
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Record, add_json_argument, peak_rss_since_exec_mib, print_machine  # noqa: E402

CHARS = b"abcdefghijklmnopqrstuvwxyz"
MB = 1_000_000


def write_text(path: Path, size: int, level: str, seed: int = 0) -> None:
    """``size`` bytes of ASCII text in lines of about 60 characters."""
    rng = np.random.default_rng(seed)
    with open(path, "wb") as out:
        done = 0
        while done < size:
            if level == "word":
                ranks = np.minimum(rng.zipf(1.3, 200_000), 5_000)
                words = [f"w{r}" for r in ranks.tolist()]
                lines = [" ".join(words[i : i + 12]) for i in range(0, len(words), 12)]
            else:
                letters = np.frombuffer(CHARS, np.uint8)[rng.integers(0, 26, 1_000_000)]
                cuts = np.cumsum(rng.integers(2, 9, 200_000))
                cuts = cuts[cuts < letters.size]
                words = np.split(letters, cuts)
                marks = rng.choice([b"", b",", b"."], len(words), p=[0.85, 0.1, 0.05])
                tokens = [
                    w.tobytes().decode("ascii") + m.decode()
                    for w, m in zip(words, marks, strict=True)
                ]
                lines = [" ".join(tokens[i : i + 10]) for i in range(0, len(tokens), 10)]
            block = ("\n".join(lines) + "\n").encode("ascii")[: size - done]
            out.write(block)
            done += len(block)


def prefix(path: Path, out: Path, size: int) -> None:
    """The first ``size`` bytes of ``path`` up to the last line end."""
    with open(path, "rb") as f:
        head = f.read(size)
    out.write_bytes(head[: head.rfind(b"\n") + 1] or head)


def save_model(folder: Path, sample: Path, level: str, settings: list[str]) -> None:
    """A small model of ``level`` with random weights, saved as a checkpoint folder."""
    import torch

    from highway_transformer.config import Config
    from highway_transformer.data.encoding import line_tokens
    from highway_transformer.data.vocab import EOS, UNK, SubwordVocabulary, Vocabulary
    from highway_transformer.models.lm import LanguageModel
    from highway_transformer.training.checkpoint import save_checkpoint
    from highway_transformer.validation import build_config

    text = sample.read_text(encoding="ascii")[: 200 * 1000]
    if level == "bpe":
        vocab: Vocabulary = SubwordVocabulary.train(text, "bpe", 1000)
    elif level == "word":
        vocab = Vocabulary.build(line_tokens(text), "word", unk=UNK, eos=EOS)
    else:
        vocab = Vocabulary.build(text, "char", unk=UNK)
    shape = [
        "data.corpus=file", f"data.level={level}", f"model.vocab_size={len(vocab)}",
        "model.d_model=32", "model.n_layers=1", "model.n_heads=2", "model.d_inner=64",
        "model.dropout=0", "data.seq_len=128", "data.eval_batch_size=16",
    ]  # fmt: skip
    config = build_config(Config(), None, [*shape, *settings])
    torch.manual_seed(0)
    save_checkpoint(folder, LanguageModel(config.model), config, vocab)


def run_phase(phase: str, run: Path, path: Path) -> dict:
    """One measurement in this process (a child per phase)."""
    import torch

    from highway_transformer import cli
    from highway_transformer.api import load_pretrained

    torch.set_num_threads(1)
    if phase == "baseline":
        load_pretrained(run)
        return {"peak_mib": peak_rss_since_exec_mib()}
    if phase == "stream":
        out = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = cli.main(["eval", str(run), "--file", str(path), "--json", "--no-progress"])
        seconds = time.perf_counter() - start
        if code:
            raise SystemExit(f"highway eval --file exited with {code}")
        score = json.loads(out.getvalue())
        return {"seconds": seconds, "peak_mib": peak_rss_since_exec_mib(), **score}
    # in memory: the whole text tokenised at once, one int64 tensor, the same evaluation
    from highway_transformer.data.encoding import encode_words
    from highway_transformer.data.vocab import SubwordVocabulary
    from highway_transformer.models.families import memory_policy
    from highway_transformer.tasks.lm_scoring import evaluate

    model, config, vocab = load_pretrained(run)
    text = path.read_text(encoding="utf-8")
    if isinstance(vocab, SubwordVocabulary):
        ids = torch.from_numpy(vocab.encode_text(text))
    elif vocab.level == "word":
        ids = torch.cat([torch.tensor(vocab.encode([vocab.eos])), encode_words(text, vocab)])
    else:
        ids = torch.tensor(vocab.encode(list(text)))
    policy = memory_policy(config.model, evaluation=True)
    result = evaluate(model, ids, config.data, "cpu", config.train.precision, policy=policy)
    return {"peak_mib": peak_rss_since_exec_mib(), **result.as_dict()}


def child(phase: str, run: Path, path: Path) -> dict:
    cmd = [sys.executable, __file__, "--phase", phase, "--run", str(run), "--path", str(path)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"phase {phase} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, nargs="+", default=[1, 20], help="file sizes, MB")
    parser.add_argument("--level", choices=["char", "word", "bpe"], default="char")
    parser.add_argument("--check-mb", type=float, default=1.0, help="prefix checked, MB")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--workdir", help="where the files go (default: a temp dir)")
    parser.add_argument(
        "--phase", choices=["baseline", "stream", "in-memory"], help=argparse.SUPPRESS
    )
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    add_json_argument(parser)
    args = parser.parse_args(argv)
    if args.phase:
        print(json.dumps(run_phase(args.phase, Path(args.run), Path(args.path))))
        return {}
    print_machine()
    record = Record()
    results: dict = {"sizes": {}}
    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        work = Path(tmp)
        text = work / "text.txt"
        write_text(text, int(max(args.mb) * MB), args.level)
        save_model(work / "run", text, args.level, args.set)
        base = child("baseline", work / "run", text)["peak_mib"]
        record.note(f"baseline (imports, model loaded): peak RSS {base:,.0f} MiB")
        rows = []
        for mb in sorted(args.mb):
            path = work / f"text-{mb:g}MB.txt"
            prefix(text, path, int(mb * MB))
            r = child("stream", work / "run", path)
            results["sizes"][mb] = r
            rows.append([
                f"{mb:g}", f"{r['symbols']:,}", f"{r['seconds']:.1f}",
                f"{r['tokens'] / r['seconds']:,.0f}", f"{r['peak_mib']:,.0f}",
                f"{r['peak_mib'] - base:,.0f}", f"{r['loss']:.4f}",
            ])  # fmt: skip
        record.table(
            ["MB", "symbols", "seconds", "tokens/s", "peak RSS MiB", "above baseline", "loss"],
            rows,
            caption=f"highway eval RUN --file TEXT ({args.level} level)",
        )
        check = work / "check.txt"
        prefix(text, check, int(min(args.check_mb, min(args.mb)) * MB))
        streamed, held = (
            child("stream", work / "run", check),
            child("in-memory", work / "run", check),
        )
        same = all(streamed[k] == held[k] for k in ("loss", "tokens", "loss_se"))
        record.note(
            f"{check.stat().st_size / MB:.2f} MB prefix: eval --file loss {streamed['loss']!r} "
            f"({streamed['tokens']:,} tokens, peak {streamed['peak_mib']:,.0f} MiB); in memory "
            f"{held['loss']!r} ({held['tokens']:,} tokens, peak {held['peak_mib']:,.0f} MiB): "
            + ("identical" if same else "DIFFERENT")
        )
        results.update(baseline_mib=base, check={"stream": streamed, "in_memory": held})
        results["identical"] = same
    record.write(args.json, results)
    return results


if __name__ == "__main__":
    main()
