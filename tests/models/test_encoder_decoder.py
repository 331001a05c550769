"""Encoder-decoder Transformer: padding, causality, decoding, gates and learning the toy task."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
import torch

from highway_transformer.api import load_pretrained
from highway_transformer.config import ModelConfig
from highway_transformer.data.seq2seq import make_toy_pairs, toy_batch, toy_vocabs
from highway_transformer.errors import ConfigError, DataError
from highway_transformer.models.encoder_decoder import EncoderDecoder
from highway_transformer.presets.rt_tables import seq2seq_toy
from highway_transformer.training.trainer import train

VOCAB = 13  # toy vocabularies: pad, bos, eos + 10 letters


@pytest.fixture
def ed_config(tiny_stack_config: Callable[..., ModelConfig]) -> Callable[..., ModelConfig]:
    """``ed_config(family, gate, norm)``: the tiny stack, output layer untied."""
    return lambda family="transformer", gate="none", norm="post": tiny_stack_config(
        family, gate, norm, tie_weights=False
    )


@pytest.fixture
def ed_model(ed_config: Callable[..., ModelConfig]) -> Callable[..., EncoderDecoder]:
    """``ed_model(score="scaled_dot", **ed_config_arguments)``: seeded, in evaluation mode."""

    def build(score: str = "scaled_dot", **kwargs: str) -> EncoderDecoder:
        torch.manual_seed(0)
        return EncoderDecoder(ed_config(**kwargs), VOCAB, VOCAB, score=score, max_len=16).eval()

    return build


def _ids(rows: list[list[int]]) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [0] * (width - len(r)) for r in rows])


CASES = [
    ("transformer", "scaled_dot", "none"),
    ("transformer", "additive", "sdu"),
    ("transformer", "location", "highway"),
    ("rtransformer", "general", "gated"),
    ("rtransformer", "content", "none"),
]


@pytest.mark.parametrize(("family", "score", "gate"), CASES)
def test_padding_never_changes_real_positions(
    family, score, gate, ed_model: Callable[..., EncoderDecoder]
):
    model = ed_model(score, family=family, gate=gate)
    sources = [[3, 4, 5, 6, 7, 2], [8, 9, 2], [10, 11, 12, 3, 2]]
    targets = [[1, 4, 5, 6], [1, 7], [1, 8, 9, 10, 11, 12]]
    batched = model(_ids(sources), _ids(targets))
    for b, (src, tgt) in enumerate(zip(sources, targets, strict=True)):
        alone = model(torch.tensor([src]), torch.tensor([tgt]))
        torch.testing.assert_close(batched[b, : len(tgt)], alone[0], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(("family", "score", "gate"), CASES)
def test_decoder_is_causal(family, score, gate, ed_model: Callable[..., EncoderDecoder]):
    model = ed_model(score, family=family, gate=gate)
    src = torch.tensor([[3, 4, 5, 6, 2]])
    tgt = torch.tensor([[1, 4, 5, 6, 7, 8]])
    base = model(src, tgt)
    for t in range(1, tgt.shape[1]):
        changed = tgt.clone()
        changed[0, t:] = 12
        out = model(src, changed)
        torch.testing.assert_close(out[:, :t], base[:, :t])
        assert not torch.allclose(out[:, t], base[:, t])


@pytest.mark.parametrize(("family", "score", "gate"), CASES)
def test_beam_one_equals_greedy(family, score, gate, ed_model: Callable[..., EncoderDecoder]):
    model = ed_model(score, family=family, gate=gate)
    src = _ids([[3, 4, 5, 6, 7, 2], [8, 9, 2], [10, 11, 12, 3, 2], [5, 2]])
    greedy = model.greedy_decode(src, max_len=9)
    assert torch.equal(model.beam_search(src, 1, max_len=9), greedy)
    assert torch.equal(model.decode_batch(src, beam_size=1, max_len=9), greedy)
    wide = model.beam_search(src, 4, max_len=9)
    assert wide.shape[0] == 4 and wide.shape[1] <= 9
    assert not ((wide == 1).any())  # <bos> is never produced


def test_decoding_pads_after_eos_and_matches_teacher_forcing(
    ed_model: Callable[..., EncoderDecoder],
):
    model = ed_model()
    with torch.no_grad():  # make <eos> win at step 3 of every hypothesis
        model.output.bias.zero_()
    src = _ids([[3, 4, 5, 2], [6, 2]])
    out = model.greedy_decode(src, max_len=7)
    for row in out:
        ends = (row == 2).nonzero()
        if len(ends):
            assert (row[int(ends[0]) + 1 :] == 0).all()
    # each greedy token is the argmax of teacher-forced logits on the decoded prefix
    prefix = torch.cat([torch.ones(2, 1, dtype=torch.long), out[:, :-1]], dim=1)
    logits = model(src, prefix)
    logits[..., :2] = -torch.inf
    first = logits[:, 0].argmax(-1)
    assert torch.equal(first, out[:, 0])


@pytest.mark.parametrize("gate", ["none", "sdu", "highway", "gated", "gtrxl-gru"])
def test_every_gate_builds_trains_and_reports_biases(gate, ed_model: Callable[..., EncoderDecoder]):
    norm = "pre" if gate.startswith("gtrxl") else "post"
    model = ed_model(gate=gate, norm=norm).train()
    batch = toy_batch(make_toy_pairs(4, seed=1), *toy_vocabs())
    logits = model(batch["src"], batch["tgt_in"])
    loss = model.token_nll(logits, batch["tgt_out"]).mean()
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
    biases = model.gate_biases()
    if gate in ("sdu", "highway", "gated"):
        # 2 encoder layers x (attn, ffn) + 2 decoder layers x (attn, cross, ffn)
        assert len(biases) == 10 and "decoder.layer2.cross" in biases


def test_gate_layer_spec_applies_to_both_stacks(ed_config: Callable[..., ModelConfig]):
    config = ed_config(gate="sdu")
    config.gate.layers = "1\\FFN"
    model = EncoderDecoder(config, VOCAB, VOCAB)
    assert sorted(model.gate_biases()) == [
        "decoder.layer1.attn",
        "decoder.layer1.cross",
        "encoder.layer1.attn",
    ]


def test_shared_and_tied_embeddings(ed_config: Callable[..., ModelConfig]):
    config = ed_config()
    config.tie_weights = True
    model = EncoderDecoder(config, VOCAB, VOCAB, share_embeddings=True)
    assert model.src_embedding is model.tgt_embedding
    assert model.output.weight is model.tgt_embedding.weight
    separate = EncoderDecoder(ed_config(), VOCAB, VOCAB)
    assert separate.src_embedding is not separate.tgt_embedding
    with pytest.raises(ConfigError, match="shared embeddings"):
        EncoderDecoder(ed_config(), 13, 20, share_embeddings=True)


def test_errors(ed_model: Callable[..., EncoderDecoder]):
    model = ed_model()
    with pytest.raises(DataError, match="task.max_len=16"):
        model(torch.full((1, 17), 3), torch.ones(1, 2, dtype=torch.long))
    with pytest.raises(ConfigError, match="beam_size"):
        model.beam_search(torch.tensor([[3, 2]]), 0)
    with pytest.raises(ConfigError, match="family"):
        EncoderDecoder(ModelConfig(family="xl", d_model=16, n_heads=2), VOCAB, VOCAB)


def test_learns_the_toy_task(tmp_path):
    config = seq2seq_toy().replace(
        **{"train.max_steps": 300, "train.eval_interval": 150, "train.seed": 7}
    )
    results = train(config, tmp_path, progress=False)
    assert results["test"]["exact_match"] >= 0.9
    assert results["test"]["token_accuracy"] >= 0.95
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    valid = [r for r in records if r["split"] == "valid"]
    assert [r["step"] for r in valid] == [150, 300]
    assert {"loss", "token_accuracy", "exact_match"} <= set(valid[-1])
    model, loaded = load_pretrained(tmp_path / "best")[:2]
    assert loaded.task.name == "seq2seq"
    src_vocab, tgt_vocab = toy_vocabs()
    pairs = make_toy_pairs(32, 3, 8, seed=99)
    batch = toy_batch(pairs, src_vocab, tgt_vocab)
    for beam in (1, 3):
        decoded = model.decode_batch(batch["src"], beam_size=beam)
        hits = sum(tgt_vocab.decode(row) == t for row, (_, t) in zip(decoded, pairs, strict=True))
        assert hits >= 0.9 * len(pairs)
