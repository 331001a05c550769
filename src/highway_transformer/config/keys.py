"""Every config key with its declaration (``highway config``, the configuration page and
validation's per-field checks read it from here).

A key is declared once, on its field in :mod:`highway_transformer.config.schema`
(:func:`~highway_transformer.config.schema.key`); this module walks the schema for them.
"""

from __future__ import annotations

from dataclasses import MISSING, Field, fields, is_dataclass
from functools import cache
from typing import Any, NamedTuple

from ..errors import ConfigError
from .schema import KEY, Config, Key, Range


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


def _walk(cls: type, prefix: str) -> list[Declared]:
    out: list[Declared] = []
    for f in fields(cls):
        default = _default(f)
        if is_dataclass(default):
            out += _walk(type(default), f"{prefix}{f.name}.")
        else:
            out.append(Declared(f"{prefix}{f.name}", default, f.metadata.get(KEY)))
    return out


@cache
def declared_keys() -> tuple[Declared, ...]:
    """Every leaf key of :class:`Config`, in field order."""
    return tuple(_walk(Config, ""))


def shown_meaning(spec: Key | None) -> str:
    """What ``highway config`` says of a key: its choices, then its meaning."""
    if spec is None:
        return ""
    if not spec.choices:
        return spec.meaning
    listed = " | ".join(choice or '""' for choice in spec.choices)
    return f"{listed}; {spec.meaning}"


def config_keys() -> list[tuple[str, Any, str]]:
    """``(dotted key, default, meaning)`` for every leaf field of the config, in field order."""
    return [(d.name, d.default, shown_meaning(d.spec)) for d in declared_keys()]


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


@cache
def field_ranges() -> dict[str, Range]:
    """Every numeric key's allowed values (its declared ``range``)."""
    return {d.name: d.spec.range for d in declared_keys() if d.spec and d.spec.range}
