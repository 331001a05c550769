"""Reading configs: nested mappings into the schema's dataclasses, YAML/TOML files and
``key=value`` overrides, and writing them back.

Everything here is generic over the dataclasses of :mod:`~highway_transformer.config.schema`
(it imports none of them): values are coerced to the declared field types and unknown keys
are errors naming the closest key. Nothing here validates: a config is checked once, by
:mod:`highway_transformer.validation`.
"""

from __future__ import annotations

import sys
import types
import typing
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from ..errors import ConfigError, unknown_choice
from ..files import first_line, read_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

T = TypeVar("T")
C = TypeVar("C")


def _resolve_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _coerce(value: Any, hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        non_none = [a for a in args if a is not type(None)]
        return _coerce(value, non_none[0], where)
    if is_dataclass(hint):
        if not isinstance(value, dict):
            raise ConfigError(f"{where} must be a mapping, got {value!r}")
        return from_dict(hint, value, prefix=where + ".")
    if origin is tuple:
        if isinstance(value, str):
            value = [v for v in value.split(",") if v.strip()] if value.strip() else []
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where} must be a list, got {value!r}")
        item = args[0] if args else Any
        if len(args) == 2 and args[1] is Ellipsis or len(args) == 1:
            return tuple(_coerce(v, item, where) for v in value)
        if len(value) != len(args):
            raise ConfigError(f"{where} must have {len(args)} items, got {value!r}")
        return tuple(_coerce(v, a, where) for v, a in zip(value, args, strict=True))
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise ConfigError(f"{where} must be true or false, got {value!r}")
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int | str | float):
            raise ConfigError(f"{where} must be an integer, got {value!r}")
        try:
            as_float = float(value)
        except ValueError:
            raise ConfigError(f"{where} must be an integer, got {value!r}") from None
        if not as_float.is_integer():
            raise ConfigError(f"{where} must be an integer, got {value!r}")
        return int(as_float)
    if hint is float:
        if isinstance(value, bool):
            raise ConfigError(f"{where} must be a number, got {value!r}")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where} must be a number, got {value!r}") from None
    if hint is str:
        if isinstance(value, bool):  # YAML's spelling: the auto | true | false switches
            return "true" if value else "false"
        if not isinstance(value, str):
            return str(value)
        return value
    return value


def from_dict(cls: type[T], data: dict[str, Any], prefix: str = "") -> T:
    """Build dataclass ``cls`` from a (nested) mapping; unknown keys are errors."""
    hints = _resolve_hints(cls)
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = set(data) - names
    if unknown:
        key = sorted(unknown)[0]
        raise unknown_choice(f"config key in {prefix.rstrip('.') or 'config'}:", key, names)
    kwargs = {name: _coerce(value, hints[name], prefix + name) for name, value in data.items()}
    return cls(**kwargs)


def set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    """Set ``data["a"]["b"] = value`` for ``key == "a.b"``, creating nothing new."""
    parts = key.split(".")
    node = data
    for i, part in enumerate(parts[:-1]):
        if isinstance(node, dict) and part in node and not isinstance(node[part], dict):
            raise ConfigError(
                f"config key {'.'.join(parts[: i + 1])!r} is a single value, not a section; "
                f"write {'.'.join(parts[: i + 1])}=VALUE (override {key!r} goes too deep)"
            )
        if not isinstance(node, dict) or part not in node or not isinstance(node[part], dict):
            raise ConfigError(
                f"unknown config key {'.'.join(parts[: i + 1])!r} in override {key!r}"
            )
        node = node[part]
    if isinstance(node.get(parts[-1]), dict) and not isinstance(value, dict):
        raise ConfigError(
            f"config key {key!r} is a section; set one of its fields, e.g. "
            f"{key}.{next(iter(node[parts[-1]]), 'field')}=VALUE"
        )
    if parts[-1] not in node:
        raise unknown_choice(
            f"config key under {'.'.join(parts[:-1]) or 'the top level'}:",
            parts[-1],
            [k for k in node],
        )
    node[parts[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """``"train.lr=0.5"`` -> ``("train.lr", 0.5)``; values are read as YAML scalars."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like key=value (e.g. train.lr=0.5)")
    key, raw = text.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.strip(), value


def load_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML (.yaml/.yml) or TOML (.toml) config file into a mapping."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"config file {path} is a folder; give a YAML or TOML file")
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    if not path.is_file():  # a device or a pipe: reading it could block forever
        raise ConfigError(f"config file {path} is not a regular file; give a YAML or TOML file")
    text = read_text(path, ConfigError, "config file")
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise ConfigError(f"cannot parse {path}: {first_line(exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of config sections (e.g. model: ...)")
    return data


def merge(base: dict[str, Any], update: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Deep-merge ``update`` into a copy of ``base``; keys must already exist in ``base``."""
    out = dict(base)
    for key, value in update.items():
        if key not in out:
            raise unknown_choice(f"config key under {prefix or 'the top level'}:", key, out)
        if isinstance(out[key], dict) and isinstance(value, dict):
            out[key] = merge(out[key], value, f"{prefix}{key}.")
        elif isinstance(out[key], dict):
            raise ConfigError(
                f"config section {prefix}{key} must be a mapping of its fields "
                f"(e.g. {prefix}{key}: {{{next(iter(out[key]), 'field')}: ...}}), got {value!r:.60}"
            )
        elif isinstance(value, dict):
            raise ConfigError(
                f"config key {prefix}{key} is a single value, not a section; "
                f"write {prefix}{key}: VALUE (got a mapping)"
            )
        else:
            out[key] = value
    return out


def apply_overrides(
    base: C, file: str | Path | None = None, overrides: list[str] | None = None
) -> C:
    """``base`` updated by a config file and then by ``key=value`` overrides, *not* validated
    (:func:`highway_transformer.validation.build_config` is this, validated)."""
    data = base.to_dict()  # type: ignore[attr-defined]
    if file is not None:
        data = merge(data, load_file(file))
    for text in overrides or []:
        key, value = parse_override(text)
        set_dotted(data, key, value)
    return from_dict(type(base), data)


def save_config(config: Any, path: str | Path) -> None:
    """Write a config as YAML (or JSON for a .json path)."""
    path = Path(path)
    if path.suffix == ".json":
        path.write_text(config.to_json(), encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(_plain(config.to_dict()), sort_keys=False), encoding="utf-8")


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    return obj
