"""``save_pretrained`` / ``from_pretrained`` / ``push_to_hub`` for every model class.

A pretrained folder is ``model.safetensors`` (weights, tied weights stored once) and
``config.json``: ``{"architecture": CLASS, "model": ModelConfig, "init": {other constructor
arguments}}`` — JSON and safetensors only, nothing that executes code when read. A language
model may add ``vocab.json``; ``manifest.json`` holds the SHA-256 of each, verified before
a file is read (a folder without one loads only with ``trust_unverified=True``).
``from_pretrained`` also reads a training checkpoint folder of a language model
(``runs/NAME/best``) and, where ``huggingface_hub`` is installed, a Hub repository id
(downloaded with ``snapshot_download``; ``push_to_hub`` uploads a folder).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import torch

from ..config import ModelConfig, from_dict
from ..errors import CheckpointError, ConfigError, HighwayError
from ..storage.folder import (
    CONFIG_FILE,
    MODEL_FILE,
    TOKENIZER_FILE,
    VOCAB_FILE,
    read_json,
    trusting_unverified,
    verify,
    write_manifest,
)
from ..storage.weights import load_weights_checked, save_weights

M = TypeVar("M", bound="PretrainedMixin")


class PretrainedMixin:
    """Hugging Face–style persistence; a class lists its constructor arguments in
    :meth:`init_arguments` (besides its :class:`ModelConfig`)."""

    config: ModelConfig

    def init_arguments(self) -> dict[str, Any]:
        """JSON-able constructor arguments besides ``config`` (none by default)."""
        return {}

    def save_pretrained(self, folder: str | Path, vocab: Any = None) -> Path:
        """Write ``model.safetensors`` + ``config.json`` (+ ``vocab.json``) into ``folder``,
        with their SHA-256 in ``manifest.json``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_weights(self, folder / MODEL_FILE)  # type: ignore[arg-type]
        record = {
            "architecture": type(self).__name__,
            "model": asdict(self.config),
            "init": self.init_arguments(),
        }
        (folder / CONFIG_FILE).write_text(json.dumps(record, indent=2), encoding="utf-8")
        if vocab is not None:
            vocab.save(folder / VOCAB_FILE)
        written = (MODEL_FILE, CONFIG_FILE, VOCAB_FILE, TOKENIZER_FILE)
        write_manifest(folder, [name for name in written if (folder / name).is_file()])
        return folder

    @classmethod
    def from_pretrained(
        cls: type[M],
        name_or_folder: str | Path,
        device: str | torch.device = "cpu",
        *,
        trust_unverified: bool = False,
        **hub: Any,
    ) -> M:
        """The model saved in a folder (or a Hub repository ``owner/name``), in eval mode, its
        files verified against the folder's ``manifest.json`` (``trust_unverified=True``
        reads a folder without one unchecked).

        ``hub`` keyword arguments (``revision``, ``cache_dir``, ``local_files_only``, ``token``)
        go to ``huggingface_hub.snapshot_download``.
        """
        folder = Path(name_or_folder)
        if not folder.is_dir():
            folder = _download(str(name_or_folder), hub)
        with trusting_unverified(trust_unverified):
            return cls._load_folder(folder).to(device).eval()  # type: ignore[attr-defined]

    @classmethod
    def _load_folder(cls: type[M], folder: Path) -> M:
        record = _read_record(folder)
        if "architecture" not in record:  # a training checkpoint folder (config.json = Config)
            model = cls._from_checkpoint(folder)
        else:
            if record["architecture"] != cls.__name__:
                raise CheckpointError(
                    f"{folder} holds a model of class {record['architecture']}; load it with "
                    f"{record['architecture']}.from_pretrained"
                )
            try:
                config = from_dict(ModelConfig, record["model"])
                model = cls(config, **record.get("init", {}))  # type: ignore[call-arg]
            except (HighwayError, TypeError, KeyError) as exc:
                raise CheckpointError(f"{folder / CONFIG_FILE} does not fit: {exc}") from None
        load_weights_checked(model, verify(folder, MODEL_FILE))  # type: ignore[arg-type]
        return model

    @classmethod
    def _from_checkpoint(cls: type[M], folder: Path) -> M:
        raise CheckpointError(
            f"{folder} is a training checkpoint, not a {cls.__name__} saved with save_pretrained"
        )

    def push_to_hub(self, repo_id: str, vocab: Any = None, **upload: Any) -> str:
        """Upload the pretrained folder to the Hub repository ``repo_id``; returns its URL."""
        hf = _hub()
        with tempfile.TemporaryDirectory() as tmp:
            self.save_pretrained(tmp, vocab)
            api = hf.HfApi(token=upload.pop("token", None))
            api.create_repo(repo_id, exist_ok=True, private=upload.pop("private", None))
            info = api.upload_folder(repo_id=repo_id, folder_path=tmp, **upload)
        return str(getattr(info, "commit_url", info))


def _hub() -> Any:
    try:
        import huggingface_hub
    except ImportError:
        raise ConfigError(
            "Hub access needs huggingface_hub (pip install huggingface_hub); "
            "a local folder loads without it"
        ) from None
    return huggingface_hub


def _download(repo_id: str, hub: dict[str, Any]) -> Path:
    if repo_id.count("/") != 1 or repo_id.startswith((".", "/")):
        raise CheckpointError(f"{repo_id} is neither a folder nor a Hub repository id (owner/name)")
    hf = _hub()
    try:
        return Path(hf.snapshot_download(repo_id, **hub))
    except Exception as exc:  # network, authentication, missing repository
        raise CheckpointError(f"cannot fetch {repo_id} from the Hub: {exc}") from None


def _read_record(folder: Path) -> dict[str, Any]:
    if not (folder / CONFIG_FILE).is_file():
        raise CheckpointError(
            f"{folder} has no {CONFIG_FILE}; give a folder written by save_pretrained"
        )
    record = read_json(verify(folder, CONFIG_FILE), "model config")
    if not isinstance(record, dict):
        raise CheckpointError(f"{folder / CONFIG_FILE} must hold a JSON object")
    return record
