"""Hugging Face–style API: save/from_pretrained on every model class, the Hub path (offline),
model.generate (batched prompts, beam search, stop strings) and forward with targets."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from highway_transformer.config import GateConfig, LocalRNNConfig, MemoryConfig, ModelConfig
from highway_transformer.data.vocab import Vocabulary
from highway_transformer.errors import CheckpointError, ConfigError
from highway_transformer.models.encoder_decoder import EncoderDecoder
from highway_transformer.models.generation import beam_search, generate_ids
from highway_transformer.models.lm import LanguageModel, LMOutput
from highway_transformer.models.sequence import SequenceModel

V = 12


#: This file's families, as changes to :func:`gated_lm_config`'s model.
FAMILIES = {
    "transformer": {},
    "rtransformer": {"family": "rtransformer", "local_rnn": LocalRNNConfig(cell="gru", window=3)},
    "xl": {"family": "xl", "attention": "relative", "memory": MemoryConfig(mem_len=4)},
    "shaw": {"attention": "shaw", "shaw_clip": 4},
}


@pytest.fixture
def gated_lm_config(tiny_model_config: Callable[..., ModelConfig]) -> Callable[..., ModelConfig]:
    """``gated_lm_config(**changes)``: the tiny model over V symbols, tanh-SDU gates on layer 1."""
    gate = GateConfig(kind="sdu", activation="tanh", layers="1")
    return lambda **changes: tiny_model_config(**{"vocab_size": V, "gate": gate, **changes})


@pytest.mark.parametrize("family", FAMILIES)
def test_language_model_round_trip_gives_identical_logits(
    family: str, tmp_path: Path, gated_lm_config: Callable[..., ModelConfig]
) -> None:
    torch.manual_seed(0)
    model = LanguageModel(gated_lm_config(**FAMILIES[family])).eval()
    model.save_pretrained(tmp_path / "m")
    loaded = LanguageModel.from_pretrained(tmp_path / "m")
    x = torch.randint(0, V, (2, 7))
    assert torch.equal(model.logits(model(x)[0]), loaded.logits(loaded(x)[0]))
    assert set(loaded.gate_biases()) == {"layer1.attn", "layer1.ffn"}
    assert not loaded.training


def test_sequence_and_encoder_decoder_round_trip(
    tmp_path: Path, gated_lm_config: Callable[..., ModelConfig]
) -> None:
    torch.manual_seed(0)
    seq = SequenceModel(gated_lm_config(), n_in=3, n_out=5, head="pooled", pooling="mean").eval()
    seq.save_pretrained(tmp_path / "seq")
    x = torch.randn(2, 6, 3)
    assert torch.equal(seq(x), SequenceModel.from_pretrained(tmp_path / "seq")(x))

    ed = EncoderDecoder(gated_lm_config(), 9, 11, score="additive", share_embeddings=False).eval()
    ed.save_pretrained(tmp_path / "ed")
    src, tgt = torch.randint(0, 9, (2, 5)), torch.randint(0, 11, (2, 4))
    assert torch.equal(ed(src, tgt), EncoderDecoder.from_pretrained(tmp_path / "ed")(src, tgt))
    with pytest.raises(CheckpointError, match="EncoderDecoder.from_pretrained"):
        LanguageModel.from_pretrained(tmp_path / "ed")


def test_pretrained_folder_is_json_and_safetensors(
    tmp_path: Path, gated_lm_config: Callable[..., ModelConfig]
) -> None:
    vocab = Vocabulary([chr(97 + i) for i in range(V)], "char")
    LanguageModel(gated_lm_config()).save_pretrained(tmp_path, vocab=vocab)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "config.json",
        "manifest.json",
        "model.safetensors",
        "vocab.json",
    ]
    assert Vocabulary.load(tmp_path / "vocab.json") == vocab
    with pytest.raises(CheckpointError, match="neither a folder nor a Hub repository"):
        LanguageModel.from_pretrained(tmp_path / "vocab.json")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="no config.json"):
        LanguageModel.from_pretrained(tmp_path / "empty")


def test_a_pretrained_folder_is_verified_by_its_manifest(
    tmp_path: Path, gated_lm_config: Callable[..., ModelConfig]
) -> None:
    folder = LanguageModel(gated_lm_config()).save_pretrained(tmp_path / "m")
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-2] ^= 0x01
    weights.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"model\.safetensors does not match its SHA-256"):
        LanguageModel.from_pretrained(folder)
    (folder / "manifest.json").unlink()
    with pytest.raises(CheckpointError, match="no manifest.json.*trust_unverified=True"):
        LanguageModel.from_pretrained(folder)
    assert not LanguageModel.from_pretrained(folder, trust_unverified=True).training


def test_hub_repository_id_loads_through_snapshot_download(
    tmp_path, monkeypatch, gated_lm_config: Callable[..., ModelConfig]
) -> None:
    hub = pytest.importorskip("huggingface_hub")
    torch.manual_seed(0)
    model = LanguageModel(gated_lm_config()).eval()
    model.save_pretrained(tmp_path / "repo")
    asked = {}

    def offline_snapshot(repo_id: str, **kwargs):  # the Hub, served from a local folder
        asked.update(repo_id=repo_id, **kwargs)
        return str(tmp_path / "repo")

    monkeypatch.setattr(hub, "snapshot_download", offline_snapshot)
    loaded = LanguageModel.from_pretrained("someone/tiny-highway", revision="main")
    assert asked == {"repo_id": "someone/tiny-highway", "revision": "main"}
    x = torch.randint(0, V, (1, 5))
    assert torch.equal(model(x)[0], loaded(x)[0])


def test_forward_with_targets_returns_the_mean_loss(
    gated_lm_config: Callable[..., ModelConfig],
) -> None:
    torch.manual_seed(0)
    model = LanguageModel(gated_lm_config()).eval()
    x = torch.randint(0, V, (2, 8))
    targets = x[:, 1:].clone()
    targets[0, :3] = -100
    out = model(x[:, :-1], targets=targets)
    assert isinstance(out, LMOutput)
    hidden, _ = model(x[:, :-1])
    logits = model.logits(hidden)
    expected = torch.nn.functional.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
    assert out.loss.item() == pytest.approx(expected.item(), rel=1e-6)
    out.loss.backward()  # a training step can use it directly
    assert model.output.weight.grad is not None


@pytest.mark.parametrize("family", FAMILIES)
def test_beam_size_one_equals_greedy(
    family: str, gated_lm_config: Callable[..., ModelConfig]
) -> None:
    torch.manual_seed(1)
    model = LanguageModel(gated_lm_config(**FAMILIES[family])).eval()
    prompt = [1, 4, 2]
    greedy = generate_ids(model, prompt, 8, temperature=0.0)
    assert beam_search(model, prompt, 8, num_beams=1) == greedy
    assert model.generate(prompt, 8, num_beams=1) == greedy
    assert beam_search(model, prompt, 8, num_beams=1, use_cache=False) == greedy


@pytest.mark.parametrize("family", ["transformer", "xl", "rtransformer"])
def test_beam_search_with_cache_matches_recomputation(
    family: str, gated_lm_config: Callable[..., ModelConfig]
) -> None:
    torch.manual_seed(2)
    model = LanguageModel(gated_lm_config(**FAMILIES[family])).eval()
    cached = beam_search(model, [3, 1], 6, num_beams=3)
    assert cached == beam_search(model, [3, 1], 6, num_beams=3, use_cache=False)
    assert len(cached) == 6


def test_beam_search_finds_a_likelier_sequence_than_greedy(
    gated_lm_config: Callable[..., ModelConfig],
) -> None:
    torch.manual_seed(3)
    model = LanguageModel(gated_lm_config()).eval()
    prompt = [1, 2]

    def logprob(new: list[int]) -> float:
        ids = torch.tensor([prompt + new])
        targets = ids[:, 1:].clone()
        targets[:, : len(prompt) - 1] = -100  # score the new tokens only
        out = model(ids[:, :-1], targets=targets)
        return -out.loss.item() * len(new)

    greedy = generate_ids(model, prompt, 5, temperature=0.0)
    beam = beam_search(model, prompt, 5, num_beams=4)
    assert logprob(beam) >= logprob(greedy) - 1e-5


def test_batched_prompts_equal_one_at_a_time(gated_lm_config: Callable[..., ModelConfig]) -> None:
    torch.manual_seed(4)
    model = LanguageModel(gated_lm_config()).eval()
    prompts = [[1, 2, 3], [4, 5, 6], [7, 8]]
    batched = model.generate(prompts, 6, temperature=0.0)
    assert batched == [generate_ids(model, p, 6, temperature=0.0) for p in prompts]
    assert model.generate(torch.tensor([[1, 2, 3]]), 6, temperature=0.0) == batched[:1]
    sampled = model.generate(prompts, 6, top_k=3, top_p=0.9, seed=5)
    assert sampled == model.generate(prompts, 6, top_k=3, top_p=0.9, seed=5)


def test_text_prompts_and_stop_strings(gated_lm_config: Callable[..., ModelConfig]) -> None:
    torch.manual_seed(5)
    vocab = Vocabulary(list("abcdefghij ."), "char")
    model = LanguageModel(gated_lm_config()).eval()
    free = model.generate("ab", 30, temperature=0.0, vocab=vocab)
    assert isinstance(free, str) and len(free) == 30
    stop = free[3:5]
    cut = model.generate("ab", 30, temperature=0.0, vocab=vocab, stop_strings=[stop])
    assert cut.endswith(stop) and free.startswith(cut) and len(cut) <= 5
    both = model.generate(["ab", "c"], 10, temperature=0.0, vocab=vocab, stop_strings=[stop])
    assert both[0] == free[: len(both[0])] and isinstance(both[1], str)
    with pytest.raises(ConfigError, match="vocab"):
        model.generate([1, 2], 5, stop_strings=["x"])
    with pytest.raises(ConfigError, match="vocab"):
        model.generate("ab", 5)
