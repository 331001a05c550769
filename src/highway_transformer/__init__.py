"""Self-gated Transformer sequence models (Highway Transformer).

The main entry points::

    from highway_transformer import ModelConfig, GateConfig, build_model, get_preset, train
"""

from .config import (
    Config,
    DataConfig,
    GateConfig,
    LocalRNNConfig,
    MemoryConfig,
    ModelConfig,
    TaskConfig,
    TrainConfig,
    build_config,
)
from .data.corpora import Corpus, load_corpus
from .data.vocab import Vocabulary
from .errors import CheckpointError, ConfigError, DataError, HighwayError, TrainingDiverged
from .evaluate import EvalResult, evaluate
from .generate import generate_ids, generate_text
from .models.lm import LanguageModel, build_model
from .presets import PRESETS, get_preset
from .tasks import TASKS, Task
from .train.checkpoint import load_pretrained, save_checkpoint
from .train.trainer import Trainer, train

__version__ = "0.1.0"

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
