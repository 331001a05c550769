"""Optional dependencies (``extras.py``): a missing extra names its install command; only
listed modules are extras."""

from __future__ import annotations

import sys

import pytest

from highway_transformer.errors import HighwayError, MissingExtra
from highway_transformer.extras import import_extra


def test_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # importing it now raises ImportError
    with pytest.raises(MissingExtra, match=r"pip install 'highway-transformer\[subword\]'"):
        import_extra("tokenizers", "subword vocabularies")
    assert issubclass(MissingExtra, HighwayError)


def test_import_extra_refuses_unlisted_modules() -> None:
    with pytest.raises(KeyError, match="not an optional dependency"):
        import_extra("json", "nothing")
