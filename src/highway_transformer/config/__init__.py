"""Configuration: the schema (typed dataclasses) and its loading (files, overrides).

Validation (ranges, names, which settings apply together) is not here but in
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
from .schema import (
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
