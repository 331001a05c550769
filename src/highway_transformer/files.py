"""Files the user points at: output folders made before any work, text read with one error.

Every reader of a user's or a checkpoint's text file goes through :func:`read_text`, so a
missing, unreadable, binary or non-UTF-8 file is one line naming the file and the fix.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from .errors import ConfigError, HighwayError


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


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (errors are printed on one line)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def read_text(
    path: str | Path,
    error: type[HighwayError],
    what: str = "",
    *,
    binary_fix: str | None = "give the right file",
    utf8_fix: str = "save it as UTF-8",
    empty_fix: str | None = None,
) -> str:
    """A UTF-8 text file, or ``error`` naming the file (``what`` says what it is).

    ``binary_fix``: a NUL byte means a binary file, refused with this advice (None: NUL
    bytes are text); ``utf8_fix``: advice for bytes that are not UTF-8; ``empty_fix``: an
    empty (or all-whitespace) file is refused with this advice (None: accepted).
    """
    path = Path(path)
    name = f"{what} {path}" if what else str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise error(f"cannot read {name}: {exc.strerror or exc}") from None
    if binary_fix is not None and b"\0" in data:
        raise error(f"{name} is a binary file, not text; {binary_fix}")
    if empty_fix is not None and not data.strip():
        raise error(f"{name} is empty; {empty_fix}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{name} is not UTF-8 text (byte {exc.start}); {utf8_fix}") from None
