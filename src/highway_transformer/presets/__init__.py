"""Presets: ready-made configurations for the papers' experiments.

Each preset names the source of its hyper-parameters. ``highway presets`` lists them;
``highway train --preset NAME key=value ...`` trains one with overrides.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..config import Config
from ..errors import unknown_choice
from . import gtrxl_shaw, ht_tables, modern, rl, rt_tables, xl_tables


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    build: Callable[[], Config]


def _registry() -> dict[str, Preset]:
    presets: dict[str, Preset] = {}
    for name, (description, build) in {
        **ht_tables.PRESETS,
        **xl_tables.PRESETS,
        **gtrxl_shaw.PRESETS,
        **rt_tables.PRESETS,
        **rl.PRESETS,
        **modern.PRESETS,
    }.items():
        presets[name] = Preset(name, description, build)
    return presets


PRESETS: dict[str, Preset] = _registry()


def get_preset(name: str) -> Config:
    """A fresh Config for preset ``name`` (unknown names list the choices)."""
    if name not in PRESETS:
        raise unknown_choice("preset", name, PRESETS, "`highway presets`")
    config = PRESETS[name].build()
    config.name = name.replace("/", "_")
    return config


def register(name: str, description: str, build: Callable[[], Config]) -> None:
    """Add a preset (used by the family modules and by users' own code)."""
    PRESETS[name] = Preset(name, description, build)


#: The preset ``highway train --task NAME`` starts from when no ``--preset`` is given: each
#: task's small configuration (``lm``: the default config).
TASK_PRESETS: dict[str, str] = {
    "music": "rt-table2/transformer",
    "pixels": "digits/transformer",
    "copy": "copy/transformer",
    "adding": "adding/transformer",
    "seq2seq": "seq2seq/toy",
    "rl": "rl/corridor-gtrxl",
}


def task_preset(task: str) -> Config:
    """The starting config of ``task`` (see :data:`TASK_PRESETS`)."""
    return get_preset(TASK_PRESETS[task]) if task in TASK_PRESETS else Config()
