"""Subword vocabularies: BPE and unigram tokenizers trained on the user's text."""

from __future__ import annotations

import hashlib
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from highway_transformer import Config, load_corpus, train
from highway_transformer.api import load_pretrained
from highway_transformer.data.vocab import SubwordVocabulary, Vocabulary
from highway_transformer.errors import CheckpointError, ConfigError, DataError, MissingExtra
from highway_transformer.models.generation import generate_text
from highway_transformer.storage.folder import TOKENIZER_FILE
from highway_transformer.validation import build_config, validate

pytest.importorskip("tokenizers")

WORDS = ["the", "gate", "highway", "transformer", "learns", "to", "skip", "layers", "fast"]


def _text(n_lines: int = 400, seed: int = 0) -> str:
    rng = random.Random(seed)
    return "".join(" ".join(rng.choice(WORDS) for _ in range(8)) + ".\n" for _ in range(n_lines))


@pytest.fixture(scope="module")
def english() -> str:
    """100k characters of English prose (CPython's documentation topics, in the stdlib)."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key] for key in sorted(topics))[:100_000]


@pytest.mark.parametrize("level", ["bpe", "unigram"])
def test_tokenizer_round_trips_any_text(level: str, english: str) -> None:
    vocab = SubwordVocabulary.train(english, level, 500)
    assert vocab.level == level and len(vocab) == 500
    for text in (english[-2000:], "  unseen wörds ∑ 😀\n\ttabs\n\n"):
        ids = vocab.encode_text(text)
        assert vocab.decode_text(ids) == text  # byte level: lossless, nothing unknown
    # pieces learnt from the training text: common words take one token or two
    sentence = "the function returns the value of the attribute"
    assert len(vocab.encode_text(sentence)) <= len(sentence.split()) * 2


@pytest.mark.parametrize("level", ["bpe", "unigram"])
def test_the_same_text_gives_the_same_tokenizer(level: str, english: str) -> None:
    # the unigram trainer orders some pieces differently on every run; ids must not change
    first, second = (SubwordVocabulary.train(english[:30_000], level, 400) for _ in range(2))
    assert first.sha256 == second.sha256 and first == second


def test_vocabulary_saves_its_tokenizer_with_a_checksum(tmp_path: Path) -> None:
    vocab = SubwordVocabulary.train(_text(), "bpe", 300)
    vocab.save(tmp_path / "vocab.json")
    saved = json.loads((tmp_path / "vocab.json").read_text(encoding="utf-8"))
    raw = (tmp_path / TOKENIZER_FILE).read_bytes()
    assert saved["tokenizer_sha256"] == hashlib.sha256(raw).hexdigest()
    loaded = Vocabulary.load(tmp_path / "vocab.json")
    assert isinstance(loaded, SubwordVocabulary) and loaded == vocab
    text = _text(3, seed=2)
    assert loaded.encode_text(text).tolist() == vocab.encode_text(text).tolist()
    (tmp_path / TOKENIZER_FILE).write_bytes(raw.replace(b'"the"', b'"teh"', 1) + b" ")
    with pytest.raises(CheckpointError, match="SHA-256"):
        Vocabulary.load(tmp_path / "vocab.json")
    (tmp_path / TOKENIZER_FILE).unlink()
    with pytest.raises(CheckpointError, match="tokenizer file"):
        Vocabulary.load(tmp_path / "vocab.json")


@pytest.fixture
def subword_config(tiny_file_config: Callable[..., Config]) -> Callable[..., Config]:
    """``subword_config(path, level="bpe")``: the tiny model of ``path`` with 300 subwords."""
    settings = {
        "data.subword_vocab_size": 300,
        "train.schedule": "constant",
        "train.max_steps": 4,
        "train.eval_interval": 2,
        "train.log_interval": 2,
    }
    return lambda path, level="bpe": tiny_file_config(path, **{"data.level": level, **settings})


def test_a_bpe_corpus_trains_and_round_trips(
    tmp_path: Path, subword_config: Callable[..., Config]
) -> None:
    text = _text(600)
    (tmp_path / "corpus.txt").write_text(text, encoding="utf-8")
    config = validate(subword_config(tmp_path / "corpus.txt"))
    corpus = load_corpus(config.data)
    assert isinstance(corpus.vocab, SubwordVocabulary) and len(corpus.vocab) <= 300
    # the three splits decode back to the file, in order
    parts = [corpus.vocab.decode_text(corpus.split(s).tolist()) for s in ("train", "valid", "test")]
    assert "".join(parts) == text
    train(config, tmp_path / "run")
    for folder in ("checkpoint", "best"):
        assert (tmp_path / "run" / folder / TOKENIZER_FILE).is_file()
    model, saved_config, vocab = load_pretrained(tmp_path / "run" / "best")
    assert vocab == corpus.vocab
    # the checkpoint's tokenizer gives the same ids as the one trained on the corpus
    again = load_corpus(saved_config.data, vocab=vocab)
    assert again.test.tolist() == corpus.test.tolist()
    out = generate_text(model, vocab, "the highway ", 5, temperature=0)
    assert isinstance(out, str) and out


def test_subword_settings_that_do_not_apply_are_errors(
    tmp_path: Path, subword_config: Callable[..., Config]
) -> None:
    with pytest.raises(ConfigError, match="data.corpus=file"):
        build_config(Config(), overrides=["data.level=bpe"])
    with pytest.raises(ConfigError, match="subword_vocab_size applies"):
        build_config(Config(), overrides=["data.corpus=file", "data.subword_vocab_size=500"])
    with pytest.raises(ConfigError, match="data.cache applies"):
        build_config(Config(), overrides=["data.cache=false"])
    with pytest.raises(DataError, match="at least 256"):
        SubwordVocabulary.train("some text", "unigram", 100)
    char_vocab = Vocabulary.build("abc", "char")
    (tmp_path / "c.txt").write_text(_text(50), encoding="utf-8")
    with pytest.raises(DataError, match="needs a bpe tokenizer"):
        load_corpus(subword_config(tmp_path / "c.txt").data, vocab=char_vocab)


def test_missing_tokenizers_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(MissingExtra, match=r"highway-transformer\[subword\]"):
        SubwordVocabulary.train(_text(), "bpe", 300)


def test_cli_trains_evaluates_and_generates_with_a_unigram_vocabulary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from highway_transformer import cli

    (tmp_path / "corpus.txt").write_text(_text(600), encoding="utf-8")
    out = tmp_path / "run"
    settings = ["data.corpus=file", f"data.path={tmp_path / 'corpus.txt'}", "data.level=unigram",
                "data.subword_vocab_size=300", "model.d_model=16", "model.n_layers=1",
                "model.n_heads=2", "model.d_inner=32", "data.batch_size=4", "data.seq_len=16",
                "data.eval_batch_size=4", "train.optimizer=adam", "train.lr=0.01",
                "train.max_steps=2", "train.eval_interval=2"]  # fmt: skip
    assert cli.main(["train", *settings, "--out", str(out), "--no-progress"]) == 0
    assert (out / "best" / TOKENIZER_FILE).is_file()
    assert cli.main(["eval", str(out), "--split", "test", "--json"]) == 0
    capsys.readouterr()
    text = tmp_path / "new.txt"  # words the corpus never had: the tokenizer still encodes them
    text.write_text("the borrowing gate learns about highways.\n", encoding="utf-8")
    assert cli.main(["eval", str(out), "--file", str(text), "--json"]) == 0
    scored = json.loads(capsys.readouterr().out)
    model, _, vocab = load_pretrained(out / "best")
    tokens = len(vocab.encode_text(text.read_text(encoding="utf-8")))
    assert (scored["symbols"], scored["oov"], scored["tokens"]) == (tokens, 0, tokens - 1)
    prompt = "the gate "
    assert cli.main(["generate", str(out), "--prompt", prompt, "--tokens", "4",
                     "--temperature", "0", "--device", "cpu", "--echo"]) == 0  # fmt: skip
    assert capsys.readouterr().out.startswith(prompt)
    assert cli.main(["train", "data.level=unigram"]) == 2  # the embedded corpus: not a subword
    err = capsys.readouterr().err.strip()
    assert "data.corpus=file" in err and len(err.splitlines()) == 1


def test_a_subword_size_below_the_bytes_is_a_config_error() -> None:
    overrides = ["data.corpus=file", "data.level=bpe", "data.subword_vocab_size=100"]
    with pytest.raises(ConfigError, match="subword_vocab_size must be .*256"):
        build_config(Config(), overrides=overrides)
