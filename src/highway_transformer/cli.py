"""The ``highway`` command line.

    highway train --preset ht-table1/t-l3+sigmoid data.path=DIR --out runs/sigmoid
    highway train --config my.yaml train.max_steps=2000 --out runs/mine --resume
    highway eval runs/sigmoid --split test
    highway presets
    highway demo

Errors caused by input (unknown names, bad values, missing data, incompatible checkpoints,
a diverged loss) are printed as one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .config.names import TASK_NAMES
from .errors import ConfigError, HighwayError, PeerFailed, TrainingInterrupted
from .experiments.named import DEMO

if TYPE_CHECKING:
    from .config import Config


def _train(args: argparse.Namespace) -> int:
    from .experiments.scale import describe_scale
    from .training.launch import launch, watch_launcher, without_nproc

    watch_launcher()  # a rank of `highway train --nproc`: stop when the launcher dies
    config, scaling = _train_config(args)  # validated once; a typo answers before torch
    if args.trust_unverified and not args.resume:
        raise ConfigError(
            "--trust-unverified lets --resume read a checkpoint without its manifest; add "
            "--resume, or drop it"
        )
    if args.max_restarts is not None and args.nproc is None:
        raise ConfigError(
            "--max-restarts restarts the processes of --nproc N; add --nproc 1 (or more), or "
            "under torchrun give torchrun --max-restarts"
        )
    if args.nproc is not None:
        from .runtime.world import check_divisible

        check_divisible(config.data.batch_size, args.nproc)
        launch(args.nproc, without_nproc(args.argv[1:]), args.max_restarts or 0)
        return 0
    from .runtime.world import is_main_process
    from .training.trainer import train

    if args.scale is not None and is_main_process():
        _log(f"scale {describe_scale(args.scale)}")
        if scaling:
            _log(scaling)
    out = Path(args.out or Path("runs") / config.name)
    results = train(
        config,
        out,
        resume=args.resume,
        overwrite=args.overwrite,
        progress=not args.no_progress,
        log=_log,
        trust_unverified=args.trust_unverified,
    )
    if is_main_process():
        _print_metrics(results, results.get("level"))
        print(f"run folder: {out}")
    return 0


def _train_config(args: argparse.Namespace) -> tuple[Config, str]:
    """The validated config of ``highway train``: preset or task preset, ``--scale``,
    ``--config``, ``--task``, ``--data-path`` and the overrides, in that order; and the line
    naming what ``--scale`` changed (``""`` without one)."""
    from .config import Config, apply_overrides
    from .presets import get_preset, task_preset
    from .validation import build_config

    if args.preset:
        base = get_preset(args.preset)
    elif args.task:
        base = task_preset(args.task)  # a task's own small preset, not the d512 LM config
    else:
        base = Config()
    overrides = [f"task.name={args.task}"] if args.task else []
    if args.data_path:
        overrides.append(f"data.path={args.data_path}")
    file = args.config
    overrides += args.overrides
    if args.scale is None:
        return build_config(base, file, overrides), ""
    from .experiments.scale import get_scale, scale_changes, scaled
    from .validation import check_overrides

    get_scale(args.scale)  # an unknown name is an error before any file is read
    asked = check_overrides(base, file, overrides)  # the forms, before scaling reads them
    # the preset and file shrunk as `highway run` shrinks a row; the overrides win
    shrunk = scaled(apply_overrides(base, file), args.scale)
    if args.scale != "paper":
        shrunk = shrunk.replace(name=f"{shrunk.name}_{args.scale}")
    config = build_config(shrunk, None, overrides)  # validated here, once
    return config, scale_changes(asked, config, args.scale)


def _weights(path: str, which: str, trust_unverified: bool = False) -> Path:
    """The weights folder ``eval``/``generate`` use: a run folder's ``best/`` (best
    validation) unless ``--weights last`` asks for ``checkpoint/``; a checkpoint folder as
    given. Says which on stderr, so a reported number can be traced to its weights (and
    that they are read unchecked, where ``--trust-unverified`` lets a folder without a
    manifest load)."""
    from .storage.folder import CONFIG_FILE, resolve, unchecked_note
    from .storage.runfolder import BEST_DIR, CHECKPOINT_DIR

    folder = Path(path)
    sub = {"best": BEST_DIR, "last": CHECKPOINT_DIR}[which]
    if (folder / sub / CONFIG_FILE).is_file():
        folder = folder / sub
    elif which == "best" and (folder / CHECKPOINT_DIR / CONFIG_FILE).is_file():
        _log(f"note: {path} has no best/ weights yet; using checkpoint/ (the last step)")
        folder = folder / CHECKPOINT_DIR
    folder = resolve(folder)  # a clear error where there are no weights
    _log(f"weights: {folder}")
    note = unchecked_note(folder) if trust_unverified else None
    if note:
        _log(note)
    return folder


def _eval(args: argparse.Namespace) -> int:
    splits = ["valid", "test"] if args.split == "both" else [args.split]
    weights = _weights(args.checkpoint, args.weights, args.trust_unverified)
    overrides = list(args.overrides)
    if args.data_path:
        overrides.append(f"data.path={args.data_path}")
    from .config import Config
    from .validation import check_overrides

    check_overrides(Config(), None, overrides)  # on the defaults: the checkpoint's comes later
    from .api import evaluate_checkpoint
    from .runtime.device import resolve_device

    if args.file:
        return _eval_file(args, weights, overrides)
    trust = args.trust_unverified
    device, progress = resolve_device(args.device), not args.no_progress
    out = evaluate_checkpoint(
        weights, splits, device, overrides, trust_unverified=trust, progress=progress
    )
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        _print_metrics(out, _level(weights, trust))
    return 0


def _level(weights: Path, trust_unverified: bool) -> str | None:
    """A language model's vocabulary level (None for the other tasks)."""
    from .data.levels import corpus_level
    from .storage.folder import trusting_unverified
    from .validation import checkpoint_config

    with trusting_unverified(trust_unverified):
        config = checkpoint_config(weights)
    return corpus_level(config.data) if config.task.name == "lm" else None


def _eval_file(args: argparse.Namespace, weights: Path, overrides: list[str]) -> int:
    from .api import load_pretrained
    from .data.levels import bits_label, token_name
    from .runtime.device import resolve_device
    from .tasks.file_eval import evaluate_file
    from .validation import build_config

    device = resolve_device(args.device)
    model, config, vocab = load_pretrained(weights, device, trust_unverified=args.trust_unverified)
    if vocab is None:
        raise ConfigError("--file scores text with a language model; this is a task run")
    config = build_config(config, None, overrides)
    score = evaluate_file(model, vocab, args.file, config, device, progress=not args.no_progress)
    if args.json:
        print(json.dumps({"file": str(args.file), **score.as_dict()}, indent=2))
        return 0
    r, token = score.result, token_name(vocab.level)
    print(
        f"{args.file}: loss {r.loss:.4f} ± {r.loss_se:.4f} nats | {r.bits:.4f} "
        f"{bits_label(vocab.level)} | ppl {r.perplexity:.2f} | {r.tokens} {token}s scored of "
        f"{score.symbols} | {score.oov} out of vocabulary"
    )
    return 0


def _baselines(args: argparse.Namespace) -> int:
    """Losses of trivial models of a task's valid/test splits (what a model must beat)."""
    from .config import Config
    from .presets import get_preset
    from .validation import build_config

    base = get_preset(args.preset) if args.preset else Config()
    overrides = [f"data.path={args.data_path}"] if args.data_path else []
    config = build_config(base, None, overrides + list(args.overrides))  # forms before torch
    from .data.levels import corpus_level, metric_label
    from .tasks import task_baselines

    found = task_baselines(config)
    if args.json:
        print(json.dumps({"task": config.task.name, "baselines": found}, indent=2))
        return 0
    print(f"task {config.task.name}: trivial models estimated on the training split")
    level = corpus_level(config.data) if config.task.name == "lm" else None
    for model, by_split in found.items():
        for split, metrics in by_split.items():
            figures = " | ".join(
                f"{name if level is None else metric_label(name, level)} {value:.4f}"
                for name, value in metrics.items()
            )
            print(f"{model} {split}: {figures}")
    return 0


def _presets(args: argparse.Namespace) -> int:
    from .presets import PRESETS, get_preset

    if args.name:
        config = get_preset(args.name)
        import yaml

        print(f"# {PRESETS[args.name].description}\n# source: {config.source}")
        print(yaml.safe_dump(json.loads(config.to_json()), sort_keys=False), end="")
        return 0
    width = max(len(n) for n in PRESETS)
    for name, preset in PRESETS.items():
        print(f"{name:<{width}}  {preset.description}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    for name in ("steps", "seeds", "jobs"):  # checked by run_named_ab too, after torch is imported
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ConfigError(f"--{name} must be >= 1, got {value}")
    from .cli_experiments import run_named_ab

    summary = run_named_ab(
        DEMO,
        args.out,
        steps=args.steps,
        seeds=args.seeds,
        jobs=args.jobs,
        progress=not args.no_progress,
        log=_log,
        allow_mixed_code=args.allow_mixed_code,
        tiny=args.tiny,
    )
    out = Path(args.out)
    print((out / "report.md").read_text(encoding="utf-8"))
    print(f"report written to {out / 'report.md'} (all of it: {out / summary['report']})")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from .report.compare import compare_runs

    summary = compare_runs(args.run_dirs, args.out, args.baseline)
    print((Path(args.out) / "compare.md").read_text(encoding="utf-8"))
    print(f"written to {Path(args.out) / 'compare.md'} and {summary['plot']}")
    return 0


def _analyze(args: argparse.Namespace) -> int:
    from .errors import ConfigError

    if args.max_tokens < 1:
        raise ConfigError(f"--max-tokens must be at least 1, got {args.max_tokens}")
    weights = _weights(args.run, args.weights, args.trust_unverified)
    overrides = [f"data.path={args.data_path}"] if args.data_path else []
    from .api import analyze_checkpoint
    from .files import make_folder
    from .report.analysis import ANALYSIS_FILE, headline, write_figures
    from .runtime.device import resolve_device

    analysis = analyze_checkpoint(
        weights, args.split, args.max_tokens, resolve_device(args.device), overrides,
        trust_unverified=args.trust_unverified,
    )  # fmt: skip
    run = Path(args.run)
    out = make_folder(args.out or (run if run.is_dir() else weights.parent), "--out")
    if weights.resolve().is_relative_to(out.resolve()):  # the record moves with its folder
        analysis["weights"] = weights.resolve().relative_to(out.resolve()).as_posix()
    (out / ANALYSIS_FILE).write_text(json.dumps(analysis, indent=2), encoding="utf-8")
    figures = write_figures(analysis, out, "/".join(run.resolve().parts[-2:]))
    print(_analysis_summary(headline(analysis)))
    print(f"written to {out / ANALYSIS_FILE} and {len(figures)} figure(s) in {out}")
    return 0


def _analysis_summary(head: dict) -> str:
    """One line of :func:`~highway_transformer.report.analysis.headline`."""
    parts = []
    if head["sink"] is not None:
        layers = ", ".join(
            f"{k.replace('layer', 'L')} {v:.3f}" for k, v in head["sink_by_layer"].items()
        )
        parts.append(f"first-token attention {layers} (uniform {head['sink_uniform']:.3f})")
    if "gate_mean" in head:
        parts.append(f"gate mean {head['gate_mean']:.3f}, {head['gate_below_0.1']:.1%} below 0.1")
    if head["activation_ratio_max"] is not None:
        parts.append(f"largest |h| / median {head['activation_ratio_max']:.0f}")
    return "; ".join(parts)


def _download(args: argparse.Namespace) -> int:
    from .config import DataConfig
    from .data.corpora import load_corpus

    corpus = {"ptb": "ptb-word"}.get(args.corpus, args.corpus)
    loaded = load_corpus(DataConfig(corpus=corpus), download=True)
    print(f"{args.corpus}: {loaded.train.numel():,} training tokens, {len(loaded.vocab)} symbols")
    return 0


def _generate(args: argparse.Namespace) -> int:
    from .config.sampling import check_sampling

    check_sampling(args.tokens, args.temperature, args.top_k, args.top_p, args.seed)
    weights = _weights(args.checkpoint, args.weights, args.trust_unverified)
    from .api import load_pretrained
    from .errors import CheckpointError
    from .models.generation import generate
    from .runtime.device import resolve_device

    device = resolve_device(args.device)
    model, config, vocab = load_pretrained(weights, device, trust_unverified=args.trust_unverified)
    if vocab is None:
        raise CheckpointError(
            f"{args.checkpoint} is a {config.task.name} checkpoint; generate continues text "
            "with a language model (task.name=lm)"
        )
    text = generate(
        model,
        args.prompt,
        args.tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        num_beams=args.beams,
        stop_strings=args.stop,
        vocab=vocab,
        seed=args.seed,
        use_cache=not args.no_cache,
        return_prompt=args.echo,
    )
    print(text)
    return 0


def _export(args: argparse.Namespace) -> int:
    weights = _weights(args.checkpoint, args.weights, args.trust_unverified)
    from .hf import export_hf  # without transformers: a one-line MissingExtra

    out = export_hf(weights, args.out, trust_unverified=args.trust_unverified)
    print(f"exported to {out} (load it after `import highway_transformer.hf`)")
    return 0


def _log(message: str) -> None:
    print(message, file=sys.stderr)


def _print_metrics(results: dict, level: str | None = None) -> None:
    """One line of named metrics per split present in ``results``, named by the language
    model's ``level`` (``bpc`` reads ``bits/word`` at word level), the loss with its standard
    error."""
    from .data.levels import metric_label

    for split in ("valid", "test"):
        if split not in results:
            continue
        metrics = dict(results[split])
        se = metrics.pop("loss_se", None)
        shown = []
        for key, value in metrics.items():
            name = key if level is None else metric_label(key, level)
            plus = f" ± {se:.4f}" if key == "loss" and se is not None else ""
            shown.append(f"{name} {_number(value)}{plus}")
        print(f"{split}: {' | '.join(shown)}")


def _number(value: float) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


class _CommandParser(argparse.ArgumentParser):
    """A sub-command parser whose ``KEY=VALUE`` overrides may come before and after options
    (``highway train a=1 --no-progress b=2``)."""

    _intermixing = False

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        remainder = any(a.nargs in (argparse.REMAINDER, argparse.PARSER) for a in self._actions)
        if self._intermixing or remainder:
            return super().parse_known_args(args, namespace)
        self._intermixing = True  # the intermixed parse calls parse_known_args itself
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("highway-transformer")
    except PackageNotFoundError:  # running from a source tree
        from . import __version__

        return __version__


def _data_path_option(p: argparse.ArgumentParser, what: str) -> None:
    # One spelling everywhere (--data-path); --data-dir stays as an alias of the older form.
    p.add_argument("--data-path", "--data-dir", dest="data_path", help=f"{what} (sets data.path)")


def _weights_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--weights",
        choices=["best", "last"],
        default="best",
        help="for a run folder: best/ (best validation, default) or last (checkpoint/)",
    )


def _trust_option(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--trust-unverified",
        action="store_true",
        help=f"{what} a checkpoint folder without manifest.json (its files cannot be checked: "
        "only for a folder you trust)",
    )


def _config(args: argparse.Namespace) -> int:
    from .config.keys import format_keys

    print(format_keys(args.section))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from .experiments.scale import SCALES

    parser = argparse.ArgumentParser(
        prog="highway", description="Self-gated Transformer sequence models (Highway Transformer)."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_CommandParser)

    p = sub.add_parser("train", help="train a model from a preset and/or a config file")
    p.add_argument("--preset", help="preset name (see `highway presets`)")
    p.add_argument("--config", help="YAML or TOML file applied on top of the preset")
    p.add_argument("--out", help="run folder (default runs/NAME)")
    p.add_argument("--resume", action="store_true", help="continue the run folder's checkpoint")
    _trust_option(p, "with --resume, continue from")
    p.add_argument(
        "--overwrite", action="store_true", help="replace the records of a run already in --out"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--task",
        choices=list(TASK_NAMES),
        help="the task to train, from its small preset unless --preset is given "
        "(default: the preset's task, or lm)",
    )
    _data_path_option(p, "where the corpus or the task's data lives")
    p.add_argument(
        "--scale",
        help=" | ".join(SCALES) + ": shrink the preset (and --config) by the rules of "
        "`highway run --scale`; KEY=VALUE overrides still win",
    )
    p.add_argument(
        "--nproc",
        type=int,
        help="train in N local processes (data parallel; torchrun on this machine)",
    )
    p.add_argument(
        "--max-restarts",
        type=int,
        metavar="M",
        help="with --nproc: when a process fails, start them all again from the last "
        "checkpoint, up to M times (torchrun's --max-restarts)",
    )
    p.add_argument(
        "overrides", nargs="*", metavar="KEY=VALUE", help="e.g. train.lr=0.5 (see `highway config`)"
    )
    p.set_defaults(func=_train)

    p = sub.add_parser("eval", help="evaluate a run's best weights on a split or a text file")
    p.add_argument("checkpoint", metavar="RUN", help="run folder or checkpoint folder")
    p.add_argument("--split", default="test", choices=["valid", "test", "both"], help="split")
    p.add_argument(
        "--file",
        help="score this whole text file instead (bits, perplexity, OOV; any size: read in "
        "pieces, its ids in a temporary file when large)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars (on stderr)")
    _weights_option(p)
    _data_path_option(p, "where the corpus lives, if not where it was trained")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N | mps")
    p.add_argument("--json", action="store_true", help="print JSON")
    _trust_option(p, "evaluate")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="e.g. data.eval_seq_len=80")
    p.set_defaults(func=_eval)

    p = sub.add_parser("generate", help="continue a prompt with a trained model")
    p.add_argument("checkpoint", metavar="RUN", help="run folder or checkpoint folder")
    p.add_argument("--prompt", required=True, help="text to continue")
    p.add_argument("--tokens", type=int, default=200, help="symbols to generate (default 200)")
    p.add_argument("--temperature", type=float, default=1.0, help="0 means greedy (default 1)")
    p.add_argument("--top-k", type=int, default=0, help="sample among the k likeliest (0: all)")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (1: all)")
    p.add_argument("--beams", type=int, help="beam search with this many beams (not sampling)")
    p.add_argument("--stop", action="append", default=[], help="stop at this text (repeatable)")
    p.add_argument("--seed", type=int, default=None, help="sampling seed")
    p.add_argument("--echo", action="store_true", help="print the prompt before its continuation")
    _weights_option(p)
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N | mps")
    p.add_argument("--no-cache", action="store_true", help="recompute the context every step")
    _trust_option(p, "continue with")
    p.set_defaults(func=_generate)

    p = sub.add_parser(
        "export", help="write a language model run as a Transformers folder (AutoModelForCausalLM)"
    )
    p.add_argument("checkpoint", metavar="RUN", help="run folder or checkpoint folder")
    p.add_argument(
        "--format", default="hf", choices=["hf"], help="hf: Transformers (model + tokenizer)"
    )
    p.add_argument("--out", required=True, help="a new or empty folder to write")
    _weights_option(p)
    _trust_option(p, "export")
    p.set_defaults(func=_export)

    p = sub.add_parser(
        "baselines",
        help="losses of trivial models of a task's data (n-grams, note frequencies; for "
        "pixels the class prior, 1-NN and logistic regression): what to beat",
    )
    p.add_argument("--preset", help="take the corpus settings of this preset")
    _data_path_option(p, "where the corpus lives")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="e.g. data.corpus=ptb-char")
    p.set_defaults(func=_baselines)

    p = sub.add_parser("presets", help="list presets, or print one as YAML")
    p.add_argument("name", nargs="?", help="print this preset as YAML")
    p.set_defaults(func=_presets)

    p = sub.add_parser("config", help="list every config key with its default and meaning")
    p.add_argument("section", nargs="?", help="only this section: model, data, train, task, ...")
    p.set_defaults(func=_config)

    p = sub.add_parser(
        "demo",
        help="plain vs σ-SDU vs tanh-SDU on the embedded corpus over seeds: an A/B with intervals",
        description="Train a plain, a σ-SDU and a tanh-SDU 3-layer Transformer on the embedded "
        "corpus over --seeds seeds as one `highway ab` (plain the baseline; the same seed and "
        "data order for every model), then write OUT/report.md: each gate minus plain, paired "
        "by seed, with its 95% t-interval and verdict, every seed's value, the trivial "
        "models' scores and a sample from each model. Rerunning the command resumes it.",
    )
    p.add_argument("--out", default="runs/demo", help="report folder (default runs/demo)")
    p.add_argument(
        "--steps",
        type=int,
        default=DEMO.steps,
        help=f"training steps per run (default {DEMO.steps})",
    )
    p.add_argument(
        "--seeds", type=int, default=DEMO.seeds, help=f"seeds per model (default {DEMO.seeds})"
    )
    p.add_argument(
        "--jobs",
        type=int,
        help="runs trained at once, each on CPU cores / jobs threads (default: one a CPU core, "
        "at most the number of runs)",
    )
    p.add_argument(
        "--tiny",
        action="store_true",
        help="d-16 models on 20,000 training characters: checks an installation in seconds "
        "(with --steps 2 --seeds 1); the numbers say nothing about the gates",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    from .cli_experiments import _allow_mixed_code_option, add_commands

    _allow_mixed_code_option(p)
    p.set_defaults(func=_demo)

    p = sub.add_parser("compare", help="convergence figure and table for any run folders")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="folders made by highway train")
    p.add_argument("--out", required=True, help="folder for compare.md, .json and .png")
    p.add_argument("--baseline", help="run the others are measured against (default: the first)")
    p.set_defaults(func=_compare)

    p = sub.add_parser(
        "analyze", help="attention sink, gate sparsity and massive activations of a trained run"
    )
    p.add_argument("run", metavar="RUN", help="run folder or checkpoint folder")
    p.add_argument("--split", default="valid", choices=["valid", "test"], help="split read")
    p.add_argument("--max-tokens", type=int, default=20_000, help="tokens read (default 20,000)")
    p.add_argument("--out", help="folder for analysis.json and figures (default: the run folder)")
    p.add_argument(
        "--weights", choices=["best", "last"], default="last",
        help="for a run folder: last (checkpoint/, default: what registered tables score) or best",
    )  # fmt: skip
    _data_path_option(p, "where the corpus lives, if not where it was trained")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N | mps")
    _trust_option(p, "analyse")
    p.set_defaults(func=_analyze)

    p = sub.add_parser("download", help="download a corpus into the cache (checksum-checked)")
    p.add_argument("corpus", choices=["ptb", "enwik8", "text8", "wikitext-103"], help="corpus")
    p.set_defaults(func=_download)

    add_commands(sub)
    return parser


def torch_oom() -> type[BaseException]:
    """torch's out-of-memory error, without importing torch for commands that never use it."""
    torch = sys.modules.get("torch")
    return getattr(torch, "OutOfMemoryError", MemoryError) if torch else MemoryError


def _fail(message: str, kind: str = "failed") -> int:
    line = " ".join(message.split())  # always one line
    if not _handed_over(kind, line):
        print("error: " + line, file=sys.stderr)
    return 2


def _handed_over(kind: str, line: str, signal_number: int | None = None) -> bool:
    """Whether a rank of ``highway train --nproc`` leaves its last line to the launcher (which
    prints one line for the run), or a stop to rank 0."""
    if "RANK" not in os.environ:
        return False
    from .training.launch import hand_over

    return hand_over(kind, line, signal_number)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    from .validation import validating_once  # torch-free

    try:
        with validating_once():  # a command validates each config once
            return int(args.func(args) or 0)
    except TrainingInterrupted as exc:  # a checkpoint was written: not a failure of input
        line = " ".join(str(exc).split())  # "stopped by SIGTERM: ..."
        if not _handed_over("stopped", line, exc.signal_number):
            print(line, file=sys.stderr)
        return exc.exit_status
    except PeerFailed as exc:  # another rank's failure: the launcher names that one
        return _fail(str(exc), "timeout" if exc.timed_out else "peer")
    except HighwayError as exc:
        return _fail(str(exc))
    except OSError as exc:  # a place we cannot write or read: disk full, permissions, a file
        where = f" {exc.filename}" if exc.filename else ""
        return _fail(f"cannot use{where}: {exc.strerror or exc}; free space or choose another path")
    except (MemoryError, torch_oom()):
        return _fail("out of memory; use a smaller model, batch_size or seq_len")
    except KeyboardInterrupt:
        print(
            "interrupted at once: the steps since the last checkpoint are lost; continue with "
            "--resume (a table or an A/B: the same `highway run` or `highway ab` command)",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
