"""Weight initialisation schemes of the papers.

* ``uniform``: every weight ~ U(-a, a), biases 0 (HT A.1: a = 0.1 char PTB; A.2: 0.01 word PTB).
* ``normal``: every weight ~ N(0, std), biases 0 (Transformer-XL code: std 0.02).
* ``torch``: PyTorch's default initialisation, unchanged.

LayerNorm weights stay 1 and biases 0; gate biases are biases, so they start at 0 (HT §3).
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import unknown_choice

SCHEMES = ("uniform", "normal", "torch")


@torch.no_grad()
def initialize(
    model: nn.Module, scheme: str, init_range: float = 0.1, init_std: float = 0.02
) -> None:
    if scheme not in SCHEMES:
        raise unknown_choice("initialisation", scheme, SCHEMES)
    if scheme == "torch":
        return
    norm_params = {
        id(p) for m in model.modules() if isinstance(m, nn.LayerNorm) for p in m.parameters()
    }
    for name, param in model.named_parameters():
        if id(param) in norm_params:
            continue
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "bias" or leaf.startswith("bias_"):
            param.zero_()
        elif scheme == "uniform":
            param.uniform_(-init_range, init_range)
        else:
            param.normal_(0.0, init_std)
