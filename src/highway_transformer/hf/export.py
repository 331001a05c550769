"""``highway export RUN --format hf --out DIR``: a language-model checkpoint as a folder that
``AutoModelForCausalLM`` / ``AutoTokenizer`` / ``pipeline`` load (after
``import highway_transformer.hf``, which registers the classes; no remote code)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from torch import nn

from ..api import load_pretrained
from ..config import Config
from ..data.vocab import Vocabulary
from ..errors import CheckpointError, ConfigError
from ..models.lm import LanguageModel
from .modeling import HighwayForCausalLM, transformers
from .tokenization import build_tokenizer


def language_model_of(
    folder: str | Path, trust_unverified: bool = False
) -> tuple[LanguageModel, Vocabulary]:
    """The language model and vocabulary of a checkpoint folder; a task run (music,
    pixels, ...) is a one-line :class:`CheckpointError`."""
    model, config, vocab = load_pretrained(folder, trust_unverified=trust_unverified)
    _check_language_model(folder, model, config, vocab)
    assert isinstance(model, LanguageModel) and vocab is not None  # checked above
    return model, vocab


def _check_language_model(
    folder: str | Path, model: nn.Module, config: Config, vocab: Vocabulary | None
) -> None:
    if config.task.name != "lm" or vocab is None or not isinstance(model, LanguageModel):
        raise CheckpointError(
            f"{folder} is a {config.task.name} checkpoint; only a language model "
            "(task.name=lm) exports to Transformers"
        )


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """Without Transformers' progress bars (one command, one line of output)."""
    logging = transformers.utils.logging
    shown = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            logging.enable_progress_bar()


def export_hf(checkpoint: str | Path, out: str | Path, *, trust_unverified: bool = False) -> Path:
    """Write the model (``config.json``, ``model.safetensors``, ``generation_config.json``)
    and its tokenizer (``tokenizer.json``, ``tokenizer_config.json``) into ``out``, a new
    or empty folder; returns it."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"{out} exists and is not an empty folder; give a new --out folder")
    model, vocab = language_model_of(checkpoint, trust_unverified)
    wrapped = HighwayForCausalLM.from_language_model(model)
    # as `highway generate`: sampling at temperature 1 from every symbol unless told
    # (Transformers would otherwise be greedy, or keep the top 50 when sampling)
    wrapped.generation_config.do_sample = True
    wrapped.generation_config.top_k = 0
    with quiet_transformers():
        wrapped.save_pretrained(out)
        build_tokenizer(vocab).save_pretrained(out)
    return out
