"""Suite-wide fixtures."""

from __future__ import annotations

import pytest
import torch

from highway_transformer.data.download import CACHE_ENV


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny tensors: one intra-op thread avoids thread-pool overhead on a shared CPU."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Token caches and downloads go to a folder of this test session, not the user's cache."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path_factory.getbasetemp() / "cache"))
