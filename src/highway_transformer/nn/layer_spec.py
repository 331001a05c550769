"""Where gates go: the paper's layer specifications (HT §4, Tables 5-6).

``all``, ``none``, ``1-3``, ``3-6``, ``1,2``, ``1-2,5``: 1-based layer numbers. A ``\\FFN``
suffix (``1-6\\FFN``) means attention-only gating: the FFN sublayers stay plain.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError

_NO_FFN_SUFFIXES = ("\\ffn", "/ffn", "-ffn", "_noffn")


@dataclass(frozen=True)
class LayerSpec:
    spans: tuple[range, ...]  # the 0-based layer indices, as ranges: any depth costs nothing
    ffn: bool  # False for the "\FFN" (attention-only) variants

    def __contains__(self, layer: object) -> bool:
        return any(layer in span for span in self.spans)

    def gated(self, layer: int, sublayer: str, sublayers: tuple[str, ...]) -> bool:
        """Whether ``sublayer`` (attn | ffn | rnn) of 0-based ``layer`` gets the gate."""
        if layer not in self or sublayer not in sublayers:
            return False
        return self.ffn or sublayer != "ffn"


def parse_layer_spec(spec: str, n_layers: int) -> LayerSpec:
    """Parse a paper-style layer spec for a model of ``n_layers`` layers."""
    text = str(spec).strip().lower().replace(" ", "")
    ffn = True
    for suffix in _NO_FFN_SUFFIXES:
        if text.endswith(suffix):
            text, ffn = text[: -len(suffix)], False
            break
    if text.startswith("l"):
        text = text[1:]
    if text in ("all", ""):
        return LayerSpec((range(n_layers),), ffn)
    if text == "none":
        return LayerSpec((), ffn)
    spans: list[range] = []
    for part in text.split(","):
        part = part.lstrip("l")
        try:
            if "-" in part:
                lo_text, hi_text = part.split("-", 1)
                lo, hi = int(lo_text), int(hi_text.lstrip("l"))
            else:
                lo = hi = int(part)
        except ValueError:
            raise ConfigError(
                f"cannot read gate layer spec {spec!r}; write all, none, 1-3, 1,2 or 1-6\\FFN "
                "(1-based layer numbers)"
            ) from None
        if lo < 1 or hi > n_layers or lo > hi:
            raise ConfigError(
                f"gate layer spec {spec!r} names layers outside 1..{n_layers} "
                f"(the model has {n_layers} layers)"
            )
        spans.append(range(lo - 1, hi))
    return LayerSpec(tuple(spans), ffn)
