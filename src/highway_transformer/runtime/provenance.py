"""Which code a run was trained by: the library's version, the SHA-256 of its source files
and, from a git checkout, the commit and whether the source had uncommitted changes.

The source hash is the code's identity: two runs with the same hash ran the same library code,
whether it came from a checkout (clean or not) or an installed package. A report pairs runs
only when they share it (``highway report --allow-mixed-code`` says otherwise, and the report
then says so). Reading it needs no torch.
"""

from __future__ import annotations

import hashlib
import subprocess
from functools import lru_cache
from pathlib import Path

from .. import __version__

#: The package's own folder: the files whose contents are the code's identity.
PACKAGE = Path(__file__).resolve().parents[1]
#: The facts :func:`code_facts` records (beside the machine's; they are not part of it).
CODE_FACTS = ("code_version", "code_sha256", "commit", "dirty")


def source_sha256(package: Path = PACKAGE) -> str:
    """SHA-256 over the package's Python sources: each file's path (from the package) and
    bytes, in path order."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode("utf-8") + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _git(folder: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=folder, capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@lru_cache(maxsize=1)
def code_facts() -> dict[str, object]:
    """``{"code_version", "code_sha256", "commit", "dirty"}`` of the code running now;
    ``commit`` and ``dirty`` are None outside a git checkout (an installed package)."""
    commit = _git(PACKAGE, "rev-parse", "HEAD")
    status = _git(PACKAGE, "status", "--porcelain", "--", ".") if commit else None
    return {
        "code_version": __version__,
        "code_sha256": source_sha256(),
        "commit": commit,
        "dirty": None if status is None else bool(status),
    }
