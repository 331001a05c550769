"""Self-gated Transformer sequence models (Highway Transformer)."""
