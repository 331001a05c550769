"""Transformers integration (the ``hf`` extra): importing this package registers
``model_type="highway-transformer"`` with ``AutoConfig`` and ``AutoModelForCausalLM``, so a
folder written by ``highway export RUN --format hf --out DIR`` loads with
``AutoModelForCausalLM.from_pretrained(DIR)``, ``AutoTokenizer`` and ``pipeline``.

The core package never imports this one (nor ``transformers``).
"""

from __future__ import annotations

from .export import export_hf, language_model_of
from .modeling import MODEL_TYPE, HighwayCache, HighwayConfig, HighwayForCausalLM, register
from .tokenization import build_tokenizer

register()

__all__ = [
    "MODEL_TYPE",
    "HighwayCache",
    "HighwayConfig",
    "HighwayForCausalLM",
    "build_tokenizer",
    "export_hf",
    "language_model_of",
    "register",
]
