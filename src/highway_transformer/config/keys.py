"""Every config key with its declaration (``highway config``, the configuration page and the
per-key checks of validation read them from here).

A key is declared once, on its field in :mod:`highway_transformer.config.schema`
(:func:`~highway_transformer.config.schema.key`); this module walks the schema for them.
"""

from __future__ import annotations

from dataclasses import MISSING, Field, fields, is_dataclass
from typing import Any, NamedTuple

from ..errors import ConfigError
from . import names
from .ranges import Range
from .schema import KEY, Config, Key


class Declared(NamedTuple):
    """A leaf key: its dotted name, its default and its declaration (``None``: undeclared)."""

    name: str
    default: Any
    spec: Key | None


def _default(f: Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return None  # pragma: no cover - every config field has a default


def declared_keys(cls: type | None = None, prefix: str = "") -> list[Declared]:
    """Every leaf key of ``cls`` (default :class:`Config`; nested sections walked), in field
    order."""
    out: list[Declared] = []
    for f in fields(cls or Config):
        default = _default(f)
        if is_dataclass(default):
            out += declared_keys(type(default), f"{prefix}{f.name}.")
        else:
            out.append(Declared(f"{prefix}{f.name}", default, f.metadata.get(KEY)))
    return out


def choices_of(spec: Key) -> tuple[str, ...]:
    """The names a key may take, read now from :mod:`~highway_transformer.config.names` (a
    registry's names may have grown since the schema was imported)."""
    return tuple(getattr(names, spec.choices)) if spec.choices else ()


def key_ranges() -> dict[str, Range]:
    """Every numeric key's declared range, by dotted name."""
    return {d.name: d.spec.range for d in declared_keys() if d.spec and d.spec.range}


def config_keys(cls: type | None = None) -> list[tuple[str, Any, str]]:
    """``(dotted key, default, meaning)`` for every leaf field of ``cls``, in field order."""
    return [(d.name, d.default, d.spec.meaning if d.spec else "") for d in declared_keys(cls)]


def format_keys(section: str | None = None) -> str:
    """The table ``highway config`` prints (one section, e.g. ``train``, or all)."""
    rows = [r for r in config_keys() if section is None or r[0].startswith(f"{section}.")]
    if not rows:
        sections = sorted({k.split(".")[0] for k, _, _ in config_keys() if "." in k})
        raise ConfigError(f"no config section {section!r}; choose one of: {', '.join(sections)}")
    width = max(len(k) for k, _, _ in rows)
    shown = [(k, "None" if d is None else repr(d), m) for k, d, m in rows]
    dwidth = min(max(len(d) for _, d, _ in shown), 20)
    return "\n".join(f"{k:<{width}}  {d:<{dwidth}}  {m}".rstrip() for k, d, m in shown)
