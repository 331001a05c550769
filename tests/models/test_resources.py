"""Resource checks before training (``models/resources.py``): parameters counted on the meta
device equal a built model's, the memory estimate's terms, and an impossible size refused
in one line that carries the estimate."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest
import torch

from highway_transformer.config import (
    Config,
    GateConfig,
    LocalRNNConfig,
    MemoryConfig,
    ModelConfig,
    TrainConfig,
)
from highway_transformer.errors import ConfigError
from highway_transformer.models import resources
from highway_transformer.models.lm import LanguageModel
from highway_transformer.models.resources import (
    GiB,
    check_model_size,
    check_resources,
    count_parameters,
    device_memory,
    estimate_memory,
    parameter_floor,
)

MODELS = {
    "tied": {},
    "untied": {"tie_weights": False},
    "gated": {"gate": GateConfig(kind="sdu")},
    "xl": {"family": "xl", "attention": "relative", "memory": MemoryConfig(mem_len=8)},
    "rtransformer": {"family": "rtransformer", "local_rnn": LocalRNNConfig(window=3)},
    "adaptive": {"adaptive_cutoffs": (10, 20), "tie_weights": False},
}


@pytest.fixture
def config_of(tiny_model_config: Callable[..., ModelConfig]) -> Callable[..., Config]:
    """``config_of(**model_overrides)``: a Config of the tiny model over 40 symbols."""
    return lambda **overrides: Config(model=tiny_model_config(vocab_size=40, **overrides))


@pytest.mark.parametrize("name", MODELS)
def test_parameters_counted_on_meta_equal_a_built_models(
    name: str, config_of: Callable[..., Config]
) -> None:
    config = config_of(**MODELS[name])
    model = LanguageModel(config.model)
    unique = {id(p): p.numel() for p in model.parameters()}
    assert count_parameters(config) == sum(unique.values())
    if name == "tied":  # the output layer is the embedding: counted once
        untied = count_parameters(config_of(tie_weights=False))
        assert untied - count_parameters(config) == model.embedding.weight.numel()


@pytest.mark.parametrize("name", MODELS)
def test_the_floor_is_a_lower_bound_of_the_count(
    name: str, config_of: Callable[..., Config]
) -> None:
    config = config_of(**MODELS[name])
    assert 0 < parameter_floor(config.model) <= count_parameters(config)


def test_an_absurd_size_is_refused_from_the_floor_before_anything_is_built(
    config_of: Callable[..., Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config_of()
    config.model.n_layers = 10**9  # the meta-device count would build a billion layers

    def never(*args: object) -> int:
        raise AssertionError("counted module by module")

    monkeypatch.setattr(resources, "count_parameters", never)
    with pytest.raises(ConfigError, match=r"^this model needs at least [\d,.]+ GiB \(weights, "):
        check_model_size(config, torch.device("cpu"))
    monkeypatch.setattr(resources, "device_memory", lambda device: 64 * GiB)
    with pytest.raises(ConfigError, match=r"at least .* GiB \(weights of at least"):
        check_model_size(config, torch.device("cpu"), training=False)


def test_a_size_no_tensor_can_have_is_one_line_where_memory_cannot_be_asked(
    config_of: Callable[..., Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config_of()
    config.model.d_model, config.model.n_heads = 10**9, 1  # a weight over 2^63 bytes
    monkeypatch.setattr(resources, "device_memory", lambda device: None)
    with pytest.raises(ConfigError, match="would exceed 2\\^63 bytes.*model.d_model=1000000000"):
        check_model_size(config, torch.device("cpu"))
    small = config_of()
    assert check_model_size(small, torch.device("cpu")) == count_parameters(small)


@pytest.mark.parametrize(
    ("optimizer", "momentum", "copies"), [("adam", 0.0, 2), ("adamw", 0.0, 2), ("sgd", 0.0, 0),
                                          ("sgd", 0.9, 1)]
)  # fmt: skip
def test_weights_gradients_and_optimizer_state_are_fp32_copies(
    optimizer: str, momentum: float, copies: int, config_of: Callable[..., Config]
) -> None:
    config = config_of()
    config.train = TrainConfig(optimizer=optimizer, momentum=momentum)
    n = count_parameters(config)
    estimate = estimate_memory(config, 2, 8)
    assert (estimate.parameters, estimate.weights, estimate.gradients) == (n, 4 * n, 4 * n)
    assert estimate.optimizer == 4 * n * copies
    assert estimate.tokens == (2, 8)
    parts = estimate.weights + estimate.gradients + estimate.optimizer + estimate.activations
    assert estimate.total == parts


def test_activations_grow_with_rows_length_memory_and_precision(
    config_of: Callable[..., Config],
) -> None:
    config = config_of()

    def activations(rows: int, length: int, c: Config = config) -> int:
        return estimate_memory(c, rows, length).activations

    assert activations(4, 16) == 2 * activations(2, 16)  # linear in the rows
    lengths = [activations(2, n) for n in (8, 16, 32, 64)]
    assert all(b > 2 * a for a, b in zip(lengths, lengths[1:], strict=False))  # the scores: L²
    xl = {"family": "xl", "attention": "relative"}
    no_memory = activations(2, 16, config_of(**xl, memory=MemoryConfig(mem_len=0)))
    memory = [activations(2, 16, config_of(**xl, memory=MemoryConfig(mem_len=m))) for m in (4, 8)]
    assert no_memory < memory[0] < memory[1]
    assert memory[1] - no_memory == 2 * (memory[0] - no_memory)  # keys of the memory: linear
    half = Config(model=config.model, train=TrainConfig(precision="bf16"))
    assert 2 * activations(2, 16, half) == activations(2, 16)


def test_an_impossible_size_is_one_line_with_the_estimate(
    config_of: Callable[..., Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config_of()
    config.data.batch_size, config.data.seq_len = 4, 64
    monkeypatch.setattr(resources, "device_memory", lambda device: GiB)
    fits = check_resources(config, 10_000, torch.device("cpu"))
    assert fits.tokens == (4, 64) and fits.total < GiB
    config.data.seq_len = 100_000  # the scores alone: 4 heads·rows × 100k² floats
    with pytest.raises(ConfigError) as info:
        check_resources(config, 10_000_000, torch.device("cpu"))
    message = str(info.value)
    estimate = estimate_memory(config, 4, 100_000)
    assert message == (
        f"this configuration needs {estimate.describe()} but the cpu device has 1.0 GiB; "
        "lower data.seq_len, data.batch_size or the model size"
    )
    assert "\n" not in message and message.startswith("this configuration needs ~")
    monkeypatch.setattr(resources, "device_memory", lambda device: None)  # cannot be asked
    assert check_resources(config, 10_000_000, torch.device("cpu")).total > GiB


def test_the_window_is_clipped_to_the_rows_of_a_small_corpus(
    config_of: Callable[..., Config],
) -> None:
    config = config_of()
    config.data.batch_size, config.data.seq_len = 4, 400
    estimate = check_resources(config, 101, torch.device("meta"))
    assert estimate.tokens == (4, 25)  # (101 - 1) // 4 positions per row
    assert check_resources(config, 2, torch.device("meta")).tokens == (4, 1)


def test_describe_names_every_term_in_gib() -> None:
    estimate = resources.MemoryEstimate(10, GiB, GiB, 2 * GiB, GiB // 2, (4, 100))
    assert estimate.describe() == (
        "~4.5 GiB (weights 1.00, gradients 1.00, optimizer 2.00, activations 0.50 GiB "
        "for 4x100 tokens)"
    )


def test_device_memory_of_the_cpu_and_of_a_device_it_cannot_ask() -> None:
    cpu = device_memory(torch.device("cpu"))
    assert cpu is None or cpu > 2**26
    assert device_memory(torch.device("meta")) is None


def test_counting_parameters_leaves_the_compiler_stack_unimported() -> None:
    """Initialising meta tensors would import ``torch._dynamo`` (~70 MiB resident, seconds):
    ``highway eval`` pays for it through the resource check. A fresh process shows it is not."""
    code = (
        "import sys\n"
        "from highway_transformer.config import Config, ModelConfig\n"
        "from highway_transformer.models.resources import count_parameters\n"
        "n = count_parameters(Config(model=ModelConfig(vocab_size=40, d_model=16, n_heads=2,"
        " d_inner=32, n_layers=2)))\n"
        "print(n > 0, 'torch._dynamo' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "False"]
