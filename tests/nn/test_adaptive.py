"""Adaptive input embeddings (``nn/adaptive.py``): cut-off checks, cluster widths, and the
embedding of each id equal to its own cluster's lookup and projection."""

from __future__ import annotations

import pytest
import torch

from highway_transformer.errors import ConfigError
from highway_transformer.nn.adaptive import AdaptiveInput, check_cutoffs, cluster_dims


def test_cutoffs_that_increase_inside_the_vocabulary_are_its_bounds() -> None:
    assert check_cutoffs((5, 12), 20) == [5, 12]
    assert check_cutoffs((1,), 2) == [1]


@pytest.mark.parametrize("cutoffs", [(), (12, 5), (5, 5, 12), (0, 12), (5, 20), (5, 25)])
def test_bad_cutoffs_are_one_line_errors(cutoffs: tuple[int, ...]) -> None:
    with pytest.raises(ConfigError) as info:
        check_cutoffs(cutoffs, 20)
    assert str(info.value) == (
        f"adaptive cutoffs {cutoffs} must increase strictly within (0, vocab_size=20)"
    )


@pytest.mark.parametrize(
    ("d_model", "n", "div", "dims"),
    [(16, 3, 4.0, [16, 4, 1]), (16, 3, 2.0, [16, 8, 4]), (10, 2, 3.0, [10, 3]),
     (4, 4, 4.0, [4, 1, 1, 1]), (32, 2, 1.0, [32, 32])],
)  # fmt: skip
def test_cluster_i_is_d_over_div_to_the_i_at_least_one(
    d_model: int, n: int, div: float, dims: list[int]
) -> None:
    assert cluster_dims(d_model, n, div) == dims


def test_each_id_is_its_clusters_lookup_projected_to_d_model() -> None:
    torch.manual_seed(0)
    embed = AdaptiveInput(20, 16, (5, 12), div=2.0)
    assert embed.bounds == [0, 5, 12, 20]
    shapes = [(t.num_embeddings, t.embedding_dim) for t in embed.tables]
    assert shapes == [(5, 16), (7, 8), (8, 4)]
    assert [tuple(p.weight.shape) for p in embed.projections] == [(16, 16), (16, 8), (16, 4)]
    tokens = torch.tensor([[0, 4, 5, 11], [12, 19, 3, 7]])
    got = embed(tokens)
    assert got.shape == (2, 4, 16)
    for index in tokens.flatten().tolist():
        i = next(c for c in range(3) if embed.bounds[c] <= index < embed.bounds[c + 1])
        row = embed.tables[i].weight[index - embed.bounds[i]]
        expected = embed.projections[i].weight @ row
        for position in (tokens == index).nonzero().tolist():
            torch.testing.assert_close(got[tuple(position)], expected, atol=1e-6, rtol=0)


def test_only_the_clusters_of_the_ids_get_gradients() -> None:
    torch.manual_seed(0)
    embed = AdaptiveInput(20, 16, (5, 12), div=2.0)
    embed(torch.tensor([[1, 13]])).sum().backward()
    assert embed.tables[0].weight.grad[1].abs().sum() > 0
    assert embed.tables[1].weight.grad is None or not embed.tables[1].weight.grad.any()
    assert embed.tables[2].weight.grad[1].abs().sum() > 0  # id 13 is row 1 of cluster 2


def test_div_one_is_one_full_width_table_without_projection() -> None:
    torch.manual_seed(0)
    embed = AdaptiveInput(20, 16, (5, 12), div=1.0)
    assert embed.bounds == [0, 20] and len(embed.projections) == 0
    tokens = torch.tensor([[0, 7, 19]])
    assert torch.equal(embed(tokens), embed.tables[0](tokens))
