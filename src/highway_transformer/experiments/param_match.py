"""Parameter-matched baselines: the plain model with ``d_inner`` raised to a gated row's size.

Gated rows carry about a third more parameters than their plain baseline (each SDU adds two
d x d maps per sublayer), so "the gate helps" could be "more parameters help". The
``<table>/<base>+param-matched`` rows answer that: the baseline's architecture with the FFN
widened until its parameter count equals the gated row's at the same scale.
"""

from __future__ import annotations

from ..config import Config, ModelConfig

# Embeddings and softmax are the same in a row and its baseline; any vocabulary size compares.
_VOCAB = 64
#: d_inner's change that moves a SwiGLU hidden size (round(2/3 d_inner), up to a multiple of
#: 8) by one step of 8.
_SWIGLU_D_INNER_STEP = 12


def count_parameters(model: ModelConfig) -> int:
    """Parameters of a language model built from ``model`` (at a fixed vocabulary size)."""
    from ..models.lm import LanguageModel  # torch: only when a row is matched

    sized = ModelConfig(**{**model.__dict__, "vocab_size": _VOCAB})
    return sum(p.numel() for p in LanguageModel(sized).parameters())


def matched_d_inner(model: ModelConfig, target: ModelConfig) -> int:
    """The ``d_inner`` that gives ``model`` as many parameters as ``target`` (they grow
    linearly with ``d_inner``; the result is the nearest integer). A SwiGLU FFN's hidden size
    moves in steps of 8 (``nn/feedforward.py``), so the slope is read over one such step."""
    base = count_parameters(model)
    step = 1 if model.ffn == "relu" else _SWIGLU_D_INNER_STEP
    wider = count_parameters(ModelConfig(**{**model.__dict__, "d_inner": model.d_inner + step}))
    goal = count_parameters(target)
    guess = max(1, model.d_inner + round((goal - base) * step / (wider - base)))
    if step == 1:
        return guess
    # the nearest of the SwiGLU sizes around the linear guess (ties: the smaller d_inner)
    near = range(max(1, guess - step), guess + step + 1)
    return min(near, key=lambda d: (abs(_count_with(model, d) - goal), d))


def _count_with(model: ModelConfig, d_inner: int) -> int:
    return count_parameters(ModelConfig(**{**model.__dict__, "d_inner": d_inner}))


def match_parameters(config: Config, target: Config) -> Config:
    """``config`` with ``model.d_inner`` matched to ``target``'s parameter count."""
    return config.replace(**{"model.d_inner": matched_d_inner(config.model, target.model)})
