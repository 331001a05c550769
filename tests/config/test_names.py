"""The torch-free name lists (``config.names``) are the registries' names, in their order."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from highway_transformer.config import names


def _registries() -> dict[str, Iterable[str]]:
    from highway_transformer.data.batching import EVAL_LAYOUTS
    from highway_transformer.data.corpora import CORPORA
    from highway_transformer.models.builders import ATTENTIONS, GATEABLE
    from highway_transformer.models.families import FAMILIES
    from highway_transformer.models.sequence import POOLINGS
    from highway_transformer.nn.combiner import ACTIVATIONS
    from highway_transformer.nn.connections import COMBINERS
    from highway_transformer.nn.feedforward import FFNS
    from highway_transformer.nn.local_rnn import CELLS
    from highway_transformer.nn.norms import NORMS
    from highway_transformer.runtime.strategies import STRATEGIES
    from highway_transformer.tasks import TASKS
    from highway_transformer.tasks.rl.envs import ENVS
    from highway_transformer.tasks.rl.policies import POLICIES

    return {
        "FAMILY_NAMES": FAMILIES,
        "ATTENTION_NAMES": ATTENTIONS,
        "GATEABLE_NAMES": GATEABLE,
        "CELL_NAMES": CELLS,
        "NORM_NAMES": NORMS,
        "GATE_NAMES": COMBINERS,
        "ACTIVATION_NAMES": ACTIVATIONS,
        "EVAL_LAYOUT_NAMES": EVAL_LAYOUTS,
        "CORPUS_NAMES": CORPORA,
        "TASK_NAMES": TASKS,
        "POOLING_NAMES": POOLINGS,
        "STRATEGY_NAMES": STRATEGIES,
        "RL_POLICY_NAMES": POLICIES,
        "RL_ENV_NAMES": ENVS,
        "FFN_NAMES": FFNS,
    }


def test_every_name_list_equals_its_registry() -> None:
    registries = _registries()
    listed = {name for name in vars(names) if name.endswith("_NAMES")}
    assert listed == set(registries), "a name list without its registry, or the reverse"
    for name, registry in registries.items():
        assert getattr(names, name) == tuple(registry), name


def test_names_import_no_torch() -> None:
    import subprocess
    import sys

    probe = "import sys, highway_transformer.config.names; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


@pytest.mark.parametrize(
    ("given", "canonical"), [("cosine", "content"), ("Scaled-Dot", "scaled_dot"), ("dot", "dot")]
)
def test_score_aliases(given: str, canonical: str) -> None:
    assert names.normalize_score(given) == canonical


@pytest.mark.parametrize("name", ["auto", "cpu", "cuda", "cuda:1", "mps", "xpu:0", "meta"])
def test_device_names_torch_means_pass(name: str) -> None:
    names.check_device_name(name)


@pytest.mark.parametrize("name", ["gpu", "cuda0", "auto:0", "CUDA", "cuda:", ""])
def test_device_names_torch_cannot_mean_are_refused(name: str) -> None:
    from highway_transformer.errors import ConfigError

    with pytest.raises(ConfigError, match="use auto, cpu, cuda, cuda:N or mps"):
        names.check_device_name(name)
