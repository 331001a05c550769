"""Self-gated Transformer sequence models (Highway Transformer).

The main entry points::

    from highway_transformer import ModelConfig, GateConfig, build_model, get_preset, train
"""

import sys
import types
from importlib import import_module
from typing import Any

__version__ = "0.1.0"

# Names are imported on first use so that ``import highway_transformer`` (and ``highway
# --help``) does not pay for torch.
_EXPORTS = {
    "Config": "config",
    "DataConfig": "config",
    "GateConfig": "config",
    "LocalRNNConfig": "config",
    "MemoryConfig": "config",
    "ModelConfig": "config",
    "TaskConfig": "config",
    "TrainConfig": "config",
    "build_config": "config",
    "Corpus": "data.corpora",
    "load_corpus": "data.corpora",
    "Vocabulary": "data.vocab",
    "CheckpointError": "errors",
    "ConfigError": "errors",
    "DataError": "errors",
    "HighwayError": "errors",
    "TrainingDiverged": "errors",
    "EvalResult": "evaluate",
    "evaluate": "evaluate",
    "generate_ids": "generate",
    "generate_text": "generate",
    "LanguageModel": "models.lm",
    "build_model": "models.lm",
    "PRESETS": "presets",
    "get_preset": "presets",
    "TASKS": "tasks",
    "Task": "tasks",
    "load_pretrained": "train.checkpoint",
    "save_checkpoint": "train.checkpoint",
    "Trainer": "train.trainer",
    "train": "train.trainer",
}


class _Package(types.ModuleType):
    """Keeps ``highway_transformer.train`` the function: importing the ``train`` subpackage
    would otherwise rebind the name to the module (the imports here are lazy)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


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
    "load_pretrained",
    "save_checkpoint",
    "train",
]
