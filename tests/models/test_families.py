"""Model families as configurations: XL memory, caches, GTrXL identity path, adaptive softmax."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from conftest import LM_FAMILIES, LM_GATES, LM_VOCAB, build_lm

from highway_transformer.config import GateConfig, LocalRNNConfig, ModelConfig
from highway_transformer.errors import ConfigError
from highway_transformer.models.lm import LanguageModel
from highway_transformer.nn.memory import MemoryPolicy
from highway_transformer.validation import validate

XLConfig = Callable[..., ModelConfig]


@pytest.mark.parametrize("family", LM_FAMILIES)
def test_causality_every_family(family: str) -> None:
    model = build_lm(LM_FAMILIES[family])
    tokens = torch.randint(0, LM_VOCAB, (2, 10))
    hidden, _ = model(tokens)
    for t in (0, 4, 8):
        changed = tokens.clone()
        changed[:, t + 1] = (changed[:, t + 1] + 1) % LM_VOCAB
        other, _ = model(changed)
        torch.testing.assert_close(other[:, : t + 1], hidden[:, : t + 1], rtol=0, atol=0)
        assert not torch.allclose(other[:, t + 1], hidden[:, t + 1])


@pytest.mark.parametrize("family", ["transformer", "rtransformer", "xl", "shaw"])
@pytest.mark.parametrize("gate", LM_GATES, ids=lambda g: f"{g.kind}-{g.activation}")
def test_every_family_takes_every_gate(family: str, gate: GateConfig) -> None:
    config = LM_FAMILIES[family]
    config = ModelConfig(**{**config.__dict__, "gate": gate})
    model = build_lm(config)
    tokens = torch.randint(0, LM_VOCAB, (2, 7))
    hidden, _ = model(tokens)
    loss = model.token_nll(hidden, tokens).mean()
    loss.backward()
    assert torch.isfinite(loss)
    n_gates = len(model.gate_biases())
    expected = 0 if gate.kind == "none" else 2 * config.n_layers
    assert n_gates == expected


@pytest.mark.parametrize("family", ["xl", "gtrxl"])
def test_gates_none_equals_plain_and_layer_none(family: str, lm_xl_config: XLConfig) -> None:
    plain = build_lm(lm_xl_config(4))
    no_layers = build_lm(lm_xl_config(4, gate=GateConfig(kind="sdu", layers="none")))
    tokens = torch.randint(0, LM_VOCAB, (2, 6))
    torch.testing.assert_close(plain(tokens)[0], no_layers(tokens)[0], rtol=0, atol=0)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"norm": "pre", "gate": GateConfig(kind="gtrxl-gru")},
        {"gate": GateConfig(kind="sdu", layers="1")},
    ],
    ids=["xl", "gtrxl", "xl-sdu"],
)
def test_memory_equivalence(overrides: dict, lm_xl_config: XLConfig) -> None:
    """Segments run with memory equal the same positions run as one sequence (same span)."""
    model = build_lm(lm_xl_config(8, **overrides))
    tokens = torch.randint(0, LM_VOCAB, (2, 12))
    full, _ = model(tokens)
    memory = None
    outputs = []
    for start in range(0, 12, 4):
        hidden, memory = model(tokens[:, start : start + 4], memory=memory)
        outputs.append(hidden)
    torch.testing.assert_close(torch.cat(outputs, dim=1), full, rtol=1e-5, atol=1e-5)


def test_memory_shorter_than_segment_and_no_memory_equals_empty(lm_xl_config: XLConfig) -> None:
    model = build_lm(lm_xl_config(3))
    tokens = torch.randint(0, LM_VOCAB, (2, 5))
    hidden, memory = model(tokens)
    assert memory is not None and all(m.shape == (2, 3, 16) for m in memory)
    assert all(not m.requires_grad for m in memory)
    empty = [torch.zeros(2, 0, 16) for _ in range(2)]
    torch.testing.assert_close(model(tokens, memory=empty)[0], hidden, rtol=0, atol=1e-6)


def test_memory_of_wrong_width_or_layers_is_rejected(
    lm_family_config: Callable[..., ModelConfig], lm_xl_config: XLConfig
) -> None:
    model = build_lm(lm_xl_config(3))
    tokens = torch.randint(0, LM_VOCAB, (2, 5))
    with pytest.raises(ConfigError, match="d_model=16"):
        model(tokens, memory=[torch.zeros(2, 3, 8)] * 2)
    with pytest.raises(ConfigError, match="2"):
        model(tokens, memory=[torch.zeros(2, 3, 16)])
    plain = build_lm(lm_family_config())
    with pytest.raises(ConfigError, match="relative"):
        plain(tokens, memory=[torch.zeros(2, 3, 16)] * 2)


def test_incremental_hidden_states_equal_full_pass() -> None:
    for name in ("transformer", "rtransformer"):
        model = build_lm(LM_FAMILIES[name])
        tokens = torch.randint(0, LM_VOCAB, (2, 9))
        full, _ = model(tokens)
        state = model.new_state()
        parts = [model(tokens[:, a:b], state=state)[0] for a, b in ((0, 4), (4, 5), (5, 9))]
        torch.testing.assert_close(torch.cat(parts, dim=1), full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["xl", "gtrxl"])
def test_xl_decoding_from_cached_keys_equals_full_pass_and_memory_recomputation(name: str) -> None:
    """XL decoding keeps each layer's keys/values and position keys: a new token projects
    only itself, and the hidden states equal one full pass and the memory path that
    re-projects the whole memory every step (the memory holds every position)."""
    model = build_lm(LM_FAMILIES[name])
    tokens = torch.randint(0, LM_VOCAB, (2, 9))
    policy = MemoryPolicy(mem_len=9, clamp_len=4)
    full, _ = model(tokens, policy=policy)
    state = model.new_state()
    memory = None
    cached, recomputed = [], []
    for a, b in ((0, 4), (4, 5), (5, 6), (6, 9)):
        cached.append(model(tokens[:, a:b], state=state, policy=policy)[0])
        hidden, memory = model(tokens[:, a:b], memory=memory, policy=policy)
        recomputed.append(hidden)
    torch.testing.assert_close(torch.cat(cached, dim=1), full, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(
        torch.cat(cached, dim=1), torch.cat(recomputed, dim=1), rtol=1e-5, atol=1e-5
    )
    attention = state.layers[0][0]
    assert attention["kv"].length == 9 and attention["positions"].held >= 9


@pytest.mark.parametrize(
    "policy",
    [MemoryPolicy(mem_len=3), MemoryPolicy(mem_len=4, clamp_len=2, same_length=True)],
    ids=["window", "same-length-clamped"],
)
def test_xl_cache_follows_a_memory_shorter_than_the_context(policy: MemoryPolicy) -> None:
    """With a memory window shorter than the context, the cache keeps the keys of the memory
    positions only: outputs and memories equal the memory path (also with same_length,
    whose mask cuts single queries too), and a memory handed out earlier is never altered
    by later steps."""
    model = build_lm(LM_FAMILIES["xl"])
    tokens = torch.randint(0, LM_VOCAB, (2, 10))
    state, memory = model.new_state(), None
    handed_out = []
    for a, b in ((0, 2), *((i, i + 1) for i in range(2, 10))):
        cached, cached_memory = model(tokens[:, a:b], state=state, policy=policy)
        hidden, memory = model(tokens[:, a:b], memory=memory, policy=policy)
        torch.testing.assert_close(cached, hidden, rtol=1e-5, atol=1e-5)
        for got, want in zip(cached_memory, memory, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        handed_out.append((cached_memory, [m.clone() for m in cached_memory]))
    for views, values in handed_out:
        assert all(torch.equal(v, c) for v, c in zip(views, values, strict=True))


def test_gtrxl_identity_path(lm_xl_config: XLConfig) -> None:
    """With every sublayer output zeroed, the output gate passes the stream through untouched."""
    model = build_lm(lm_xl_config(4, norm="pre", gate=GateConfig(kind="gtrxl-output")))
    with torch.no_grad():
        for block in model.blocks:
            block.sublayers[0].attention.out.weight.zero_()
            block.sublayers[1].fc2.weight.zero_()
            block.sublayers[1].fc2.bias.zero_()
    tokens = torch.randint(0, LM_VOCAB, (2, 6))
    hidden, _ = model(tokens)
    expected = model.final_norm(model.embedding(tokens) * model.embedding_scale)
    torch.testing.assert_close(hidden, expected, rtol=1e-6, atol=1e-6)


def test_gtrxl_with_post_ln_is_an_error(lm_xl_config: XLConfig) -> None:
    with pytest.raises(ConfigError, match="pre"):
        LanguageModel(lm_xl_config(4, norm="post", gate=GateConfig(kind="gtrxl-gru")))


def test_adaptive_softmax_nll_matches_log_prob(
    lm_family_config: Callable[..., ModelConfig],
) -> None:
    model = build_lm(lm_family_config(adaptive_cutoffs=(5, 12), tie_weights=False))
    tokens = torch.randint(0, LM_VOCAB, (2, 6))
    hidden, _ = model(tokens)
    nll = model.token_nll(hidden, tokens)
    log_probs = model.logits(hidden)
    expected = -log_probs.gather(-1, tokens[..., None]).squeeze(-1)
    torch.testing.assert_close(nll, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(2, 6), rtol=1e-5, atol=1e-5)
    ignored = tokens.clone()
    ignored[0, 0] = -100
    assert model.token_nll(hidden, ignored)[0, 0] == 0


def test_rtransformer_gates_none_equals_plain() -> None:
    plain = build_lm(LM_FAMILIES["rtransformer"])
    config = ModelConfig(
        **{**LM_FAMILIES["rtransformer"].__dict__, "gate": GateConfig(kind="sdu", layers="none")}
    )
    no_layers = build_lm(config)
    tokens = torch.randint(0, LM_VOCAB, (2, 7))
    torch.testing.assert_close(plain(tokens)[0], no_layers(tokens)[0], rtol=0, atol=0)


def test_small_rt_l3_trains_on_a_tiny_corpus(
    tmp_path, lm_family_config: Callable[..., ModelConfig]
) -> None:
    from highway_transformer.config import Config, DataConfig, TrainConfig
    from highway_transformer.training.trainer import train

    text = tmp_path / "abc.txt"
    text.write_text("the cat sat on the mat. " * 300, encoding="utf-8")
    config = Config(
        model=lm_family_config(
            family="rtransformer", n_layers=3, positional="none", dropout=0.0, vocab_size=0,
            gate=GateConfig(kind="sdu", activation="sigmoid"),
            local_rnn=LocalRNNConfig(cell="gru", window=4),
        ),
        data=DataConfig(corpus="file", path=str(text), batch_size=4, seq_len=24, context=8),
        train=TrainConfig(optimizer="adam", lr=3e-3, schedule="constant", max_steps=60,
                          eval_interval=30, clip=1.0),
    )  # fmt: skip
    results = train(config, tmp_path / "run", progress=False)
    assert results["valid"]["loss"] < 1.0  # uniform over ~12 symbols would be ln 12 ≈ 2.5


@pytest.mark.parametrize(
    "key, value",
    [("model.memory.clamp_len", -2), ("model.memory.eval_clamp_len", -5),
     ("model.memory.eval_mem_len", -1), ("model.memory.mem_len", -1)],
)  # fmt: skip
def test_bad_memory_settings_are_config_errors(key: str, value: int) -> None:
    from highway_transformer.config import Config

    with pytest.raises(ConfigError, match=key.split(".")[-1]):
        validate(Config().replace(**{"model.family": "xl", key: value}))
