"""Configuration: the schema (typed dataclasses) and its loading (files, overrides).

Each key is declared once in :mod:`~highway_transformer.config.schema` (its meaning, range
or choices); validation (those, and which settings apply together) is not here but in
:mod:`highway_transformer.validation`, the one module that knows every registry.
"""

from .loading import (
    apply_overrides,
    from_dict,
    load_file,
    merge,
    parse_override,
    save_config,
    set_dotted,
)
from .names import (
    ANNEAL_RULES,
    COMPILE_MODES,
    DIST_BACKENDS,
    FINAL_WEIGHTS,
    FLAGS,
    LEVELS,
    OPTIMIZERS,
    POSITIONALS,
    PRECISIONS,
    SCHEDULES,
    SUBWORD_LEVELS,
)
from .schema import (
    Config,
    DataConfig,
    GateConfig,
    LocalRNNConfig,
    MemoryConfig,
    ModelConfig,
    RLConfig,
    TaskConfig,
    TrainConfig,
)

__all__ = [
    "ANNEAL_RULES",
    "COMPILE_MODES",
    "DIST_BACKENDS",
    "FINAL_WEIGHTS",
    "FLAGS",
    "LEVELS",
    "OPTIMIZERS",
    "POSITIONALS",
    "PRECISIONS",
    "SCHEDULES",
    "SUBWORD_LEVELS",
    "Config",
    "DataConfig",
    "GateConfig",
    "LocalRNNConfig",
    "MemoryConfig",
    "ModelConfig",
    "RLConfig",
    "TaskConfig",
    "TrainConfig",
    "apply_overrides",
    "from_dict",
    "load_file",
    "merge",
    "parse_override",
    "save_config",
    "set_dotted",
]
