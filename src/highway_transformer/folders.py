"""Output folders, created before any work so a wrong place fails at once, on one line."""

from __future__ import annotations

import tempfile
from pathlib import Path

from .errors import ConfigError


def make_folder(path: str | Path, option: str) -> Path:
    """Create ``path`` (and parents) and check it is writable; ``option`` names the setting.

    A file in the way, a parent that is a file, or a read-only place raises
    :class:`ConfigError` saying so.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {path} is a file; give a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(
            f"{option} {path} cannot be used ({reason}); choose another folder"
        ) from None
    return path
