"""The package's public names (``highway_transformer/__init__.py``): each is the object of the
layer that owns it, imported on first use, and nothing else is an attribute."""

from __future__ import annotations

import importlib

import pytest

import highway_transformer


def test_every_public_name_is_its_owners_object() -> None:
    exports = highway_transformer._EXPORTS
    assert sorted(highway_transformer.__all__) == sorted(exports)
    for name, owner in exports.items():
        module = importlib.import_module(f"highway_transformer.{owner}")
        assert getattr(highway_transformer, name) is getattr(module, name), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'Trainr'"):
        highway_transformer.Trainr  # noqa: B018
    assert not hasattr(highway_transformer, "training_loop")
