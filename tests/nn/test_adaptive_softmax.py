"""The adaptive softmax: torch's module as an oracle when untied, tying to the adaptive input
as the Transformer-XL reference does (``tie_weight`` / ``tie_projs``), save/load."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from highway_transformer.config import ModelConfig
from highway_transformer.models.lm import LanguageModel
from highway_transformer.nn.adaptive_softmax import AdaptiveSoftmax

D, V, CUTOFFS = 16, 40, (10, 25)


def _from_torch(oracle: nn.AdaptiveLogSoftmaxWithLoss) -> AdaptiveSoftmax:
    """Ours with torch's weights: identity head projection, zero biases; torch's cluster i
    is head column shortlist + i - 1, ours column -i (the reference's order)."""
    ours = AdaptiveSoftmax(D, V, CUTOFFS, div=2.0).double()
    shortlist = CUTOFFS[0]
    with torch.no_grad():
        for p in ours.parameters():
            p.zero_()
        ours.projections[0].weight.copy_(torch.eye(D))
        ours.layers[0].weight.copy_(oracle.head.weight[:shortlist])
        ours.clusters.weight.copy_(oracle.head.weight[shortlist:].flip(0))
        for i, (down, up) in enumerate(oracle.tail, start=1):
            ours.projections[i].weight.copy_(down.weight.T)
            ours.layers[i].weight.copy_(up.weight)
    return ours


def test_untied_adaptive_softmax_equals_torchs() -> None:
    torch.manual_seed(0)
    oracle = nn.AdaptiveLogSoftmaxWithLoss(D, V, list(CUTOFFS), div_value=2.0).double()
    ours = _from_torch(oracle)
    hidden = torch.randn(30, D, dtype=torch.float64)
    target = torch.randint(0, V, (30,))
    torch.testing.assert_close(ours.log_prob(hidden), oracle.log_prob(hidden))
    torch.testing.assert_close(ours(hidden, target), -oracle(hidden, target).output)


@pytest.mark.parametrize("div", [1.0, 2.0])
def test_nll_is_the_log_prob_of_the_target(div: float) -> None:
    torch.manual_seed(1)
    softmax = AdaptiveSoftmax(D, V, CUTOFFS, div=div).double()
    for p in softmax.parameters():
        nn.init.normal_(p, std=0.5)
    hidden = torch.randn(50, D, dtype=torch.float64)
    target = torch.arange(50) % V
    log_prob = softmax.log_prob(hidden)
    torch.testing.assert_close(log_prob.exp().sum(-1), torch.ones(50, dtype=torch.float64))
    torch.testing.assert_close(softmax(hidden, target), -log_prob.gather(1, target[:, None])[:, 0])


def test_div_1_is_one_sliced_full_width_layer() -> None:
    """Reference div_val 1: cluster logits are slices of one [V, d] layer, no projection."""
    torch.manual_seed(2)
    softmax = AdaptiveSoftmax(D, V, CUTOFFS, div=1).double()
    hidden = torch.randn(4, D, dtype=torch.float64)
    full = softmax.layers[0](hidden)
    head = torch.log_softmax(torch.cat([full[:, :10], softmax.clusters(hidden)], -1), -1)
    tail = torch.log_softmax(full[:, 25:], -1)  # the last cluster: head column -2
    expected = head[:, -2, None] + tail
    torch.testing.assert_close(softmax.log_prob(hidden)[:, 25:], expected)
    assert len(softmax.projections) == 0


def _model(div: float, tie: bool = True) -> LanguageModel:
    config = ModelConfig(
        d_model=D, n_layers=1, n_heads=2, d_inner=32, vocab_size=V, dropout=0.0,
        adaptive_cutoffs=CUTOFFS, adaptive_div=div, tie_weights=tie,
    )  # fmt: skip
    torch.manual_seed(3)
    return LanguageModel(config)


@pytest.mark.parametrize("div", [1.0, 4.0])
def test_tied_weights_are_the_embeddings_tensors(div: float) -> None:
    model = _model(div)
    layers, tables = model.output.layers, model.embedding.tables
    assert len(layers) == len(tables) == (1 if div == 1 else 3)
    assert all(o.weight is t.weight for o, t in zip(layers, tables, strict=True))
    # tie_projs = [False, True, True]: the head's projection stays its own.
    out, emb = model.output.projections, model.embedding.projections
    assert len(out) == len(emb) == (0 if div == 1 else 3)
    if div != 1:
        assert out[0].weight is not emb[0].weight
        assert all(out[i].weight is emb[i].weight for i in (1, 2))
    untied = _model(div, tie=False)
    n_shared = sum(t.weight.numel() for t in tables) + sum(p.weight.numel() for p in emb[1:])
    assert untied.num_parameters() - model.num_parameters() == n_shared


def test_tied_adaptive_model_round_trips(tmp_path) -> None:
    model = _model(4.0).eval()
    tokens = torch.randint(0, V, (2, 7))
    hidden, _ = model(tokens)
    loaded = LanguageModel.from_pretrained(model.save_pretrained(tmp_path / "m"))
    loaded_hidden, _ = loaded(tokens)
    torch.testing.assert_close(loaded.logits(loaded_hidden), model.logits(hidden), rtol=0, atol=0)
    assert loaded.output.layers[2].weight is loaded.embedding.tables[2].weight
    assert loaded.output.projections[1].weight is loaded.embedding.projections[1].weight
