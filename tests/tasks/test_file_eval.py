"""Whole-file scores (``tasks/file_eval.py``): every symbol of a file predicted once, line ends
included, out-of-vocabulary symbols counted; a file read a piece at a time, its ids in a
temporary file, scores what the evaluation of its ids held in memory scores."""

from __future__ import annotations

import pytest
import torch

from highway_transformer.config import Config, DataConfig, MemoryConfig, ModelConfig
from highway_transformer.data import streams
from highway_transformer.data.batching import EVAL_LAYOUTS, IGNORE, windows
from highway_transformer.data.vocab import Vocabulary
from highway_transformer.errors import DataError
from highway_transformer.models.families import memory_policy
from highway_transformer.models.lm import LanguageModel
from highway_transformer.tasks import file_eval
from highway_transformer.tasks.base import standard_error
from highway_transformer.tasks.file_eval import evaluate_file, tokenise_file


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


# ----------------------------------------------- streaming: the file a piece at a time


def in_memory_score(model: LanguageModel, ids: torch.Tensor, config: Config) -> tuple:
    """``(loss, tokens, loss_se)`` as the evaluation computed them before it streamed: the
    layout's rows materialised for the whole stream, their windows in order, memory carried."""
    d = config.data
    inputs, targets = EVAL_LAYOUTS[d.eval_layout](ids, d.eval_batch_size)
    context = d.context if d.eval_context is None else d.eval_context
    short_last = model.uses_memory or d.eval_layout == "reference"
    policy = memory_policy(config.model, evaluation=True)
    total, total_sq, count, memory = 0.0, 0.0, 0, None
    with torch.no_grad():
        for w in windows(inputs, targets, d.eval_seq_len or d.seq_len, context, short_last):
            hidden, memory = model(w.inputs, memory=memory, policy=policy)
            y = w.targets[:, w.loss_start :]
            nll = model.token_nll(hidden[:, w.loss_start :], y).double()
            total += float(nll.sum())
            total_sq += float(nll.square().sum())
            count += int((y != IGNORE).sum())
    return total / count, count, standard_error(total, total_sq, count)


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files read 5 bytes at a time: every piece boundary a tokeniser could trip on occurs."""
    monkeypatch.setattr(streams, "READ_BYTES", 5)
    monkeypatch.setattr(file_eval, "SUBWORD_READ_BYTES", 5)


def _score(model: LanguageModel, vocab: Vocabulary, path, **data) -> tuple:
    config = Config(model=model.config, data=DataConfig(**data))
    # ids kept in a temporary file from the first piece on
    score = evaluate_file(model, vocab, path, config, spill_bytes=8)
    tokens = tokenise_file(path, vocab, spill_bytes=8)
    assert tokens.ids.on_disk
    tokens.ids.close()
    return score, config


def test_streaming_a_char_file_equals_the_in_memory_evaluation(
    tmp_path, small_pieces, tiny_model_config
) -> None:
    vocab = Vocabulary(["<unk>", *"abc \né"], "char", unk="<unk>")
    text = "abc cab\nbäc é\n" * 20 + "abba z"  # 'ä' and 'z' are not in the vocabulary
    path = tmp_path / "chars.txt"
    path.write_text(text, encoding="utf-8")
    torch.manual_seed(0)
    model = LanguageModel(tiny_model_config(vocab_size=len(vocab))).eval()
    score, config = _score(model, vocab, path, seq_len=8, context=3, eval_batch_size=3)
    assert (score.symbols, score.oov) == (len(text), text.count("ä") + text.count("z"))
    ids = torch.tensor(vocab.encode(list(text)))
    r = score.result
    assert (r.loss, r.tokens, r.loss_se) == in_memory_score(model, ids, config)


@pytest.mark.parametrize("layout", ["every", "reference"])
def test_streaming_carries_transformer_xl_memory_as_in_memory(
    tmp_path, small_pieces, tiny_model_config, layout: str
) -> None:
    vocab = Vocabulary(["<unk>", "<eos>", "a", "b", "c"], "word", unk="<unk>", eos="<eos>")
    text = "a b c a\nb b x\n\nc a b\n" * 15  # 'x' is out of vocabulary
    path = tmp_path / "words.txt"
    path.write_text(text, encoding="utf-8")
    torch.manual_seed(0)
    xl = {"family": "xl", "attention": "relative", "memory": MemoryConfig(mem_len=5)}
    model = LanguageModel(tiny_model_config(vocab_size=len(vocab), **xl)).eval()
    assert model.uses_memory
    settings = {"seq_len": 6, "context": 0, "eval_batch_size": 3, "eval_layout": layout}
    score, config = _score(model, vocab, path, **settings)
    symbols = [s for line in text.splitlines() for s in [*line.split(), "<eos>"]]
    assert (score.symbols, score.oov) == (len(symbols), 15)
    ids = torch.tensor(vocab.encode(["<eos>", *symbols]))
    r = score.result
    assert (r.loss, r.tokens, r.loss_se) == in_memory_score(model, ids, config)


def test_streaming_a_bpe_file_keeps_the_tokenizers_ids(tmp_path, small_pieces) -> None:
    """Pieces are cut where a byte-level tokenizer cannot tell: the ids are the whole text's."""
    pytest.importorskip("tokenizers")
    from highway_transformer.data.vocab import SubwordVocabulary

    vocab = SubwordVocabulary.train("the gate learns to skip layers.\n  x\n\n" * 50, "bpe", 300)
    text = "the gate  learns\tto skip\n\n\n  layers, ünïcode 😀 gates.\n skip  \n" * 12
    path = tmp_path / "bpe.txt"
    path.write_text(text, encoding="utf-8")
    torch.manual_seed(0)
    model = LanguageModel(ModelConfig(vocab_size=len(vocab), d_model=8, n_heads=2, d_inner=16))
    score, config = _score(model.eval(), vocab, path, seq_len=16, context=4, eval_batch_size=2)
    ids = torch.from_numpy(vocab.encode_text(text))
    assert (score.symbols, score.oov) == (ids.numel(), 0)
    tokens = tokenise_file(path, vocab)
    assert tokens.ids.read(0, len(tokens.ids)).tolist() == ids.tolist()
    r = score.result
    assert (r.loss, r.tokens, r.loss_se) == in_memory_score(model, ids, config)


@pytest.mark.parametrize(("sample", "plain"), [(3, False), (5, True)])
def test_a_char_ptb_model_reads_the_format_from_the_files_first_tokens(
    tmp_path, small_pieces, monkeypatch: pytest.MonkeyPatch, sample: int, plain: bool
) -> None:
    """Single symbols separated by spaces (the char-PTB format) or plain text, whose spaces
    become ``_``: decided on the first tokens of the file, wherever its pieces end."""
    monkeypatch.setattr(file_eval, "FORMAT_SAMPLE", sample)
    vocab = Vocabulary(["<unk>", "<eos>", "_", *"abc"], "char", unk="<unk>", eos="<eos>")
    path = tmp_path / "ptb.txt"
    path.write_text("a b c\nab ca\n", encoding="utf-8")
    tokens = tokenise_file(path, vocab)
    if plain:
        symbols = [*"a_b_c", "<eos>", *"ab_ca", "<eos>"]
    else:  # 'ab' and 'ca' are symbols outside the vocabulary
        symbols = ["a", "b", "c", "<eos>", "ab", "ca", "<eos>"]
    assert (tokens.symbols, tokens.oov) == (len(symbols), 0 if plain else 2)
    expected = vocab.encode(["<eos>", *symbols])
    assert tokens.ids.read(0, len(tokens.ids)).tolist() == expected


def test_symbols_outside_a_vocabulary_without_unk_are_counted_over_the_whole_file(
    tmp_path, small_pieces
) -> None:
    vocab = Vocabulary(["<eos>", "a", "b"], "word", eos="<eos>")
    path = tmp_path / "oov.txt"
    path.write_text("a x b\ny a\nz z\n" + "a b\n" * 10 + "w\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"has 5 symbols outside .*\['w', 'x', 'y', 'z'\]"):
        tokenise_file(path, vocab)


def test_byte_models_read_any_bytes(tmp_path, small_pieces) -> None:
    from highway_transformer.data.encoding import byte_vocabulary

    raw = bytes(range(256)) * 3
    path = tmp_path / "raw.bin"
    path.write_bytes(raw)
    tokens = tokenise_file(path, byte_vocabulary(), spill_bytes=100)
    assert tokens.ids.on_disk and (tokens.symbols, tokens.oov) == (len(raw), 0)
    assert tokens.ids.read(0, len(raw)).tolist() == list(raw)
