"""Whole-file scores (``tasks/file_eval.py``): every symbol of a file predicted once, line ends
included, out-of-vocabulary symbols counted."""

from __future__ import annotations

import pytest
import torch

from highway_transformer.config import Config, DataConfig, ModelConfig
from highway_transformer.data.vocab import Vocabulary
from highway_transformer.models.lm import LanguageModel
from highway_transformer.tasks.file_eval import evaluate_file


def test_file_scores_with_a_line_end_vocabulary_predict_every_symbol(tmp_path) -> None:
    torch.manual_seed(0)
    vocab = Vocabulary(["<unk>", "<eos>", "a", "b"], "word", unk="<unk>", eos="<eos>")
    model = LanguageModel(ModelConfig(vocab_size=4, d_model=8, n_heads=2, d_inner=16, n_layers=1))
    path = tmp_path / "w.txt"
    path.write_text("a b\nb a c\n", encoding="utf-8")
    config = Config(data=DataConfig(seq_len=64, eval_batch_size=1))
    score = evaluate_file(model.eval(), vocab, path, config)
    assert (score.symbols, score.oov, score.result.tokens) == (7, 1, 7)
    ids = torch.tensor([vocab.encode(["<eos>", "a", "b", "<eos>", "b", "a", "<unk>", "<eos>"])])
    with torch.no_grad():
        expected = model(ids[:, :-1], targets=ids[:, 1:]).loss.item()
    assert score.result.loss == pytest.approx(expected, rel=1e-5)


def test_a_subword_model_scores_the_file_through_its_tokenizer(tmp_path) -> None:
    """BPE/unigram: the saved tokenizer encodes the text (nothing is out of vocabulary); with no
    line-end symbol the first token is context and every other one a target."""
    pytest.importorskip("tokenizers")
    from highway_transformer.data.vocab import SubwordVocabulary

    vocab = SubwordVocabulary.train("the gate learns to skip layers.\n" * 50, "bpe", 280)
    torch.manual_seed(0)
    sizes = ModelConfig(vocab_size=len(vocab), d_model=8, n_heads=2, d_inner=16, n_layers=1)
    model = LanguageModel(sizes).eval()
    path = tmp_path / "new.txt"
    path.write_text("the borrowing gate, unseen words\nand a new line", encoding="utf-8")
    config = Config(data=DataConfig(seq_len=64, eval_batch_size=1))
    score = evaluate_file(model, vocab, path, config)
    ids = torch.from_numpy(vocab.encode_text(path.read_text(encoding="utf-8")))[None]
    assert (score.symbols, score.oov, score.result.tokens) == (ids.shape[1], 0, ids.shape[1] - 1)
    with torch.no_grad():
        expected = model(ids[:, :-1], targets=ids[:, 1:]).loss.item()
    assert score.result.loss == pytest.approx(expected, rel=1e-5)
