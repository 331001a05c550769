"""Self-gated Transformer sequence models (Highway Transformer).

The main entry points::

    from highway_transformer import ModelConfig, GateConfig, build_model, get_preset, train
"""

from importlib import import_module
from typing import Any

__version__ = "0.3.0"

# Names are imported on first use so that ``import highway_transformer`` (and ``highway
# --help``) does not pay for torch. Each comes from the layer that owns it; the package's
# subpackages (``training``, ``models``, ...) never shadow these names.
_EXPORTS = {
    "Config": "config",
    "DataConfig": "config",
    "GateConfig": "config",
    "LocalRNNConfig": "config",
    "MemoryConfig": "config",
    "ModelConfig": "config",
    "TaskConfig": "config",
    "TrainConfig": "config",
    "build_config": "validation",
    "validate": "validation",
    "Corpus": "data.corpora",
    "load_corpus": "data.corpora",
    "Vocabulary": "data.vocab",
    "CheckpointError": "errors",
    "ConfigError": "errors",
    "DataError": "errors",
    "HighwayError": "errors",
    "TrainingDiverged": "errors",
    "EvalResult": "tasks.lm_scoring",
    "evaluate": "tasks.lm_scoring",
    "generate_ids": "models.generation",
    "generate_text": "models.generation",
    "LanguageModel": "models.lm",
    "build_model": "api",
    "evaluate_checkpoint": "api",
    "load_pretrained": "api",
    "PRESETS": "presets",
    "get_preset": "presets",
    "TASKS": "tasks",
    "Task": "tasks",
    "save_checkpoint": "training.checkpoint",
    "Trainer": "training.trainer",
    "train": "training.trainer",
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "PRESETS",
    "TASKS",
    "CheckpointError",
    "Config",
    "ConfigError",
    "Corpus",
    "DataConfig",
    "DataError",
    "EvalResult",
    "GateConfig",
    "HighwayError",
    "LanguageModel",
    "LocalRNNConfig",
    "MemoryConfig",
    "ModelConfig",
    "Task",
    "TaskConfig",
    "TrainConfig",
    "Trainer",
    "TrainingDiverged",
    "Vocabulary",
    "build_config",
    "build_model",
    "evaluate",
    "generate_ids",
    "generate_text",
    "get_preset",
    "load_corpus",
    "evaluate_checkpoint",
    "load_pretrained",
    "save_checkpoint",
    "train",
    "validate",
]
