"""The Transformers integration (``highway_transformer.hf``, the ``hf`` extra): the wrapped
model computes our logits, segments and tokens; exported runs load with the Auto classes and
``pipeline``; a LoRA adapter trains through the Transformers ``Trainer`` and merges; lm-eval's
rolling log-likelihood is our ``highway eval --file``."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip(
    "transformers", reason="the hf extra is not installed (pip install 'highway-transformer[hf]')"
)

from conftest import LM_FAMILIES  # noqa: E402

import highway_transformer.hf as hf  # noqa: E402  (registers the Auto classes)
from highway_transformer import cli  # noqa: E402
from highway_transformer.api import load_pretrained  # noqa: E402
from highway_transformer.data.vocab import SubwordVocabulary, Vocabulary  # noqa: E402
from highway_transformer.models.families import memory_policy  # noqa: E402
from highway_transformer.models.generation import (  # noqa: E402
    detokenize,
    generate,
    generate_ids,
    tokenize_prompt,
)
from highway_transformer.models.lm import LanguageModel  # noqa: E402

WORDS = ("the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away", "home")
#: Scored by lm-eval and `highway eval --file`: 4 windows of 16 words (one out of vocabulary).
SAMPLE = "the cat sat on a mat\nand the dog ran far away home\nthe zebra sat\n" * 3
#: Tiny word-level training; evaluation in one row of windows of 16, no overlap (lm-eval's).
WORD_RUN = [
    "data.corpus=file", "data.level=word", "model.d_model=16", "model.n_layers=1",
    "model.n_heads=2", "model.d_inner=32", "data.seq_len=16", "data.batch_size=4",
    "train.max_steps=4", "train.eval_interval=4", "train.optimizer=adam", "train.lr=0.01",
]  # fmt: skip
EVAL_LIKE_LM_EVAL = ["data.eval_batch_size=1", "data.eval_seq_len=16", "data.eval_context=0"]


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def word_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("word")
    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(300)]
    (folder / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    argv = ["train", *WORD_RUN, f"data.path={folder / 'corpus.txt'}"]
    code, _, err = run_cli([*argv, "--out", str(folder / "run"), "--no-progress"])
    assert code == 0, err
    return folder / "run"


@pytest.fixture(scope="module")
def exported(word_run: Path) -> Path:
    out = word_run.parent / "hf"
    code, printed, err = run_cli(["export", str(word_run), "--format", "hf", "--out", str(out)])
    assert code == 0, err
    assert "exported to" in printed
    return out


def tiny_model(name: str) -> LanguageModel:
    torch.manual_seed(0)
    return LanguageModel(LM_FAMILIES[name]).eval()


def random_ids(model: LanguageModel, shape: tuple[int, int], seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, model.config.vocab_size, shape, generator=generator)


# ------------------------------------------------------------------ the model


@pytest.mark.parametrize("name", list(LM_FAMILIES))
def test_logits_are_ours_and_survive_save_and_auto_load(name: str, tmp_path: Path) -> None:
    ours = tiny_model(name)
    wrapped = hf.HighwayForCausalLM.from_language_model(ours)
    ids = random_ids(ours, (2, 11), seed=1)
    with torch.no_grad():
        hidden, _ = ours(ids, policy=memory_policy(ours.config, evaluation=True))
        expected = ours.logits(hidden)
        torch.testing.assert_close(wrapped(ids).logits, expected, rtol=0, atol=1e-6)
        wrapped.save_pretrained(tmp_path)
        loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
        assert isinstance(loaded, hf.HighwayForCausalLM) and loaded.dtype == torch.float32
        torch.testing.assert_close(loaded(ids).logits, expected, rtol=0, atol=1e-6)
        labels = ids.clone()
        labels[0, 3] = -100
        nll = ours(ids[:, :-1], targets=labels[:, 1:], policy=memory_policy(ours.config, True))
        torch.testing.assert_close(loaded(ids, labels=labels).loss, nll.loss, rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", list(LM_FAMILIES))
def test_a_cache_continues_segments_as_our_forward_does(name: str) -> None:
    ours = tiny_model(name)
    wrapped = hf.HighwayForCausalLM.from_language_model(ours)
    ids = random_ids(ours, (2, 12), seed=2)
    segments = ids[:, :5], ids[:, 5:9], ids[:, 9:]
    with torch.no_grad():
        cache, got = None, []
        for segment in segments:
            output = wrapped(segment, cache=cache, use_cache=True)
            cache = output.cache
            got.append(output.logits)
        assert cache.get_seq_length() == 12
        if ours.uses_memory:  # Transformer-XL: our segment-by-segment forward, memory carried
            policy, memory, expected = memory_policy(ours.config, evaluation=True), None, []
            for segment in segments:
                hidden, memory = ours(segment, memory=memory, policy=policy)
                expected.append(ours.logits(hidden))
            torch.testing.assert_close(torch.cat(got, 1), torch.cat(expected, 1), rtol=0, atol=1e-6)
        else:  # a cache of keys and values (or the context): the whole sequence at once
            torch.testing.assert_close(torch.cat(got, 1), wrapped(ids).logits, rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", list(LM_FAMILIES))
def test_generate_gives_our_tokens(name: str) -> None:
    ours = tiny_model(name)
    wrapped = hf.HighwayForCausalLM.from_language_model(ours)
    prompt = [1, 2, 3, 4, 5]
    ids = torch.tensor([prompt])

    def new_tokens(**options) -> list[int]:
        return wrapped.generate(ids, max_new_tokens=12, **options)[0, len(prompt) :].tolist()

    greedy = generate_ids(ours, prompt, 12, temperature=0)
    assert new_tokens(do_sample=False) == greedy
    assert new_tokens(do_sample=False, use_cache=False) == greedy
    assert new_tokens(do_sample=False, num_beams=3) == generate(ours, prompt, 12, num_beams=3)
    # sampling draws one multinomial a step, as ours: the same stream for the same seed
    for options in ({"temperature": 0.8, "top_k": 6}, {"temperature": 1.3, "top_p": 0.7}):
        drawn = generate_ids(ours, prompt, 12, seed=5, **options)
        torch.manual_seed(5)
        assert new_tokens(do_sample=True, top_k=options.pop("top_k", 0), **options) == drawn


def test_left_padding_and_a_foreign_cache_are_one_line_errors() -> None:
    wrapped = hf.HighwayForCausalLM.from_language_model(tiny_model("transformer"))
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    right = torch.tensor([[1, 1, 1], [1, 1, 0]])
    torch.testing.assert_close(  # right padding is never read by a causal model
        wrapped(ids, attention_mask=right).logits[1, :2], wrapped(ids[1:, :2]).logits[0]
    )
    with pytest.raises(hf.modeling.ConfigError, match="left padding"):
        wrapped(ids, attention_mask=torch.tensor([[1, 1, 1], [0, 1, 1]]))
    with pytest.raises(hf.modeling.ConfigError, match="HighwayCache"):
        wrapped(ids, cache=transformers.DynamicCache())


# ------------------------------------------------------------------ tokenizers


def vocabularies() -> dict[str, Vocabulary]:
    text = "the cat sat on the mat. a dog ran far away!\n"
    return {
        "char": Vocabulary.build(text, "char"),
        "char-ptb": Vocabulary.build("the_cat_sat_on_a_mat", "char", eos="<eos>"),
        "word": Vocabulary.build(text.split(), "word", unk="<unk>", eos="<eos>"),
        "byte": Vocabulary([chr(b) for b in range(256)], "byte"),
        "bpe": SubwordVocabulary.train(text * 20, "bpe", 300),
    }


@pytest.mark.parametrize("level", ["char", "char-ptb", "word", "byte", "bpe"])
def test_tokenizers_encode_and_decode_as_our_vocabularies(level: str, tmp_path: Path) -> None:
    vocab = vocabularies()[level]
    hf.build_tokenizer(vocab).save_pretrained(tmp_path)
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path)
    prompts = {
        "char": "the cat sat.\na dog!",
        "char-ptb": "the cat\nsat",
        "word": "the cat sat on a zebra",
        "byte": "the café – naïve\n",
        "bpe": "the dog sat far away.\n",
    }
    prompt = prompts[level]
    ids = tokenize_prompt(vocab, prompt)
    assert tokenizer(prompt)["input_ids"] == ids
    assert tokenizer.decode(ids) == detokenize(vocab, ids)
    if level != "word":  # an unknown word decodes as <unk>
        assert tokenizer.decode(ids) == prompt
    if vocab.eos is not None:
        assert tokenizer.eos_token_id == vocab.index[vocab.eos]
        line_end = ["cat", vocab.eos, "sat"] if level == "word" else [*"cat", vocab.eos, *"sat"]
        assert tokenizer("cat\nsat")["input_ids"] == vocab.encode(line_end)


# ------------------------------------------------------------------ exported runs


def test_an_exported_run_loads_with_the_auto_classes_and_pipeline(
    word_run: Path, exported: Path
) -> None:
    ours, _, vocab = load_pretrained(word_run)
    model = transformers.AutoModelForCausalLM.from_pretrained(exported)
    tokenizer = transformers.AutoTokenizer.from_pretrained(exported)
    prompt = "the cat sat on"
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    assert ids[0].tolist() == tokenize_prompt(vocab, prompt)
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, ours.logits(ours(ids)[0]), rtol=0, atol=1e-6)
    pipe = transformers.pipeline("text-generation", model=str(exported))
    out = pipe(prompt, max_new_tokens=6, do_sample=False, return_tensors=True)
    greedy = generate_ids(ours, ids[0].tolist(), 6, temperature=0)
    assert out[0]["generated_token_ids"][ids.shape[1] :] == greedy
    text = pipe(prompt, max_new_tokens=6, do_sample=False)[0]["generated_text"]
    assert text.startswith(prompt) and len(text.split()) >= len(prompt.split())


def test_export_refuses_bad_input_in_one_line(word_run: Path, exported: Path, tmp_path) -> None:
    copy_run = tmp_path / "copy"
    tiny = ["model.n_layers=1", "model.d_model=16", "model.d_inner=32", "train.max_steps=1"]
    trained = run_cli(["train", "--task", "copy", *tiny, "--out", str(copy_run), "--no-progress"])
    assert trained[0] == 0
    cases = {
        str(tmp_path / "nothing"): "no checkpoint",
        str(copy_run): "copy checkpoint",
    }
    for folder, says in cases.items():
        code, _, err = run_cli(["export", folder, "--out", str(tmp_path / "out")])
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert code == 2 and len(errors) == 1 and says in errors[0]  # besides "weights: ..."
    code, _, err = run_cli(["export", str(word_run), "--out", str(exported)])
    assert code == 2 and "not an empty folder" in err.splitlines()[-1]
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ PEFT and lm-eval


def test_a_lora_adapter_trains_with_the_trainer_and_merges(exported: Path, tmp_path) -> None:
    peft = pytest.importorskip("peft", reason="peft (the hf extra) is not installed")
    model = transformers.AutoModelForCausalLM.from_pretrained(exported)
    before = model.highway.blocks[0].sublayers[0].attention.out.weight.detach().clone()
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["out"], init_lora_weights=True)
    adapted = peft.get_peft_model(model, config)
    generator = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    rows = [torch.randint(0, vocab, (16,), generator=generator) for _ in range(8)]
    data = [{"input_ids": r, "labels": r} for r in rows]
    arguments = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=3, per_device_train_batch_size=4, learning_rate=0.05,
        use_cpu=True, report_to=[], save_strategy="no", logging_steps=1, disable_tqdm=True,
    )  # fmt: skip
    transformers.Trainer(model=adapted, args=arguments, train_dataset=data).train()
    adapted.eval()
    batch = torch.stack(rows[:2])
    with torch.no_grad():
        with_adapter = adapted(input_ids=batch).logits
        merged = adapted.merge_and_unload()
        torch.testing.assert_close(merged(batch).logits, with_adapter, rtol=0, atol=1e-5)
    after = merged.highway.blocks[0].sublayers[0].attention.out.weight
    assert not torch.equal(after, before)  # the adapter learned and was merged in


def _write_local_task(folder: Path) -> None:
    """lm-eval's task ``local_text``: the rolling log-likelihood of SAMPLE, from local files."""
    (folder / "sample.txt").write_text(SAMPLE, encoding="utf-8")
    (folder / "docs.jsonl").write_text(json.dumps({"text": SAMPLE}) + "\n", encoding="utf-8")
    (folder / "local_text.yaml").write_text(
        "task: local_text\ndataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {folder / 'docs.jsonl'}\n"
        "test_split: test\noutput_type: loglikelihood_rolling\n"
        'doc_to_text: ""\ndoc_to_target: "{{text}}"\n'
        "metric_list:\n  - metric: word_perplexity\n",
        encoding="utf-8",
    )


def test_lm_eval_rolling_loglikelihood_is_our_file_score(
    word_run: Path, exported: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lm_eval = pytest.importorskip("lm_eval", reason="lm-eval (the hf extra) is not installed")
    from lm_eval.tasks import TaskManager

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    _write_local_task(tmp_path)
    results = lm_eval.simple_evaluate(
        model="hf",
        model_args=f"pretrained={exported},max_length=16,dtype=float32",
        tasks=["local_text"],
        task_manager=TaskManager(include_path=str(tmp_path), include_defaults=False),
        device="cpu",
        batch_size=2,
        log_samples=True,
    )
    theirs = results["samples"]["local_text"][0]["filtered_resps"][0]
    argv = ["eval", str(word_run), "--file", str(tmp_path / "sample.txt"), "--json"]
    code, printed, err = run_cli([*argv, *EVAL_LIKE_LM_EVAL, "--no-progress"])
    assert code == 0, err
    score = json.loads(printed)
    assert score["tokens"] == len(SAMPLE.split()) + SAMPLE.count("\n") > 3 * 16
    assert theirs == pytest.approx(-score["loss"] * score["tokens"], abs=1e-4)


@pytest.mark.slow
def test_lm_evals_command_line_runs_through_our_module(
    word_run: Path, exported: Path, tmp_path: Path
) -> None:
    """``python -m highway_transformer.hf.lm_eval``: lm-eval's own command line with our
    classes registered; the same rolling log-likelihood as ``highway eval --file``."""
    pytest.importorskip("lm_eval", reason="lm-eval (the hf extra) is not installed")
    _write_local_task(tmp_path)
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "highway_transformer.hf.lm_eval", "--model", "hf",
        "--model_args", f"pretrained={exported},max_length=16,dtype=float32",
        "--tasks", "local_text", "--include_path", str(tmp_path), "--device", "cpu",
        "--batch_size", "2", "--log_samples", "--output_path", str(out),
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (samples,) = out.rglob("samples_local_text_*.jsonl")
    theirs = json.loads(samples.read_text(encoding="utf-8").splitlines()[0])["filtered_resps"][0]
    argv = ["eval", str(word_run), "--file", str(tmp_path / "sample.txt"), "--json"]
    code, printed, err = run_cli([*argv, *EVAL_LIKE_LM_EVAL, "--no-progress"])
    assert code == 0, err
    score = json.loads(printed)
    assert float(theirs) == pytest.approx(-score["loss"] * score["tokens"], abs=1e-4)
