"""The memory-mapped token cache gives the same ids as encoding in memory."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch

from highway_transformer import DataConfig, ModelConfig, build_model, evaluate, load_corpus
from highway_transformer.data import token_cache, user_files
from highway_transformer.data.download import CACHE_ENV
from highway_transformer.data.vocab import Vocabulary

LEVELS = ["char", "word", "byte", "bpe"]


def _corpus_file(tmp_path: Path, seed: int = 0) -> Path:
    rng = random.Random(seed)
    words = ["gate", "layer", "skip", "höhe", "x", "transformer"]
    lines = (" ".join(rng.choice(words) for _ in range(10)) for _ in range(300))
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _config(path: Path, level: str, cache: bool) -> DataConfig:
    return DataConfig(corpus="file", path=str(path), level=level, cache=cache,
                      subword_vocab_size=300 if level == "bpe" else None)  # fmt: skip


@pytest.mark.parametrize("level", LEVELS)
def test_memory_mapped_ids_equal_in_memory_ids(tmp_path: Path, level: str) -> None:
    if level == "bpe":
        pytest.importorskip("tokenizers")
    path = _corpus_file(tmp_path)
    in_memory = load_corpus(_config(path, level, cache=False))
    built = load_corpus(_config(path, level, cache=True))  # first run: encode and store
    cached = load_corpus(_config(path, level, cache=True))  # later run: mapped from disk
    assert in_memory.train.dtype == torch.int64
    for corpus in (built, cached):
        assert corpus.vocab == in_memory.vocab
        assert corpus.train.dtype == torch.uint16  # a few hundred symbols: two bytes an id
        for split in ("train", "valid", "test"):
            assert torch.equal(corpus.split(split).long(), in_memory.split(split))


def test_a_cache_hit_does_not_encode_and_a_changed_source_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    path = _corpus_file(tmp_path)
    first = load_corpus(_config(path, "word", cache=True))
    calls = []
    encode = user_files._encode_file
    monkeypatch.setattr(user_files, "_encode_file", lambda *a: calls.append(1) or encode(*a))
    load_corpus(_config(path, "word", cache=True))
    assert calls == []
    _corpus_file(tmp_path, seed=1)  # same name, new content: a new key
    changed = load_corpus(_config(path, "word", cache=True))
    assert calls == [1] and not torch.equal(changed.train[:50], first.train[:50])
    # entries are complete folders: no temporary folder is left behind
    names = [p.name for p in (tmp_path / "cache" / "tokens").iterdir()]
    assert len(names) == 2 and not any(".tmp" in name for name in names)


def test_a_given_vocabulary_is_part_of_the_key(tmp_path: Path) -> None:
    path = _corpus_file(tmp_path)
    own = load_corpus(_config(path, "char", cache=True))
    other = Vocabulary(["<unk>", *sorted(set(path.read_text(encoding="utf-8")))], "char", "<unk>")
    reused = load_corpus(_config(path, "char", cache=True), vocab=other)
    assert reused.vocab == other and not torch.equal(reused.train[:50], own.train[:50])
    expected = load_corpus(_config(path, "char", cache=False), vocab=other)
    assert torch.equal(reused.train.long(), expected.train)


def test_wide_vocabularies_use_uint32_and_broken_entries_are_rebuilt(tmp_path: Path) -> None:
    assert token_cache.id_dtype(1 << 16) == np.uint16
    assert token_cache.id_dtype((1 << 16) + 1) == np.uint32
    vocab = Vocabulary([f"w{i}" for i in range(70_000)], "word")
    ids = torch.tensor([0, 69_999, 65_536, 12])
    splits = {"train": ids, "valid": ids[:2], "test": ids[2:]}
    folder = tmp_path / "entry"
    token_cache.store(folder, splits, vocab)
    loaded, loaded_vocab = token_cache.load(folder)
    assert loaded["train"].dtype == torch.uint32 and loaded["train"].tolist() == ids.tolist()
    assert loaded_vocab == vocab
    (folder / "valid.npy").write_bytes(b"not an array")
    with pytest.raises(token_cache.DamagedEntry, match=r"valid\.npy"):
        token_cache.load(folder)  # the caller rebuilds and replaces it
    assert token_cache.load(tmp_path / "absent") is None


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        ("zero", "train.npy"),  # same size, header kept: np.load alone would not notice
        ("truncate", "train.npy"),
        ("vocab", "vocab.json"),
        ("manifest", "no readable manifest.json"),
    ],
)
def test_a_tampered_cache_is_rebuilt_with_one_warning(
    tmp_path: Path,
    damage: str,
    says: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    path = _corpus_file(tmp_path)
    first = load_corpus(_config(path, "char", cache=True))
    expected = first.train.clone()  # the entry is mapped: a copy before it is damaged
    del first
    (entry,) = (tmp_path / "cache" / "tokens").iterdir()
    train = entry / "train.npy"
    if damage == "zero":
        array = np.load(train)
        np.save(train, np.zeros_like(array))
    elif damage == "truncate":
        train.write_bytes(train.read_bytes()[:-10])
    elif damage == "vocab":
        (entry / "vocab.json").write_text((entry / "vocab.json").read_text().replace("a", "b", 1))
    else:
        (entry / "manifest.json").unlink()
    capsys.readouterr()
    again = load_corpus(_config(path, "char", cache=True))
    err = capsys.readouterr().err.strip()
    assert err.startswith("warning: the token cache") and says in err and "\n" not in err
    assert err.endswith("rebuilding it")
    assert torch.equal(again.train, expected)
    assert again.vocab == load_corpus(_config(path, "char", cache=False)).vocab
    load_corpus(_config(path, "char", cache=True))  # the rebuilt entry is good: no warning
    assert capsys.readouterr().err == ""


def test_evaluation_is_the_same_on_cached_ids(tmp_path: Path) -> None:
    path = _corpus_file(tmp_path)
    data = DataConfig(corpus="file", path=str(path), level="char", seq_len=32, eval_batch_size=4)
    cached = load_corpus(data)
    in_memory = load_corpus(data.__class__(**{**data.__dict__, "cache": False}))
    torch.manual_seed(0)
    model = build_model(
        ModelConfig(vocab_size=len(cached.vocab), d_model=16, n_layers=1, n_heads=2, d_inner=32)
    ).eval()
    assert evaluate(model, cached.valid, data).loss == evaluate(model, in_memory.valid, data).loss
