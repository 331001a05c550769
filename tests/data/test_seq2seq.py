"""Toy translation task: the rule, vocabularies, padding and metrics."""

from __future__ import annotations

import pytest
import torch

from highway_transformer.data.seq2seq import (
    SUBSTITUTION,
    Seq2SeqVocab,
    exact_match,
    make_toy_pairs,
    pad_batch,
    token_accuracy,
    toy_batch,
    toy_vocabs,
    translate,
)
from highway_transformer.errors import ConfigError, DataError


def test_pairs_follow_rule_and_are_seeded() -> None:
    pairs = make_toy_pairs(200, min_len=2, max_len=6, seed=4)
    assert pairs == make_toy_pairs(200, min_len=2, max_len=6, seed=4)
    assert pairs != make_toy_pairs(200, min_len=2, max_len=6, seed=5)
    assert {len(s) for s, _ in pairs} == {2, 3, 4, 5, 6}
    for source, target in pairs:
        assert len(target) == len(source)
        assert target == "".join(SUBSTITUTION[c] for c in source[::-1])
    assert translate("abc") == SUBSTITUTION["c"] + SUBSTITUTION["b"] + SUBSTITUTION["a"]
    assert len(set(SUBSTITUTION.values())) == len(SUBSTITUTION)
    with pytest.raises(ConfigError):
        make_toy_pairs(3, min_len=5, max_len=2)
    with pytest.raises(DataError):
        translate("xyz")


def test_vocab_specials_encode_decode() -> None:
    vocab = Seq2SeqVocab(("x", "y"))
    assert vocab.itos[:3] == ["<pad>", "<bos>", "<eos>"]
    assert (vocab.pad_id, vocab.bos_id, vocab.eos_id) == (0, 1, 2)
    assert len(vocab) == 5
    assert vocab.encode("xyx", bos=True, eos=True) == [1, 3, 4, 3, 2]
    assert vocab.decode([1, 3, 4, 2, 3, 0]) == "xy"
    with pytest.raises(DataError, match="not in the vocabulary"):
        vocab.encode("z")
    src, tgt = toy_vocabs()
    source, target = make_toy_pairs(1, seed=0)[0]
    assert tgt.decode(tgt.encode(target)) == target and src.decode(src.encode(source)) == source


def test_pad_batch_and_toy_batch() -> None:
    batch, lengths = pad_batch([[5, 6, 7], [8], []], pad_id=0)
    assert batch.dtype == torch.int64
    assert batch.tolist() == [[5, 6, 7], [8, 0, 0], [0, 0, 0]]
    assert lengths.tolist() == [3, 1, 0]
    assert pad_batch([[1, 2]], pad_id=-1)[0].tolist() == [[1, 2]]
    with pytest.raises(DataError):
        pad_batch([])
    src_vocab, tgt_vocab = toy_vocabs()
    pairs = [("ab", translate("ab")), ("cde", translate("cde"))]
    tensors = toy_batch(pairs, src_vocab, tgt_vocab)
    assert tensors["src_lengths"].tolist() == [3, 4]
    assert tensors["src"][0].tolist() == src_vocab.encode("ab", eos=True) + [0]
    assert tensors["tgt_in"][:, 0].tolist() == [1, 1]
    assert torch.equal(tensors["tgt_in"][:, 1:3], tensors["tgt_out"][:, 0:2])
    assert tensors["tgt_out"][1, 3].item() == 2


def test_metrics_on_hand_made_tensors() -> None:
    target = torch.tensor([[5, 6, 2, 0], [7, 8, 9, 2]])
    pred = torch.tensor([[5, 6, 2, 0], [7, 3, 9, 2]])
    assert token_accuracy(pred, target, pad_id=0) == pytest.approx(6 / 7)
    assert exact_match(pred, target, pad_id=0) == pytest.approx(0.5)
    # padding positions in the target do not count, whatever the prediction there
    noisy = torch.tensor([[5, 6, 2, 4], [7, 8, 9, 2]])
    assert token_accuracy(noisy, target, pad_id=0) == 1.0
    assert exact_match(noisy, target, pad_id=0) == 0.5
    # a shorter prediction is padded; a longer one must hold padding past the target
    assert token_accuracy(torch.tensor([[5, 6], [7, 8]]), target, pad_id=0) == pytest.approx(4 / 7)
    assert exact_match(torch.tensor([[5, 6, 2], [7, 8, 9]]), target, pad_id=0) == 0.5
    longer = torch.cat([target, torch.zeros(2, 2, dtype=torch.int64)], dim=1)
    assert exact_match(longer, target, pad_id=0) == 1.0
    with pytest.raises(DataError):
        token_accuracy(torch.zeros(3, 2, dtype=torch.int64), target)
    with pytest.raises(DataError):
        token_accuracy(torch.zeros(1, 2, dtype=torch.int64), torch.zeros(1, 2, dtype=torch.int64))
