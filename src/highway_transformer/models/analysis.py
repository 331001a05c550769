"""What a trained model's gates and attention do on real text (``highway analyze``).

Forward hooks read, layer by layer, while the task scores a few validation windows:

* the **attention sink** (Xiao et al. 2024; Qiu et al. 2025 §4): the mean share of
  attention that queries at positions ≥ 1 give to the window's first key, per layer and
  head (dot-product attention, recomputed from the layer's own weights:
  :meth:`~highway_transformer.nn.attention.MultiHeadAttention.attention_weights`);
* the **gate scores** of every gate (each combiner's and the attention-output gate's
  ``gate_scores``): their mean, the fraction below 0.1 (Qiu et al. 2025's sparsity) and a
  histogram over [0, 1], or [-1, 1] for tanh SDU gates;
* **massive activations** (Sun et al. 2024): the largest |h| of the residual stream after
  each block, and its ratio to the median |h|;
* the **gate biases** of every gate that learns one (HT Figs. 13-14: mean, fraction > 0).

The hooks only read; with none registered the forward is the same code as always.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from ..nn.attention import MultiHeadAttention
from ..nn.combiner import Combiner
from ..nn.output_gate import AttentionOutputGate

#: Histogram bins of the gate scores.
BINS = 20
#: Qiu et al. 2025's sparsity threshold: a gate score below it all but closes the gate.
SPARSE_BELOW = 0.1


@dataclass
class _Gate:
    """Running statistics of one gate's scores."""

    kind: str
    low: float  # the histogram's range
    total: float = 0.0
    count: int = 0
    below: int = 0
    histogram: Tensor = field(default_factory=lambda: torch.zeros(BINS, dtype=torch.float64))

    def add(self, scores: Tensor) -> None:
        s = scores.detach().double().flatten()
        self.total += float(s.sum())
        self.count += s.numel()
        self.below += int((s < SPARSE_BELOW).sum())
        self.histogram += torch.histc(s, BINS, self.low, 1.0).cpu()

    def summary(self) -> dict[str, Any]:
        n = max(self.count, 1)
        return {
            "kind": self.kind,
            "mean": self.total / n,
            "fraction_below_0.1": self.below / n,
            "histogram": {"low": self.low, "high": 1.0, "counts": self.histogram.tolist()},
            "count": self.count,
        }


@dataclass
class _Sink:
    """Running first-key attention share of one attention layer, per head."""

    total: Tensor | None = None
    queries: int = 0
    uniform: float = 0.0  # what uniform attention over the keys each query sees would give

    def add(self, weights: Tensor) -> None:
        first = weights[:, :, 1:, 0].double()  # [B, H, L-1]: queries that could look past it
        share = first.sum(dim=(0, 2)).cpu()
        self.total = share if self.total is None else self.total + share
        self.queries += first.shape[0] * first.shape[2]
        seen = (weights[0, 0, 1:] > 0).sum(-1).double()  # keys each query may attend to
        self.uniform += float((1.0 / seen).sum()) * first.shape[0]

    def summary(self) -> dict[str, Any]:
        assert self.total is not None
        n = max(self.queries, 1)
        return {"heads": (self.total / n).tolist(), "uniform": self.uniform / n}


@dataclass
class _Activations:
    """The largest and the median |h| of one block's output, over the windows read."""

    largest: float = 0.0
    medians: list[float] = field(default_factory=list)

    def add(self, h: Tensor) -> None:
        magnitude = h.detach().abs().float()
        self.largest = max(self.largest, float(magnitude.max()))
        self.medians.append(float(magnitude.median()))

    def summary(self) -> dict[str, float]:
        median = sorted(self.medians)[len(self.medians) // 2]
        return {"max_abs": self.largest, "median_abs": median,
                "ratio": self.largest / median if median else float("inf")}  # fmt: skip


class Probe:
    """Hooks on a model's blocks, attentions and gates that gather the module's measures;
    :meth:`summary` gives them by layer (1-based, as the gate names elsewhere)."""

    def __init__(self, model: nn.Module) -> None:
        self.sinks: dict[str, _Sink] = {}
        self.gates: dict[str, _Gate] = {}
        self.activations: dict[str, _Activations] = {}
        self.biases: dict[str, Tensor] = {}
        self._handles: list[Any] = []
        for i, block in enumerate(getattr(model, "blocks", [])):
            self._watch_block(f"layer{i + 1}", block)

    def _watch_block(self, layer: str, block: nn.Module) -> None:
        self.activations[layer] = _Activations()
        self._hook(block, lambda _m, _i, out: self.activations[layer].add(out))
        kinds, connections = getattr(block, "kinds", ()), getattr(block, "connections", ())
        seen: dict[str, int] = {}
        for kind, connection in zip(kinds, connections, strict=True):
            seen[kind] = seen.get(kind, 0) + 1
            combiner = connection.combiner
            if type(combiner).gate_scores is Combiner.gate_scores:  # the plain residual
                continue
            suffix = "" if kinds.count(kind) == 1 else str(seen[kind])  # as gate_biases names
            self._watch_gate(
                f"{layer}.{kind}{suffix}",
                combiner,
                _combiner_kind(combiner),
                lambda m, inputs: m.gate_scores(*inputs),
            )  # (x, y)
        for module in block.modules():
            if isinstance(module, MultiHeadAttention):
                self.sinks[layer] = _Sink()
                self._hook(module, self._sink_hook(layer), with_kwargs=True)
            elif isinstance(module, AttentionOutputGate):
                kind = f"attn-output ({module.granularity})"
                self._watch_gate(
                    f"{layer}.attn-output", module, kind, lambda m, inputs: m.gate_scores(inputs[0])
                )  # (h, heads)

    def _watch_gate(self, where: str, module: nn.Module, kind: str, scores: Any) -> None:
        tanh = getattr(module, "activation", "sigmoid") == "tanh"
        self.gates[where] = _Gate(kind, -1.0 if tanh else 0.0)
        bias = module.gate_bias()
        if bias is not None:
            self.biases[where] = bias.detach().float().cpu()
        self._hook(module, lambda m, inputs, _out: self.gates[where].add(scores(m, inputs)))

    def _sink_hook(self, layer: str):  # noqa: ANN202 - a forward hook
        def hook(module: MultiHeadAttention, inputs: tuple, kwargs: dict, _out: Tensor) -> None:
            if kwargs.get("cache") is None and inputs[0].shape[1] > 1:
                self.sinks[layer].add(module.attention_weights(inputs[0]))

        return hook

    def _hook(self, module: nn.Module, hook: Any, *, with_kwargs: bool = False) -> None:
        self._handles.append(module.register_forward_hook(hook, with_kwargs=with_kwargs))

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def summary(self) -> dict[str, Any]:
        return {
            "attention_sink": {layer: s.summary() for layer, s in self.sinks.items() if s.queries},
            "gates": {where: g.summary() for where, g in self.gates.items() if g.count},
            "activations": {
                layer: a.summary() for layer, a in self.activations.items() if a.medians
            },  # fmt: skip
            "gate_biases": {
                where: {
                    "mean": float(b.mean()),
                    "fraction_positive": float((b > 0).float().mean()),
                    "size": b.numel(),
                }
                for where, b in self.biases.items()
            },  # fmt: skip
        }


@contextmanager
def probing(model: nn.Module) -> Iterator[Probe]:
    """A :class:`Probe` on ``model`` for the ``with`` body; its hooks are removed after."""
    probe = Probe(model)
    try:
        yield probe
    finally:
        probe.remove()


def _combiner_kind(module: nn.Module) -> str:
    activation = getattr(module, "activation", None)
    name = type(module).__name__
    return f"{name} ({activation})" if activation else name
