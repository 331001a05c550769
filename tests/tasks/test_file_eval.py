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
