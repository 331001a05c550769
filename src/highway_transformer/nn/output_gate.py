"""The attention-output gate (Qiu et al. 2025, "Gated Attention for LLMs", position G1).

``Y' = Y ⊙ σ(h W_θ)``: each head's attention output ``Y`` (before the output projection
``Wo``) multiplied by a sigmoid of the attention sublayer's own input ``h`` (after its pre-LN
norm, where the model is pre-LN). ``elementwise``: one gate per head feature (``W_θ``:
``D -> H·d_head``); ``headwise``: one scalar per head (``D -> H``). The reference code
(``qiuzh20/gated_attention``, ``modeling_qwen3.py``, ``Qwen3Attention``) widens ``q_proj`` by
these rows; here they are a Linear of their own, so a model without the gate keeps its
parameters as they were (the same map: docs/fidelity.md). Its weight is drawn by the model's
initialisation like every projection, its bias (``model.bias``, as the reference's
``qkv_bias``) starts at 0. Oracle: :func:`.reference.attention_output_gate`.
"""

from __future__ import annotations

from torch import Tensor, nn

from ..config.names import ATTN_OUTPUT_GATES
from ..errors import unknown_choice


class AttentionOutputGate(nn.Module):
    """``heads ⊙ σ(h W_θ + b)`` for the heads ``[B, L, H·d_head]`` of the input ``h [B, L, D]``."""

    def __init__(
        self, d_model: int, n_heads: int, d_head: int, granularity: str, bias: bool = True
    ) -> None:
        super().__init__()
        if granularity not in ATTN_OUTPUT_GATES[1:]:
            raise unknown_choice("attention-output gate", granularity, ATTN_OUTPUT_GATES[1:])
        self.n_heads, self.d_head = n_heads, d_head
        self.granularity = granularity
        width = n_heads * d_head if granularity == "elementwise" else n_heads
        self.proj = nn.Linear(d_model, width, bias=bias)

    def forward(self, h: Tensor, heads: Tensor) -> Tensor:
        gate = self.gate_scores(h)
        if self.granularity == "elementwise":
            return heads * gate
        shape = heads.shape
        return (heads.reshape(*shape[:-1], self.n_heads, self.d_head) * gate[..., None]).view(shape)

    def gate_scores(self, h: Tensor) -> Tensor:
        """``σ(h W_θ + b)``: ``[B, L, H·dh]`` (elementwise) or ``[B, L, H]`` (headwise)."""
        return self.proj(h).sigmoid()

    def gate_bias(self) -> Tensor | None:
        """The learned bias of ``W_θ`` (None without biases, ``model.bias=false``)."""
        return self.proj.bias

    def extra_repr(self) -> str:
        return f"granularity={self.granularity}"


def build_output_gate(
    granularity: str, d_model: int, n_heads: int, d_head: int, bias: bool = True
) -> AttentionOutputGate | None:
    """The gate for ``model.attn_output_gate`` (None for ``none``: no parameters at all)."""
    if granularity == "none":
        return None
    return AttentionOutputGate(d_model, n_heads, d_head, granularity, bias)
