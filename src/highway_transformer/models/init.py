"""Weight initialisation by module type (the shape of nanoGPT's ``apply(_init_weights)``).

Schemes (``model.init``) for the weights of ``Linear``, ``Embedding`` and recurrent layers:

* ``uniform``: U(-a, a), ``a = model.init_range`` (HT A.1: 0.1 char PTB; A.2: 0.01 word PTB);
* ``normal``: N(0, ``model.init_std``) (Transformer-XL code: 0.02);
* ``torch``: PyTorch's own initialisation, unchanged.

Their biases start at 0. ``model.init_embedding`` draws a language model's token embedding
and output layer on their own (``uniform`` or ``normal``, output bias 0), whatever the other
weights do: the R-Transformer language code keeps PyTorch's defaults everywhere else.
``model.init_proj_std`` draws the adaptive input/softmax projections
from N(0, std) (Transformer-XL ``proj_init_std``: 0.01). LayerNorm and RMSNorm
(``model.init_norm``): ``ones`` keeps weight 1, ``normal`` draws it from N(1, ``init_std``)
as the Transformer-XL code does; biases 0.

Parameters a module defines itself are its own business: they are never re-drawn here (XL
``u``/``v``, score parameters), and a module whose parts the type pass would overwrite (Shaw
edge vectors are Embeddings, a gate's ``b1`` is a Linear bias) restores them in
``reset_own_parameters()``, which runs after the pass.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn

from ..config import ModelConfig
from ..errors import ConfigError
from ..nn.adaptive import AdaptiveInput
from ..nn.adaptive_softmax import AdaptiveSoftmax


@dataclass(frozen=True)
class _Init:
    scheme: str
    init_range: float
    init_std: float
    proj_std: float | None
    norm: str

    def weight(self, weight: Tensor) -> None:
        if self.scheme == "uniform":
            weight.uniform_(-self.init_range, self.init_range)
        elif self.scheme == "normal":
            weight.normal_(0.0, self.init_std)

    def __call__(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Embedding):
            self.weight(module.weight)
            if getattr(module, "bias", None) is not None:
                module.bias.zero_()
        elif isinstance(module, nn.RNNBase):
            for name, param in module.named_parameters(recurse=False):
                if name.startswith("bias"):
                    param.zero_()
                else:
                    self.weight(param)
        elif isinstance(module, nn.LayerNorm | nn.RMSNorm):
            if module.weight is not None and self.norm == "normal":
                module.weight.normal_(1.0, self.init_std)
            elif module.weight is not None:
                module.weight.fill_(1.0)
            if getattr(module, "bias", None) is not None:  # RMSNorm has none
                module.bias.zero_()
        # Module.apply visits children first: these override the projections' Linear init.
        elif self.proj_std is not None:
            for projection in _projections(module):
                projection.normal_(0.0, self.proj_std)


def _projections(module: nn.Module) -> list[Tensor]:
    """The adaptive input/softmax projections of ``module`` (none for other modules)."""
    if isinstance(module, AdaptiveInput | AdaptiveSoftmax):
        return [projection.weight for projection in module.projections]
    return []


@torch.no_grad()
def initialize(model: nn.Module, config: ModelConfig) -> None:
    """Initialise ``model`` by module type as ``config`` says, then let modules restore the
    parameters they own."""
    init = _Init(
        config.init, config.init_range, config.init_std, config.init_proj_std, config.init_norm
    )
    if config.init == "torch":
        # PyTorch's defaults stay; only the LayerNorm choice applies.
        if config.init_norm == "normal":
            model.apply(lambda m: init(m) if isinstance(m, nn.LayerNorm | nn.RMSNorm) else None)
    else:
        model.apply(init)
    if config.init_embedding:
        _init_token_tables(model, replace(init, scheme=config.init_embedding))
    for module in model.modules():
        reset = getattr(module, "reset_own_parameters", None)
        if callable(reset):
            reset()


def _init_token_tables(model: nn.Module, init: _Init) -> None:
    """Draw the token embedding and output layer weights (a tied matrix twice: the last draw
    stays, as in the RT code), and zero the output bias."""
    tables = getattr(model, "token_tables", None)
    modules = tables() if callable(tables) else ()
    if not modules or not all(isinstance(m, nn.Linear | nn.Embedding) for m in modules):
        raise ConfigError(
            "model.init_embedding applies to a language model's plain token embedding and "
            "output layer (not adaptive ones, not this task's model); unset it"
        )
    for module in modules:
        init(module)
